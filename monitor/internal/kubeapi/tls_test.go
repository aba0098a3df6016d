// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// TestMTLSIdentities: with TLS, a certificate is a Kubernetes user (CN,
// groups from O) judged by the same policy as the gRPC door: an operator
// patches, a node reads and is refused changes, a client without a
// certificate is 401.
func TestMTLSIdentities(t *testing.T) {
	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Nodes: []string{"a"}, Operators: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	e := start(t, "")
	e.put(t, "a", nil)
	srvTLS, err := tlsconfig.Config{CertFile: p("server.crt"), KeyFile: p("server.key"), CAFile: p("ca.crt")}.Server()
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Backends{
		Nodes: api.New(e.store, e.cache, follower{}, &fakeLive{}, zap.NewNop(), nil), Pods: api.NewPodServer(e.store, e.cache, nil, admission.DefaultConfig(), zap.NewNop(), nil),
		Workloads: api.NewWorkloadServer(e.store, e.cache, zap.NewNop(), nil), Budgets: api.NewBudgetServer(e.store, e.cache, zap.NewNop(), nil),
		Policy: authz.Policy{},
	}, zap.NewNop(), "127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln, srvTLS) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + ln.Addr().String()

	client := func(name string) *http.Client {
		c := tlsconfig.Config{CAFile: p("ca.crt"), ServerName: "localhost"}
		if name != "" {
			c.CertFile, c.KeyFile = p(name+".crt"), p(name+".key")
		}
		tc, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	}
	do := func(c *http.Client, method, path, body string) (int, error) {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/merge-patch+json")
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	node, op := client("node-a"), client("operator-alice")
	for _, c := range []struct {
		who          string
		c            *http.Client
		method, path string
		want         int
	}{
		{"node", node, "GET", "/api/v1/nodes/a", 200},
		{"node", node, "PATCH", "/api/v1/nodes/a", 403},
		{"operator", op, "PATCH", "/api/v1/nodes/a", 200},
	} {
		code, err := do(c.c, c.method, c.path, `{"metadata":{"labels":{"by":"alice"}}}`)
		if err != nil || code != c.want {
			t.Fatalf("%s %s %s: %d %v, want %d", c.who, c.method, c.path, code, err, c.want)
		}
	}
	// The server asks for a certificate but does not require one at the
	// handshake (health probes): without one the API answers 401.
	if code, err := do(client(""), "GET", "/api/v1/nodes", ""); err == nil && code != 401 {
		t.Fatalf("a client without a certificate: %d, want 401 or a refused handshake", code)
	}
}
