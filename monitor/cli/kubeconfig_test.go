// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// np runs the CLI without the --server the other tests append.
func np(args ...string) (string, error) {
	var out bytes.Buffer
	err := Main(context.Background(), args, &out, io.Discard)
	return out.String(), err
}

// TestKubeconfigPlaintext: `nodepulse kubeconfig` merges a context into
// an existing kubeconfig and keeps the rest; client-go reads it as kubectl
// would (http:// server, no credentials); the CLI then reaches the
// monitor through the context alone, and config use-context switches.
func TestKubeconfigPlaintext(t *testing.T) {
	addr, _ := startMonitor(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	other := clientcmdapi.NewConfig()
	other.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://k8s.example:6443"}
	other.AuthInfos["prod"] = &clientcmdapi.AuthInfo{Token: "secret"}
	other.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "prod"}
	other.CurrentContext = "prod"
	if err := clientcmd.WriteToFile(*other, path); err != nil {
		t.Fatal(err)
	}
	out, err := np("kubeconfig", "--kubeconfig", path, "--context", "local", "--server", "http://127.0.0.1:6443", "--grpc-server", addr)
	if err != nil || !strings.Contains(out, `context "local" written to `+path) || !strings.Contains(out, "PLAINTEXT") {
		t.Fatalf("kubeconfig: %v %q", err, out)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "local" || cfg.Contexts["prod"] == nil || cfg.AuthInfos["prod"].Token != "secret" || len(cfg.Contexts) != 2 {
		t.Fatalf("merge lost or missed entries: current %q, contexts %v", cfg.CurrentContext, cfg.Contexts)
	}
	rest, err := clientcmd.NewNonInteractiveClientConfig(*cfg, "local", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil || rest.Host != "http://127.0.0.1:6443" || rest.CAFile != "" || rest.CertFile != "" {
		t.Fatalf("client-go reads the context as %+v, %v", rest, err)
	}
	// The current context is the nodepulse one: no --server needed.
	if out, err := np("--kubeconfig", path, "get", "nodes", "-o", "name"); err != nil || out != "node/web-1\n" {
		t.Fatalf("get nodes through the context: %q %v", out, err)
	}
	t.Setenv("KUBECONFIG", path)
	if out, err := np("config", "get-contexts"); err != nil || !strings.Contains(out, "*         local") || !strings.Contains(out, addr) {
		t.Errorf("get-contexts: %v\n%s", err, out)
	}
	if out, err := np("config", "use-context", "prod"); err != nil || out != "Switched to context \"prod\".\n" {
		t.Fatalf("use-context: %q %v", out, err)
	}
	if out, _ := np("config", "current-context"); out != "prod\n" {
		t.Errorf("current-context %q", out)
	}
	// A context of another cluster is not used, and naming it is an error.
	if _, err := np("--context", "prod", "get", "nodes"); err == nil || !strings.Contains(err.Error(), "no nodepulse gRPC address") {
		t.Errorf("--context of a plain Kubernetes cluster: %v", err)
	}
	if out, err := np("--context", "local", "get", "nodes", "-o", "name"); err != nil || out != "node/web-1\n" {
		t.Errorf("--context local: %q %v", out, err)
	}
	// Flags still win over the context.
	if _, err := np("--context", "local", "--server", "127.0.0.1:1", "--timeout", "300ms", "get", "nodes"); err == nil {
		t.Error("--server did not override the context")
	}
	for _, bad := range [][]string{
		{"--server", "127.0.0.1:6443"},
		{"--server", "http://127.0.0.1:6443", "--ca", path},
		{"--server", "https://127.0.0.1:6443"},
		{"--server", "https://127.0.0.1:6443", "--cert", path},
	} {
		if _, err := np(append([]string{"kubeconfig", "--kubeconfig", path}, bad...)...); err == nil {
			t.Errorf("kubeconfig %v accepted", bad)
		}
	}
}

// TestKubeconfigMTLS: against a monitor that requires client certificates,
// the context written from certs init's files is all the CLI needs (no
// --tls-* flags), and the operator certificate may change nodes; the
// same with --embed-certs, whose credentials the CLI writes to a private
// directory that is gone after the command.
func TestKubeconfigMTLS(t *testing.T) {
	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Operators: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	addr, _ := startMonitorTLS(t, tlsconfig.Config{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"), CAFile: filepath.Join(dir, "ca.crt")})
	if _, err := np("--server", addr, "--timeout", "2s", "get", "nodes"); err == nil {
		t.Fatal("a plaintext call to the mTLS monitor succeeded")
	}
	path := filepath.Join(dir, "kubeconfig")
	if _, err := np("kubeconfig", "--kubeconfig", path, "--context", "tls", "--server", "https://127.0.0.1:6443", "--grpc-server", addr,
		"--ca", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, "operator-admin.crt"), "--key", filepath.Join(dir, "operator-admin.key")); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}).Load()
	if err != nil {
		t.Fatal(err)
	}
	// Paths inside the kubeconfig's directory are written relative to it
	// (the loader resolves them), so the directory can move.
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "certificate-authority: ca.crt") || !strings.Contains(string(raw), "client-certificate: operator-admin.crt") {
		t.Errorf("paths not relative:\n%s", raw)
	}
	if cfg.AuthInfos["tls"].ClientCertificate != filepath.Join(dir, "operator-admin.crt") {
		t.Errorf("kubectl's loader resolves the certificate to %q", cfg.AuthInfos["tls"].ClientCertificate)
	}
	if out, err := np("--kubeconfig", path, "cordon", "web-1"); err != nil || out != "node/web-1 cordoned\n" {
		t.Fatalf("cordon through the mTLS context: %q %v", out, err)
	}

	// --embed-certs; and the --tls-* flags say the same as --ca, --cert, --key.
	embedded := filepath.Join(t.TempDir(), "kubeconfig")
	if _, err := np("kubeconfig", "--kubeconfig", embedded, "--embed-certs", "--server", "https://127.0.0.1:6443", "--grpc-server", addr,
		"--tls-ca", filepath.Join(dir, "ca.crt"), "--tls-cert", filepath.Join(dir, "operator-admin.crt"), "--tls-key", filepath.Join(dir, "operator-admin.key")); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(embedded); !strings.Contains(string(raw), "client-key-data:") {
		t.Fatalf("not embedded:\n%s", raw)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "nodepulse-kubeconfig-*"))
	if out, err := np("--kubeconfig", embedded, "uncordon", "web-1"); err != nil || out != "node/web-1 uncordoned\n" {
		t.Fatalf("uncordon through the embedded context: %q %v", out, err)
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "nodepulse-kubeconfig-*")); len(after) != len(before) {
		t.Errorf("embedded credentials left behind: %v", after)
	}
}
