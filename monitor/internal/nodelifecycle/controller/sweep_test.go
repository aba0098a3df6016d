// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// feedRenew renews the named nodes over the fake feed every 10s (the
// reporters' default) until stop[name] is set, and records each node's last
// renewal as observed by the monitor.
func feedRenew(ctx context.Context, f *fleet, names []string, stop map[string]bool, last map[string]time.Time) {
	for {
		now := time.Now()
		f.live.mu.Lock()
		if f.live.nodes == nil {
			f.live.nodes = map[string]liveness.Node{}
		}
		for _, n := range names {
			if stop[n] {
				continue
			}
			ln := f.live.nodes[n]
			ln.Renewals++
			ln.RenewTime, ln.ObservedAt, ln.Collector = now, now, "c1"
			f.live.nodes[n] = ln
			last[n] = now
		}
		f.live.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// sweepFleet is two nodes, n1 and n2, alive only over the fake feed and
// renewing every 10 s until stop[name], under a leading controller whose
// passes are 30 s apart, so what happens between passes is the sweep's.
type sweepFleet struct {
	f    *fleet
	ctl  *Controller
	cfg  Config
	stop map[string]bool
	last map[string]time.Time
	mu   *sync.Mutex // guards stop and last (the fake feed's lock)
}

func startSweepFleet(t *testing.T, ctx context.Context) sweepFleet {
	t.Helper()
	f := newFleet(t, ctx)
	names := []string{"n1", "n2"}
	for _, n := range names {
		f.addNode(n, "z1")
		f.setAlive(n, false) // liveness only over the feed
	}
	sf := sweepFleet{f: f, stop: map[string]bool{}, last: map[string]time.Time{}, mu: &f.live.mu}
	go feedRenew(ctx, f, names, sf.stop, sf.last)
	sf.cfg = testConfig("a")
	sf.cfg.MonitorPeriod = 30 * time.Second
	ctl, err := New(sf.cfg, f.store, f.cache, f.live, zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sf.ctl = ctl
	go func() { _ = ctl.Run(ctx) }()
	return sf
}

// With passes 30s apart, a node whose grace period runs out between two
// passes is marked by the deadline sweep within a sweep period of its
// deadline, not at the next pass (which would be up to 30s late here).
func TestSweepMarksDeadNodeAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sf := startSweepFleet(t, ctx)
		f, ctl, cfg, stop, last, mu := sf.f, sf.ctl, sf.cfg, sf.stop, sf.last, sf.mu

		// Passes run at about 0s, 30s, 60s, ... after takeover. Stop n1 right
		// after its renewal at ~125s: its deadline (~165s) falls between the
		// passes at ~150s and ~180s.
		settle(125*time.Second + 500*time.Millisecond)
		mu.Lock()
		stop["n1"] = true
		deadline := last["n1"].Add(cfg.Lifecycle.GracePeriod)
		mu.Unlock()

		for f.ready("n1").GetStatus() != nodemodel.Unknown {
			if time.Now().After(deadline.Add(20 * time.Second)) {
				t.Fatalf("n1 not Unknown 20s after its deadline (%s): %v; record %+v; live %+v", deadline, f.ready("n1"), ctl.nodes["n1"], f.live.Node("n1"))
			}
			settle(50 * time.Millisecond)
		}
		late := time.Since(deadline)
		if late < 0 || late > DefaultSweepPeriod+100*time.Millisecond {
			t.Fatalf("n1 marked %s after its deadline, want within the sweep period %s", late, DefaultSweepPeriod)
		}
		if r := f.ready("n1"); r.GetReason() != nodemodel.ReasonNodeStatusUnknown {
			t.Errorf("n1 Ready = %v, want reason %s", r, nodemodel.ReasonNodeStatusUnknown)
		}
		if r := f.ready("n2"); r.GetStatus() != nodemodel.True {
			t.Fatalf("n2 (renewing) = %v", r)
		}
		// Only the node past its deadline was judged by a sweep, once (an
		// Unknown node is left to the passes).
		if got := testutil.ToFloat64(ctl.m.sweepJudged); got != 1 {
			t.Errorf("sweeps judged %v nodes, want 1 (n1)", got)
		}
		cancel()
		synctest.Wait()
	})
}

// A node its collector refused and told to stay away (QuietUntil) is marked
// by the sweep within a sweep period of the end of that wait plus the grace
// period, not before, and the sweep does not judge it again and again while
// it is quiet.
func TestSweepWaitsOutACollectorImposedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sf := startSweepFleet(t, ctx)
		f, ctl, cfg, stop, mu := sf.f, sf.ctl, sf.cfg, sf.stop, sf.mu

		// At ~125s n1 is heard WAITING, refused and told to stay away 30 s,
		// and is never heard again.
		settle(125*time.Second + 500*time.Millisecond)
		mu.Lock()
		stop["n1"] = true
		heard := time.Now()
		ln := f.live.nodes["n1"]
		ln.Renewals++
		ln.ObservedAt, ln.QuietUntil = heard, heard.Add(30*time.Second)
		f.live.nodes["n1"] = ln
		mu.Unlock()
		deadline := heard.Add(30*time.Second + cfg.Lifecycle.GracePeriod)

		for f.ready("n1").GetStatus() != nodemodel.Unknown {
			if time.Now().After(deadline.Add(20 * time.Second)) {
				t.Fatalf("n1 not Unknown 20s after its deadline (%s): %v", deadline, f.ready("n1"))
			}
			settle(50 * time.Millisecond)
		}
		if late := time.Since(deadline); late < 0 || late > DefaultSweepPeriod+100*time.Millisecond {
			t.Fatalf("n1 marked %s after the end of its wait + grace, want within the sweep period %s", late, DefaultSweepPeriod)
		}
		if got := testutil.ToFloat64(ctl.m.sweepJudged); got != 1 {
			t.Errorf("sweeps judged %v nodes, want 1 (n1, once)", got)
		}
		if r := f.ready("n2"); r.GetStatus() != nodemodel.True {
			t.Fatalf("n2 (renewing) = %v", r)
		}
		cancel()
		synctest.Wait()
	})
}
