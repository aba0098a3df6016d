// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
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

// tableLive is a feed tracker holding every node of a scale fleet, as the
// real one does (a map by name of records, behind a mutex).
type tableLive struct {
	mu    sync.Mutex
	names map[string]int32
	recs  []liveness.Node
}

func (l *tableLive) Node(name string) liveness.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.names[name]; ok {
		return l.recs[i]
	}
	return liveness.Node{}
}

func (l *tableLive) AllStale() bool { return false }

// scaleFleet is a leading controller over n Ready nodes in three zones on
// memstore (every Apply delayed by rtt), its cache holding every node and
// its lease, the feed tracker every node as renewed through collector c1.
func scaleFleet(tb testing.TB, ctx context.Context, n int, rtt time.Duration) (*Controller, *slowStore) {
	f := newFleet(tb, ctx)
	ss := &slowStore{Store: f.store, rtt: rtt}
	cfg := testConfig("a")
	// No node may miss its grace period before the last pass, however long
	// the first passes take; callers shrink it to make every node miss it.
	cfg.Lifecycle.GracePeriod = time.Hour
	live := &tableLive{names: make(map[string]int32, n)}
	for i := range n {
		live.names[fmt.Sprintf("n-%06d", i)] = int32(i)
		live.recs = append(live.recs, liveness.Node{Renewals: 1, RenewTime: time.Now(), ObservedAt: time.Now(), Collector: "c1"})
	}
	ctl, err := New(cfg, ss, f.cache, live, zap.NewNop(), nil)
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
				Status: nodemodel.True, LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)}}}),
			nodestore.Put(nodestore.Leases, name, &nodev1.Lease{Metadata: &nodev1.ObjectMeta{Name: name},
				Spec: &nodev1.LeaseSpec{HolderIdentity: name, LeaseDurationSeconds: 40, RenewTime: nodemodel.Timestamp(now)}}))
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
	// CPU time as well as wall time: on a shared machine the wall time of
	// a pass follows the neighbours' load, its CPU time much less.
	cpu0 := processCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := ctl.Pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPU(b) - cpu0
	if w := ss.applies.Load() - before; w != 0 {
		b.Fatalf("%d Applies in passes that should change nothing", w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	// The heap per node: the monitor's cache, tracker and controller, and
	// the in-process store's copy of every record (etcd's, in production).
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/float64(n), "heap-B/node")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
