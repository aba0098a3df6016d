// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/nodepulse/nodepulse/services/admin"
)

func TestConnectionCap(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{
		{1024, 922},        // reserve 10 %
		{320, 256},         // reserve 64
		{1 << 20, 943719},  // reserve 10 %
		{64, 1},            // nothing left: one connection still works
		{1 << 63, 1 << 30}, // RLIM_INFINITY
	} {
		if got := connectionCap(c.nofile); got != c.want {
			t.Errorf("connectionCap(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
	if nofile, ok := fileLimit(); ok {
		if got, err := (Config{}).maxConnections(); err != nil || uint64(got) >= nofile {
			t.Errorf("default cap %d (%v) not below RLIMIT_NOFILE %d", got, err, nofile)
		}
		if _, err := (Config{MaxConnections: int(min(nofile, 1<<40))}).maxConnections(); err == nil {
			t.Error("a cap at the file-descriptor limit is accepted")
		}
	}
}

// Idle sockets up to the cap cannot starve anything: connections over the
// cap are closed at accept, the admin endpoint keeps answering /healthz and
// /readyz, and once the idle sockets' handshake deadline passes a real
// gRPC client connects. (Drill of issue #32: ~20,000 silent sockets took
// every descriptor and /healthz stopped answering.)
func TestIdleSocketsCannotStarveTheServer(t *testing.T) {
	const maxConns, over = 20, 10
	reg := prometheus.NewRegistry()
	cfg := testConfig()
	cfg.MaxConnections = maxConns
	cfg.ConnectionTimeout = time.Second
	s, err := New(cfg, zap.NewNop(), reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetServing(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	adm, err := admin.New(admin.Config{ListenAddress: "127.0.0.1:0"}, zap.NewNop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	adm.AddReadyCheck("test", func() error { return nil })
	go func() { _ = adm.Run(ctx) }()

	var idle []net.Conn
	t.Cleanup(func() {
		for _, c := range idle {
			_ = c.Close()
		}
	})
	for range maxConns {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	waitFor(t, "the idle sockets to be accepted", func() bool {
		return testutil.ToFloat64(s.ln.(*limitListener).m.open) == maxConns
	})
	// Over the cap: closed at once, long before the handshake deadline.
	for range over {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(cfg.ConnectionTimeout / 2))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
			t.Fatalf("a connection over the cap was not closed at accept: %v", err)
		}
		_ = c.Close()
	}
	refused := s.ln.(*limitListener).m.refused
	if got := testutil.ToFloat64(refused.WithLabelValues(reasonLimit)); got != over {
		t.Fatalf("refused{reason=limit} = %v, want %d", got, over)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		cl := http.Client{Timeout: 2 * time.Second}
		resp, err := cl.Get("http://" + adm.Addr().String() + path)
		if err != nil {
			t.Fatalf("%s while the gRPC port is saturated: %v", path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s while the gRPC port is saturated: %s", path, resp.Status)
		}
	}
	// The idle sockets are closed at their handshake deadline; a real
	// client then gets in.
	cc, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
	defer ccancel()
	if _, err := healthpb.NewHealthClient(cc).Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("a real client after the idle sockets timed out: %v", err)
	}
	if got := testutil.ToFloat64(refused.WithLabelValues(reasonHandshakeTimeout)); got < maxConns {
		t.Fatalf("refused{reason=handshake_timeout} = %v, want at least %d", got, maxConns)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return err != nil && (errors.As(err, &op) && !op.Timeout())
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
