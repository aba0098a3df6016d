// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"context"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/reporter/collectortest"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func simConfig(addr string, nodes int) Config {
	cfg := DefaultConfig()
	cfg.Nodes = nodes
	cfg.RampRate = 0
	cfg.LeaseDurationSeconds = 4 // renew every second
	cfg.DiskPressureEvery = 50
	cfg.Collector.Addresses = addr
	cfg.Collector.TLS.Insecure = true
	cfg.Collector.KeepaliveTime = 10 * time.Second
	cfg.Collector.KeepaliveTimeout = 5 * time.Second
	return cfg
}

func TestFleetAgainstFakeCollector(t *testing.T) {
	col := collectortest.Start(t, "A")
	cfg := simConfig(col.Addr(), 300)
	cfg.Faults, _ = ParseScript("memory-pressure sim-007")
	sim, err := New(cfg, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sim.conns) != 3 {
		t.Errorf("%d connections for 300 nodes, want 3", len(sim.conns))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()

	waitFor(t, "300 nodes registered with leases and a status", func() bool {
		nodes := col.Nodes()
		if len(nodes) != 300 {
			return false
		}
		for _, n := range nodes {
			if n.Leases < 2 || n.Statuses < 1 || !n.Connected {
				return false
			}
		}
		return true
	})
	// Variety: zones, shapes, some disk pressure, the memory-pressure fault.
	zones, cpus, disk := map[string]bool{}, map[string]bool{}, 0
	for name, n := range col.Nodes() {
		zones[n.Register.GetLabels()[nodemodel.LabelZone]] = true
		full, _ := col.Node(name)
		st := full.LastStatus
		cpus[st.GetCapacity()["cpu"]] = true
		if nodemodel.ConditionStatus(st.GetConditions(), nodemodel.DiskPressure) == nodemodel.True {
			disk++
		}
		if rd := nodemodel.FindCondition(st.GetConditions(), nodemodel.Ready); rd.GetStatus() != nodemodel.True || st.GetConditions()[3] != rd {
			t.Fatalf("%s: Ready %v not True/last", name, rd)
		}
	}
	if len(zones) != 3 || len(cpus) < 3 || disk != 6 {
		t.Errorf("zones %v, cpu shapes %v, disk-pressure nodes %d (want 3 zones, ≥3 shapes, 6)", zones, cpus, disk)
	}
	waitFor(t, "memory pressure on sim-007", func() bool {
		n, _ := col.Node("sim-007")
		return nodemodel.ConditionStatus(n.LastStatus.GetConditions(), nodemodel.MemoryPressure) == nodemodel.True
	})

	// Stop 10: their streams end; partition 10: streams stay, renewals stop.
	if n, err := sim.Apply(ctx, Fault{Action: "stop", Target: "10", Line: "stop 10"}); err != nil || n != 10 {
		t.Fatalf("stop: %d %v", n, err)
	}
	waitFor(t, "10 streams closed", func() bool { return col.Connected() == 290 })
	if st := sim.Stats(); st.Stopped != 10 || st.Connected != 290 {
		t.Errorf("stats %+v", st)
	}
	victim := ""
	for i := range sim.nodes {
		if sim.nodes[i].flags.Load()&flagStopped == 0 {
			victim = sim.Name(i)
			break
		}
	}
	if n, err := sim.Apply(ctx, Fault{Action: "partition", Target: victim, Line: "partition " + victim}); err != nil || n != 1 {
		t.Fatalf("partition: %d %v", n, err)
	}
	before, _ := col.Node(victim)
	time.Sleep(3 * time.Second) // renewals are due every second
	after, _ := col.Node(victim)
	if after.Leases > before.Leases+1 || !after.Connected {
		t.Errorf("partitioned node renewed %d→%d, connected %v", before.Leases, after.Leases, after.Connected)
	}
	// Start them again: they re-register.
	if _, err := sim.Apply(ctx, Fault{Action: "start", Target: "all", Line: "start all"}); err != nil {
		t.Fatal(err)
	}
	// Back means registered again and a fresh full status sent.
	waitFor(t, "stopped nodes back with a full status", func() bool {
		back := 0
		for _, n := range col.Nodes() {
			if n.Connected && n.Statuses >= n.Registers {
				back++
			}
		}
		return back == 300
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leaving from every connected node", func() bool {
		left := 0
		for _, n := range col.Nodes() {
			left += n.Leaving
		}
		return left >= 299 // the partitioned node sends nothing, not even Leaving
	})
}

func TestParseScript(t *testing.T) {
	fs, err := ParseScript("at 30s stop 10; at 1m partition 5% for 2m\n# comment\nflap sim-3 every 20s for 2m")
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 || fs[0].At != 30*time.Second || fs[1].For != 2*time.Minute || fs[2].Every != 20*time.Second || fs[2].Target != "sim-3" {
		t.Errorf("%+v", fs)
	}
	for _, bad := range []string{"explode 3", "stop", "at soon stop 1", "flap 3", "stop 3 for"} {
		if _, err := ParseScript(bad); err == nil || !strings.Contains(err.Error(), "fault") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSimulatorRegister registers b.N virtual nodes against an
// in-process fake collector and reports the cost per node: ns/op is wall
// time per registration, heap-bytes/node the simulator's retained heap
// (collector excluded as far as possible: the fake keeps only counters), and
// steady-state CPU per message at the production cadence (renewals every
// 10s). The fake collector
// shares the process, so CPU figures are an upper bound for the simulator.
func BenchmarkSimulatorRegister(b *testing.B) {
	col := collectortest.Start(b, "bench")
	cfg := simConfig(col.Addr(), b.N)
	cfg.LeaveOnExit = false
	cfg.LeaseDurationSeconds = 40 // production cadence: a renewal per node every 10s
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	sim, err := New(cfg, zap.NewNop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start, regCPU0 := time.Now(), cpuTime()
	go func() { done <- sim.Run(ctx) }()
	waitFor(b, "all registered", func() bool { return sim.Stats().Connected == b.N })
	regTime, regCPU := time.Since(start), cpuTime()-regCPU0
	b.StopTimer()
	// Steady state: measure process CPU over a window of renewals.
	time.Sleep(5 * time.Second)
	msgs0, cpu0, t0 := col.Messages(), cpuTime(), time.Now()
	time.Sleep(10 * time.Second)
	msgs, cpu, wall := col.Messages()-msgs0, cpuTime()-cpu0, time.Since(t0)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(b.N)/regTime.Seconds(), "registrations/s")
	// CPU per registration does not depend on how busy the machine is,
	// unlike the wall-clock rate above.
	b.ReportMetric(float64(regCPU.Nanoseconds())/float64(b.N), "cpu-ns/registration(sim+fake)")
	b.ReportMetric(float64(m1.HeapInuse+m1.StackInuse-m0.HeapInuse-m0.StackInuse)/float64(b.N), "bytes/node(sim+fake)")
	if msgs > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(msgs), "cpu-ns/msg(sim+fake)")
		b.ReportMetric(float64(msgs)/wall.Seconds(), "msgs/s")
	}
	cancel()
	<-done
}

// silentCollector reads each stream's Register and never answers it.
type silentCollector struct {
	collectorv1.UnimplementedCollectorServiceServer
	streams atomic.Int32
}

func (c *silentCollector) Report(s grpc.BidiStreamingServer[collectorv1.ReportRequest, collectorv1.ReportResponse]) error {
	c.streams.Add(1)
	if _, err := s.Recv(); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// A virtual node gives up on a Register left unanswered for the register
// timeout and registers again on a new stream, as a real reporter does.
func TestUnansweredRegisterIsRetried(t *testing.T) {
	old := registerTimeout
	registerTimeout = 200 * time.Millisecond
	defer func() { registerTimeout = old }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &silentCollector{}
	collectorv1.RegisterCollectorServiceServer(srv, col)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	sim, err := New(simConfig(ln.Addr().String(), 1), zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	waitFor(t, "a second Register stream", func() bool { return col.streams.Load() >= 2 })
	cancel()
	<-done
}

// The connections gauge follows each connection's state, and a connection
// that leaves READY (its collector went away) is counted once, then seen
// READY again when a collector listens on the address again.
func TestConnectionStatesAreTracked(t *testing.T) {
	col := collectortest.Start(t, "A")
	addr := col.Addr()
	m := NewMetrics(nil)
	sim, err := New(simConfig(addr, 20), zap.NewNop(), m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	defer func() { cancel(); <-done }()

	ready := func() float64 { return testutil.ToFloat64(m.connStates.WithLabelValues("READY")) }
	waitFor(t, "the connection READY", func() bool { return ready() == 1 && col.Connected() == 20 })
	if n := testutil.ToFloat64(m.connLost); n != 0 {
		t.Fatalf("%v connections lost before any fault", n)
	}
	col.Stop()
	waitFor(t, "the connection lost", func() bool { return ready() == 0 && testutil.ToFloat64(m.connLost) == 1 })
	col2, err := collectortest.New("B", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer col2.Stop()
	waitFor(t, "READY again and the nodes back", func() bool { return ready() == 1 && col2.Connected() == 20 })
	if n := testutil.ToFloat64(m.connLost); n != 1 {
		t.Fatalf("%v connections lost, want 1", n)
	}
}

// With a renewal phase on the Register ack, every simulated node renews on
// it, as the real reporter does: the nodes of one connection given one
// phase renew together.
func TestNodesRenewOnTheCollectorsPhase(t *testing.T) {
	col := collectortest.Start(t, "A")
	const phase = 0.5 // half way through each 1 s interval
	col.RenewPhase = func(string) *float64 { p := phase; return &p }
	sim, err := New(simConfig(col.Addr(), 20), zap.NewNop(), nil) // 20 nodes, one connection, renewals every 1 s
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	waitFor(t, "20 nodes with 4 renewals", func() bool {
		nodes := col.Nodes()
		if len(nodes) != 20 {
			return false
		}
		for name := range nodes {
			if n, _ := col.Node(name); n.Leases < 4 {
				return false
			}
		}
		return true
	})
	cancel()
	<-done
	for name := range col.Nodes() {
		n, _ := col.Node(name)
		// The first renewal goes at registration; the later ones on phase,
		// received within a loopback hop (generous for a loaded machine).
		for _, at := range n.LeaseTimes[len(n.LeaseTimes)-2:] {
			if off := time.Duration(at.UnixNano() % int64(time.Second)); off < 500*time.Millisecond || off > 600*time.Millisecond {
				t.Errorf("%s renewed %s into its second, want just after the phase's 500ms", name, off)
			}
		}
	}
}

// The scheduler's heap pops in due order whatever the push order, with
// duplicates, interleaved pushes and pops.
func TestItemHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h itemHeap
	var want []int64
	for round := range 50 {
		for range r.IntN(40) {
			d := r.Int64N(100)
			h.push(item{due: d, node: int32(round)})
			want = append(want, d)
		}
		slices.Sort(want)
		for range r.IntN(len(want) + 1) {
			if got := h.pop().due; got != want[0] {
				t.Fatalf("round %d: popped %d, want %d", round, got, want[0])
			}
			want = want[1:]
		}
		if len(h) != len(want) {
			t.Fatalf("round %d: %d items, want %d", round, len(h), len(want))
		}
	}
}
