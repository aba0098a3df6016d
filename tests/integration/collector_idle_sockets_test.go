// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/collector/app"
	reporterapp "github.com/nodepulse/nodepulse/reporter/app"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// Issue 32, finding 1, end to end: sockets that connect to the collector's
// gRPC port and never send a byte, as many as its connection cap (200 for
// the test), cannot keep reporters out or make the admin port stop
// answering. A reporter attached before the flood stays attached; one that
// starts during it attaches once the idle sockets reach their handshake
// deadline; /readyz answers 200 every time it is asked throughout.
// (The drill: ~20,000 idle sockets took every file descriptor; no
// reporter could connect and /healthz and /readyz stopped answering.)
func TestIdleSocketsDoNotKeepReportersOut(t *testing.T) {
	const maxConns = 200
	cluster := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, cluster)
	c := startCollector(t, store, "", func(cfg *app.Config) {
		cfg.GRPC.MaxConnections = maxConns
		cfg.GRPC.ConnectionTimeout = 2 * time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	attached := func(name string) bool {
		_, err := store.Get(ctx, nodestore.Statuses, name)
		return err == nil
	}
	startReporter(t, c.GRPCAddr(), "idle-before")
	eventually(t, "the first reporter to attach", func() bool { return attached("idle-before") })

	// /readyz, every 50 ms until the end of the test.
	var probes, failed atomic.Int64
	var lastFailure atomic.Value
	var wg sync.WaitGroup
	pctx, stopProbes := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := http.Client{Timeout: 2 * time.Second}
		for pctx.Err() == nil {
			resp, err := cl.Get("http://" + c.AdminAddr() + "/readyz")
			probes.Add(1)
			switch {
			case err != nil:
				failed.Add(1)
				lastFailure.Store(err.Error())
			default:
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					lastFailure.Store(resp.Status)
				}
				_ = resp.Body.Close()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// The flood: the cap's worth of sockets that send nothing (one more
	// wave than the cap allows: those are closed at accept).
	var idle []net.Conn
	defer func() {
		for _, s := range idle {
			_ = s.Close()
		}
	}()
	for range maxConns + 50 {
		s, err := net.Dial("tcp", c.GRPCAddr())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		idle = append(idle, s)
	}
	floodAt := time.Now()

	startReporter(t, c.GRPCAddr(), "idle-during")
	eventually(t, "the reporter started during the flood to attach", func() bool { return attached("idle-during") })
	t.Logf("reporter attached %s after the flood of %d idle sockets", time.Since(floodAt).Round(time.Millisecond), len(idle))

	// The first reporter's renewals kept going: its stream never ended.
	if d := scrape(t, c.AdminAddr(), "nodepulse_collector_streams_open"); d < 2 {
		t.Errorf("%v Report streams open after the flood, want both reporters' (2)", d)
	}
	if refused := scrape(t, c.AdminAddr(), `nodepulse_grpc_connections_refused_total{reason="handshake_timeout"}`); refused < 1 {
		t.Errorf("no idle socket was closed at its handshake deadline (refused_total{reason=handshake_timeout} = %v)", refused)
	}
	stopProbes()
	wg.Wait()
	if n := failed.Load(); n > 0 || probes.Load() < 10 {
		t.Fatalf("/readyz failed %d of %d times during the flood (last: %v)", n, probes.Load(), lastFailure.Load())
	}
	t.Logf("/readyz answered 200 to all %d probes", probes.Load())
}

// startReporter runs a real reporter (real host probes) for name against
// addr, plaintext, until the test ends.
func startReporter(t *testing.T, addr, name string) {
	t.Helper()
	cfg := reporterapp.DefaultConfig()
	cfg.NodeName = name
	cfg.Collector.Addresses = addr
	cfg.Collector.TLS.Insecure = true
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.StatusUpdateFrequency = time.Second
	r, err := reporterapp.New(cfg, logger(t).Named(name), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("reporter: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("reporter %s did not stop within 30s", name)
		}
	})
}
