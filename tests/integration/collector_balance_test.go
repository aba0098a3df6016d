// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/collector/app"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
	"github.com/nodepulse/nodepulse/tests/fleetsim"
)

// TestCollectorsRebalance runs three collectors on one etcd and a
// simulated fleet of 300 nodes on 30 connections that knows all three
// (spec §20): stopped, one collector's nodes move to the other two; started
// again on the same address, it gets back to within ±20 % of an even share
// because the other two, holding more than theirs, ask a bounded fraction
// of their reporters to move each interval. The intervals are short (0.5 s
// instead of 10 s), as is everything else here. Without rebalancing the
// restarted collector would hold nobody: reporters stay where they are.
func TestCollectorsRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("three collectors and a fleet")
	}
	const nodes, interval = 300, 500 * time.Millisecond
	cl := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, cl)
	mod := func(addr string) func(*app.Config) {
		return func(c *app.Config) {
			if addr != "" {
				c.GRPC.ListenAddress = addr
			}
			c.Balance.Interval, c.Balance.MaxFraction = interval, 0.1
		}
	}
	cs := []*runningCollector{startCollector(t, store, "", mod("")), startCollector(t, store, "", mod("")), startCollector(t, store, "", mod(""))}
	addrs := []string{cs[0].GRPCAddr(), cs[1].GRPCAddr(), cs[2].GRPCAddr()}

	cfg := fleetsim.DefaultConfig()
	cfg.Nodes, cfg.Connections, cfg.RampRate, cfg.NamePrefix = nodes, 30, 0, "bal-"
	cfg.Collector = grpcclient.Config{Addresses: strings.Join(addrs, ","), KeepaliveTime: grpcclient.DefaultKeepaliveTime,
		KeepaliveTimeout: grpcclient.DefaultKeepaliveTimeout}
	cfg.Collector.TLS.Insecure = true
	sim, err := fleetsim.New(cfg, zap.NewNop(), fleetsim.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	start := time.Now()
	spread := func() []int {
		out := make([]int, len(cs))
		for i, c := range cs {
			if c != nil {
				out[i] = c.Streams()
			}
		}
		return out
	}
	// The spread over time, for the log (and for a chart of a run).
	var samples []string
	sample := func(what string) {
		s := spread()
		samples = append(samples, fmt.Sprintf("%6.1f s %-28s %v", time.Since(start).Seconds(), what, s))
	}
	defer func() { t.Logf("nodes per collector:\n%s", strings.Join(samples, "\n")) }()
	waitSpread := func(what string, bound time.Duration, ok func([]int) bool) {
		t.Helper()
		from := time.Now()
		var last time.Time
		for ; ; time.Sleep(50 * time.Millisecond) {
			s := spread()
			if ok(s) {
				sample(what + " reached")
				t.Logf("%s after %s: %v", what, time.Since(from).Round(100*time.Millisecond), s)
				return
			}
			if time.Since(last) > time.Second {
				last = time.Now()
				sample(what)
			}
			if time.Since(from) > bound {
				t.Fatalf("%s: not within %s: %v", what, bound, s)
			}
		}
	}
	sum := func(s []int) int { return s[0] + s[1] + s[2] }
	even := func(s []int) bool {
		for _, n := range s {
			if n < nodes/3*8/10 || n > nodes/3*12/10 {
				return false
			}
		}
		return sum(s) == nodes
	}
	waitSpread("fleet attached", 60*time.Second, func(s []int) bool { return sum(s) == nodes })

	// Stop the third: its reporters are told to move (drain) and attach
	// to the other two.
	if err := cs[2].stop(); err != nil {
		t.Fatalf("stopping collector 3: %v", err)
	}
	cs[2] = nil
	waitSpread("collector 3 stopped: its nodes on 1 and 2", 30*time.Second, func(s []int) bool { return s[0]+s[1] == nodes })

	// Start it again on its address: the reporters' connections to it come
	// back, and 1 and 2 shed streams until the spread is even.
	cs[2] = startCollector(t, store, "", mod(addrs[2]))
	waitSpread("collector 3 restarted: within ±20 % of even", 60*time.Second, even)
}
