// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package runtimeinfo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func listen(t *testing.T, name string) (net.Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, path
}

// fakeDocker serves the Engine API's /version on a unix socket.
func fakeDocker(t *testing.T, status int, body string) string {
	ln, path := listen(t, "docker.sock")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return path
}

type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	name, version string
}

func (f fakeCRI) Version(_ context.Context, r *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if r.GetVersion() != criAPIVersion {
		return nil, fmt.Errorf("asked for API %q", r.GetVersion())
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: f.name, RuntimeVersion: f.version, RuntimeApiVersion: "v1"}, nil
}

// serveCRI serves a CRI runtime on a unix socket; name "" serves a gRPC
// server without the RuntimeService (Docker's containerd, CRI plugin off).
func serveCRI(t *testing.T, name, version string) string {
	ln, path := listen(t, "cri.sock")
	s := grpc.NewServer()
	if name != "" {
		runtimeapi.RegisterRuntimeServiceServer(s, fakeCRI{name: name, version: version})
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return path
}

func TestDetect(t *testing.T) {
	ctx := context.Background()
	absent := filepath.Join(t.TempDir(), "absent.sock")
	notSocket := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	containerd := serveCRI(t, "containerd", "v1.7.27")
	crio := serveCRI(t, "cri-o", "1.31.2")
	noCRI := serveCRI(t, "", "")
	docker := fakeDocker(t, http.StatusOK, `{"Version":"27.3.1","ApiVersion":"1.47"}`)
	brokenDocker := fakeDocker(t, http.StatusInternalServerError, `{"message":"down"}`)

	for _, tc := range []struct {
		name    string
		cfg     Config
		want    string
		wantErr bool
	}{
		{"nothing on the host", Config{CRIEndpoints: []string{"unix://" + absent}, DockerEndpoint: absent}, "", false},
		{"a plain file is no socket", Config{CRIEndpoints: []string{notSocket}}, "", false},
		{"containerd", Config{CRIEndpoints: []string{"unix://" + containerd}, DockerEndpoint: docker}, "containerd://1.7.27", false},
		{"first CRI endpoint that exists", Config{CRIEndpoints: []string{absent, crio, containerd}}, "cri-o://1.31.2", false},
		{"docker behind a containerd without CRI", Config{CRIEndpoints: []string{noCRI}, DockerEndpoint: "unix://" + docker}, "docker://27.3.1", false},
		{"a socket that does not answer", Config{CRIEndpoints: []string{noCRI}}, "", true},
		{"docker failing", Config{DockerEndpoint: brokenDocker}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(ctx, tc.cfg)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Detect = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, e := range []string{"tcp://127.0.0.1:2375", "relative.sock", "unix://relative.sock"} {
		if err := (Config{CRIEndpoints: []string{e}}).Validate(); err == nil {
			t.Errorf("CRI endpoint %q accepted", e)
		}
		if err := (Config{DockerEndpoint: e}).Validate(); err == nil {
			t.Errorf("Docker endpoint %q accepted", e)
		}
	}
	if err := (Config{CRIEndpoints: DefaultCRIEndpoints, DockerEndpoint: DefaultDockerEndpoint}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestWatcherLogsChangesOnly: an absent runtime is one log line however
// often the watcher looks, and a runtime that appears is picked up.
func TestWatcherLogsChangesOnly(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	dir := t.TempDir()
	sock := filepath.Join(dir, "docker.sock")
	w := NewWatcher(Config{DockerEndpoint: sock}, 0, zap.New(core))
	for range 5 {
		w.Refresh(context.Background())
	}
	if w.Version() != "" || logs.Len() != 1 {
		t.Fatalf("version %q after 5 looks without a runtime, %d log lines (want 1)", w.Version(), logs.Len())
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"Version":"26.1.0"}`) })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	w.Refresh(context.Background())
	w.Refresh(context.Background())
	if w.Version() != "docker://26.1.0" || logs.Len() != 2 {
		t.Fatalf("version %q, %d log lines (want docker://26.1.0, 2)", w.Version(), logs.Len())
	}
}

// TestDockerOnThisHost asks the host's Docker Engine, when there is one the
// test may use.
func TestDockerOnThisHost(t *testing.T) {
	path, _ := SocketPath(DefaultDockerEndpoint)
	if !exists(path) {
		t.Skip("no Docker Engine socket at " + path)
	}
	v, err := Detect(context.Background(), Config{DockerEndpoint: DefaultDockerEndpoint})
	if err != nil {
		if strings.Contains(err.Error(), "permission denied") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "docker://") || len(v) == len("docker://") {
		t.Fatalf("Detect = %q, want docker://<version>", v)
	}
	t.Log(v)
}
