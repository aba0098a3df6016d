// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bootstrap

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/logging"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/version"
)

func newTestService(t *testing.T) (*Service, *strings.Builder, *string) {
	t.Helper()
	var lc logging.Config
	s := New("test", "test: a test server.", &lc)
	lc.RegisterFlags(s.Flags)
	name := s.Flags.String("etcd.endpoints", "127.0.0.1:2379", "etcd")
	var out, usage strings.Builder
	s.Out = &out
	s.Flags.SetOutput(&usage)
	return s, &out, name
}

// Every way to ask for the version prints it and nothing else, and never
// builds the app.
func TestVersionDoesNotBuild(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"--log.level=debug", "version"}} {
		s, out, _ := newTestService(t)
		built := false
		err := s.Run(context.Background(), args, func() (run.Component, error) { built = true; return nil, errors.New("built") })
		if err != nil || built {
			t.Errorf("%q: err %v, app built %v", args, err, built)
		}
		if got := out.String(); got != version.String()+"\n" {
			t.Errorf("%q printed %q", args, got)
		}
	}
	// A bad environment variable does not keep "version" from answering.
	t.Setenv("NODEPULSE_VERSION", "not-a-bool")
	s, out, _ := newTestService(t)
	if ok, err := s.Parse([]string{"version"}); ok || err != nil || out.Len() == 0 {
		t.Errorf("version with a bad environment: ok %v, err %v, printed %q", ok, err, out.String())
	}
}

func TestParse(t *testing.T) {
	s, _, etcd := newTestService(t)
	t.Setenv("NODEPULSE_ETCD_ENDPOINTS", "a:1")
	if ok, err := s.Parse(nil); !ok || err != nil || *etcd != "a:1" {
		t.Fatalf("env: ok %v, err %v, etcd %q", ok, err, *etcd)
	}
	s, _, etcd = newTestService(t)
	if ok, err := s.Parse([]string{"--etcd.endpoints=b:2"}); !ok || err != nil || *etcd != "b:2" {
		t.Fatalf("flag over env: ok %v, err %v, etcd %q", ok, err, *etcd)
	}

	s, _, _ = newTestService(t)
	var usage strings.Builder
	s.Flags.SetOutput(&usage)
	if ok, err := s.Parse([]string{"--help"}); ok || err != nil {
		t.Fatalf("--help: ok %v, err %v", ok, err)
	}
	for _, want := range []string{"test: a test server.", "--etcd.endpoints", "$NODEPULSE_ETCD_ENDPOINTS", "--version"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, usage.String())
		}
	}

	for _, args := range [][]string{{"versoin"}, {"--etcd.endpoints=x", "run"}, {"version", "now"}, {"--no-such-flag"}} {
		s, _, _ = newTestService(t)
		if ok, err := s.Parse(args); ok || err == nil {
			t.Errorf("%q: ok %v, err %v; want an error", args, ok, err)
		}
	}
}

func TestRunBuildsAndRuns(t *testing.T) {
	s, _, _ := newTestService(t)
	gc := 0
	s.GCPercent = &gc
	ran := false
	err := s.Run(context.Background(), []string{"--log.level=error"}, func() (run.Component, error) {
		if s.Logger == nil || s.Registry == nil {
			t.Error("logger or registry not set before build")
		}
		return run.Func(func(context.Context) error { ran = true; return nil }), nil
	})
	if err != nil || !ran {
		t.Fatalf("err %v, ran %v", err, ran)
	}
}

// The Server runs the admin endpoint with the app's components and stops
// both when the context ends.
func TestServer(t *testing.T) {
	srv, err := NewServer(admin.Config{ListenAddress: "127.0.0.1:0"}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.AddReadyCheck("never", func() error { return errors.New("not yet") })
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	srv.Add("app", run.Func(func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil }))
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, 10*time.Second) }()
	resp, err := http.Get("http://" + srv.AdminAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "never: not yet") {
		t.Errorf("/readyz = %d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-stopped

	none, err := NewServer(admin.Config{}, zap.NewNop(), nil)
	if err != nil || none.Admin() != nil || none.AdminAddr() != "" {
		t.Fatalf("disabled admin: %v, %v, %q", err, none.Admin(), none.AdminAddr())
	}
	none.AddReadyCheck("ignored", func() error { return nil })
}

func TestInstanceID(t *testing.T) {
	a, b := InstanceID("x"), InstanceID("x")
	if a == b || len(a) < 10 {
		t.Fatalf("ids %q, %q: want distinct <host>-<8 hex>", a, b)
	}
}
