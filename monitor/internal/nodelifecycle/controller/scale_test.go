// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// slowStore adds a fixed round trip to every Apply, as etcd does, and counts
// them.
type slowStore struct {
	nodestore.Store
	rtt     time.Duration
	applies atomic.Int64
}

func (s *slowStore) Apply(ctx context.Context, fence *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	s.applies.Add(1)
	time.Sleep(s.rtt)
	return s.Store.Apply(ctx, fence, ops...)
}

// TestPassScale measures health passes over NODEPULSE_PASS_SCALE nodes (off
// when unset) on memstore with NODEPULSE_PASS_RTT (default 1ms) per Apply:
// the pass that first sees every node, a pass with nothing to do, and the
// pass that marks every node Unknown. Real time, not a bubble.
func TestPassScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NODEPULSE_PASS_SCALE"))
	if n <= 0 {
		t.Skip("NODEPULSE_PASS_SCALE not set")
	}
	rtt := time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("NODEPULSE_PASS_RTT")); err == nil {
		rtt = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctl, ss := scaleFleet(t, ctx, n, rtt)
	pass := func(what string) {
		before := ss.applies.Load()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		if err := ctl.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		// Allocation includes the cache applying the pass's writes
		// meanwhile; for the passes without writes it is the pass's own.
		t.Logf("%d nodes, %s per Apply: %-34s %10s, %6d Applies, %7.1f MB allocated", n, rtt, what, took.Round(time.Millisecond),
			ss.applies.Load()-before, float64(m1.TotalAlloc-m0.TotalAlloc)/1e6)
	}
	pass("first sight (RegisteredNode)")
	time.Sleep(time.Second) // the watch delivers the pass's writes
	pass("nothing changed")
	ctl.mu.Lock()
	ctl.cfg.Lifecycle.GracePeriod = time.Second
	ctl.mu.Unlock()
	time.Sleep(2 * time.Second)
	pass("every node past its grace")
	time.Sleep(time.Second)
	pass("nothing changed (every node Unknown)")
	time.Sleep(time.Second)
	pass("nothing changed (every node Unknown)")
}

// scaleFleet is a leading controller over n Ready nodes in three zones on
// memstore (every Apply delayed by rtt), its cache holding every node.
func scaleFleet(tb testing.TB, ctx context.Context, n int, rtt time.Duration) (*Controller, *slowStore) {
	f := newFleet(tb, ctx)
	ss := &slowStore{Store: f.store, rtt: rtt}
	cfg := testConfig("a")
	// No node may miss its grace period before the last pass, however long
	// the first passes take; callers shrink it to make every node miss it.
	cfg.Lifecycle.GracePeriod = time.Hour
	ctl, err := New(cfg, ss, f.cache, f.live, zap.NewNop(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	takeOver(tb, ctx, f.store, ctl, time.Minute)

	now := time.Now()
	var ops []nodestore.Op
	for i := range n {
		name := fmt.Sprintf("n-%06d", i)
		ops = append(ops, nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name,
			CreationTimestamp: nodemodel.Timestamp(now), Labels: map[string]string{nodemodel.LabelZone: "z" + strconv.Itoa(i%3)}}}),
			nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready,
				Status: nodemodel.True, LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)}}}))
	}
	if _, err := nodestore.ApplyChunked(ctx, f.store, nil, ops); err != nil {
		tb.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if nodes, _ := f.cache.Nodes(); len(nodes) == n {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatal("cache never saw every node")
		}
	}
	return ctl, ss
}

// BenchmarkPassNothingChanged is one health pass over a fleet where nothing
// changed since the last one (every node Ready, nothing to write), the pass
// a monitor runs every few seconds in steady state. NODEPULSE_PASS_SCALE
// sets the fleet size (default 20,000); ns/op divided by it is the cost of
// judging one node:
//
//	go test -run '^$' -bench PassNothingChanged -benchmem ./internal/controller/
func BenchmarkPassNothingChanged(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("NODEPULSE_PASS_SCALE"))
	if n <= 0 {
		n = 20000
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctl, ss := scaleFleet(b, ctx, n, 0)
	// The first pass registers every node and writes nothing; the second
	// runs on a settled controller.
	for range 2 {
		if err := ctl.Pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
	before := ss.applies.Load()
	b.ReportAllocs()
	for b.Loop() {
		if err := ctl.Pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if w := ss.applies.Load() - before; w != 0 {
		b.Fatalf("%d Applies in passes that should change nothing", w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
}
