// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"math"
	"strings"
	"testing"
)

// Lines as Go 1.26 prints them, among a process's other output.
const gctraceLog = `{"level":"info","msg":"collector ready"}
gc 48 @311.223s 4%: 1.1+1645+0.21 ms clock, 2.2+1815/830/0+0.42 ms cpu, 943->961->444 MB, 1079 MB goal, 428 MB stacks, 0 MB globals, 2 P
gc 49 @387.159s 3%: 0.12+1028+0.006 ms clock, 0.24+1131/529/1.3+0.012 ms cpu, 905->911->442 MB, 1099 MB goal, 428 MB stacks, 0 MB globals, 2 P (forced)
gc 50 not a cycle line
`

func TestParseGCTrace(t *testing.T) {
	got := ParseGCTrace(strings.NewReader(gctraceLog), "collector", 0.6)
	if len(got) != 2 {
		t.Fatalf("got %d cycles, want 2: %+v", len(got), got)
	}
	c := got[0]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if c.Role != "collector" || !near(c.Start, 311.823) || !near(c.Seconds, 1.64631) || !near(c.AssistCPU, 1.815) ||
		!near(c.MarkCPU, 0.830) || c.HeapMB != 943 || c.StacksMB != 428 {
		t.Errorf("first cycle %+v", c)
	}
	if !near(got[1].MarkCPU, 0.5303) || !near(got[1].End(), 0.6+387.159+1.028126) {
		t.Errorf("second cycle %+v", got[1])
	}
}

// The stage's ack latency outside GC cycles leaves out every sample
// interval a cycle of the collector or a simulator touched, and a pad after
// it; a monitor's cycle does not count (acks do not wait for it).
func TestGCStageSplitsAcks(t *testing.T) {
	fast := []PromBucket{{Le: 0.005, Count: 100}, {Le: 2, Count: 100}, {Le: math.Inf(1), Count: 100}}
	slow := []PromBucket{{Le: 0.005, Count: 0}, {Le: 2, Count: 100}, {Le: math.Inf(1), Count: 100}}
	var samples []ackSample
	for t := 1.0; t <= 20; t++ {
		b := fast
		if t == 11 || t == 12 {
			b = slow
		}
		samples = append(samples, ackSample{T: t, DT: 1, Buckets: b})
	}
	cycles := []GCCycle{
		{Role: "collector", Start: 10.2, Seconds: 1.5}, // touches (10,11] and (11,12], pad to 12.7: (12,13]
		{Role: "monitor", Start: 3.5, Seconds: 2},      // not on the ack path
		{Role: "sim", Start: 30, Seconds: 1},           // after the stage
	}
	g := gcStage(cycles, samples, 0, 20)
	if g.ExcludedSeconds != 3 {
		t.Errorf("excluded %v s, want 3", g.ExcludedSeconds)
	}
	if g.OutsideAck == nil || g.OutsideAck.N != 1700 || g.OutsideAck.P99 > 0.005 {
		t.Fatalf("outside GC: %+v, want 1,700 acks with p99 ≤ 5 ms", g.OutsideAck)
	}
	if len(g.Cycles) != 2 || g.Cycles[0].Role != "collector" || g.Cycles[1].Role != "monitor" {
		t.Errorf("cycles in the stage: %+v, want the collector's and the monitor's", g.Cycles)
	}
	if s := g.gcCounts(ackRoles); s != "collector 1 (1.50 s)" {
		t.Errorf("gcCounts = %q", s)
	}
	if s := g.gcCounts(nil); s != "collector 1 (1.50 s), monitor 1 (2.00 s)" {
		t.Errorf("gcCounts(all) = %q", s)
	}
}

// The children get gctrace on, beside whatever GODEBUG the caller set,
// unless the caller chose gctrace itself.
func TestGCTraceEnv(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "GODEBUG=gctrace=1"},
		{"madvdontneed=1", "GODEBUG=madvdontneed=1,gctrace=1"},
		{"gctrace=0", ""},
	} {
		t.Setenv("GODEBUG", c.in)
		got := strings.Join(gctraceEnv(), " ")
		if got != c.want {
			t.Errorf("GODEBUG=%q: child env %q, want %q", c.in, got, c.want)
		}
	}
}
