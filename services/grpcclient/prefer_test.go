// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcclient

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// backend is a gRPC server with the health service that counts the unary
// calls it serves.
type backend struct {
	addr   string
	hs     *health.Server
	served atomic.Int64
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: lis.Addr().String(), hs: health.NewServer()}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.served.Add(1)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, b.hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return b
}

func TestPrefer(t *testing.T) {
	a, b, c := startBackend(t), startBackend(t), startBackend(t)
	cfg := Config{Addresses: a.addr + "," + b.addr + "," + c.addr, KeepaliveTime: DefaultKeepaliveTime, KeepaliveTimeout: DefaultKeepaliveTimeout}
	cfg.TLS.Insecure = true
	cc, err := Dial(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(prefer string) *Preference {
		t.Helper()
		pctx, pref := Prefer(ctx, prefer)
		if _, err := hc.Check(pctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
		return pref
	}
	// Until every backend is ready, round-robin may skip some.
	for deadline := time.Now().Add(5 * time.Second); ; {
		a.served.Store(0)
		b.served.Store(0)
		c.served.Store(0)
		for range 30 {
			call("")
		}
		if a.served.Load() == 10 && b.served.Load() == 10 && c.served.Load() == 10 {
			break // round-robin without a preference
		}
		if time.Now().After(deadline) {
			t.Fatalf("no even round-robin: %d %d %d", a.served.Load(), b.served.Load(), c.served.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}

	b.served.Store(0)
	for range 10 {
		if p := call(b.addr); !p.Followed() {
			t.Fatal("preference for a ready backend not followed")
		}
	}
	if n := b.served.Load(); n != 10 {
		t.Fatalf("preferred backend served %d of 10 calls", n)
	}

	// An address the connection does not know: round-robin, not followed.
	a.served.Store(0)
	for range 3 {
		if p := call("127.0.0.1:1"); p.Followed() {
			t.Fatal("preference for an unknown address reported followed")
		}
	}
	if a.served.Load() != 1 {
		t.Fatalf("unknown preference did not fall back to round-robin: a served %d of 3", a.served.Load())
	}

	// A backend that stops serving (a draining collector) is not
	// followed: the calls go to the others.
	c.hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c.served.Store(0)
		p := call(c.addr)
		if !p.Followed() && c.served.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("preference for a backend that is not serving still followed")
		}
	}
}
