// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bufio"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The bench runs every child with GODEBUG=gctrace=1 (one line per garbage
// collection on stderr, which goes to its log) and maps the cycles onto
// the run's clock. Why: at 100,000 streams a cycle of the collector or of
// the load generator stalls renewals for 1-3 s on a 2-core machine, and
// whether one falls inside a stage decides its ack p99, its flatness and
// sometimes its kill deadlines. The report says which cycles did, and what
// the ack latency was in the seconds no cycle touched.

// gctraceEnv is what the bench adds to every child's environment: gctrace
// on, unless the caller's GODEBUG already sets it.
func gctraceEnv() []string {
	d := os.Getenv("GODEBUG")
	if strings.Contains(d, "gctrace=") {
		return nil
	}
	if d != "" {
		d += ","
	}
	return []string{"GODEBUG=" + d + "gctrace=1"}
}

// addGC reads every process's cycles from its log and adds the GC summary
// to each nodepulse stage.
func (r *runner) addGC(samples []ackSample) {
	var cycles []GCCycle
	r.procMu.Lock()
	for role, ps := range r.procs {
		if !gcRoles[role] {
			continue
		}
		for _, p := range ps {
			cycles = append(cycles, readGCTrace(p.Log, role, p.Started.Sub(r.start).Seconds())...)
		}
	}
	r.procMu.Unlock()
	if len(cycles) == 0 {
		return
	}
	for _, s := range r.report.Stages {
		if s.System == "nodepulse" {
			s.GC = gcStage(cycles, samples, s.Start, s.End)
		}
	}
}

// GCCycle is one garbage collection of one process, in seconds since the
// start of the run.
type GCCycle struct {
	Role      string  `json:"role"`
	Start     float64 `json:"startSeconds"`
	Seconds   float64 `json:"seconds"`          // wall clock: both stop-the-world phases and the concurrent mark
	AssistCPU float64 `json:"assistCpuSeconds"` // CPU the mutators spent marking (assists)
	MarkCPU   float64 `json:"markCpuSeconds"`   // CPU of the background and idle mark workers
	HeapMB    float64 `json:"heapMB"`           // heap at the start of the cycle
	StacksMB  float64 `json:"stacksMB"`         // goroutine stacks it scanned
}

// End of the cycle, seconds since the start of the run.
func (c GCCycle) End() float64 { return c.Start + c.Seconds }

// gcLine matches a Go 1.2x gctrace line, e.g.
//
//	gc 48 @311.223s 4%: 1.1+1645+0.21 ms clock, 2.2+1815/830/0+0.42 ms cpu, 943->961->444 MB, 1079 MB goal, 428 MB stacks, 0 MB globals, 2 P
var gcLine = regexp.MustCompile(`^gc \d+ @([0-9.]+)s \d+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock, [0-9.]+\+([0-9.]+)/([0-9.]+)/([0-9.]+)\+[0-9.]+ ms cpu, ([0-9]+)->[0-9]+->[0-9]+ MB(?:, [0-9]+ MB goal, ([0-9]+) MB stacks)?`)

// ParseGCTrace reads the gctrace lines of one process's log. started is
// when the process started, in seconds since the start of the run (a Go
// runtime counts @ from its own start).
func ParseGCTrace(r io.Reader, role string, started float64) []GCCycle {
	var out []GCCycle
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		m := gcLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := func(i int) float64 {
			v, _ := strconv.ParseFloat(m[i], 64)
			return v
		}
		c := GCCycle{Role: role, Start: started + f(1), Seconds: (f(2) + f(3) + f(4)) / 1000,
			AssistCPU: f(5) / 1000, MarkCPU: (f(6) + f(7)) / 1000, HeapMB: f(8)}
		if m[9] != "" {
			c.StacksMB = f(9)
		}
		out = append(out, c)
	}
	return out
}

// readGCTrace parses the log at path; a missing log gives no cycles.
func readGCTrace(path, role string, started float64) []GCCycle {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return ParseGCTrace(f, role, started)
}

// gcOverlaps reports whether the sample interval (t-dt, t] touches a cycle
// of one of roles, extended by pad seconds after it ends: renewals held up
// by a cycle are still being answered for a while after it.
func gcOverlaps(cycles []GCCycle, roles map[string]bool, t, dt, pad float64) bool {
	for _, c := range cycles {
		if roles[c.Role] && c.Start < t && c.End()+pad > t-dt {
			return true
		}
	}
	return false
}

// GCStage summarizes the cycles that fell into a stage and the renewal
// acks of the seconds none of them touched.
type GCStage struct {
	// Cycles per process that overlap the stage, longest first within a role.
	Cycles []GCCycle `json:"cycles,omitempty"`
	// ExcludedSeconds of the stage's samples touched by a cycle of the
	// collector or a simulator (plus GCPad); OutsideAck is the ack latency
	// over the others.
	ExcludedSeconds float64  `json:"excludedSeconds"`
	OutsideAck      *Latency `json:"ackOutsideGc,omitempty"`
}

// gcPad: the seconds after a cycle that still count as its: the backlog of
// renewals it held up drains within about a second (docs/benchmarks.md, "Garbage collections").
const gcPad = 1.0

// gcRoles are the processes whose cycles the report lists: those that
// hold something per node. etcd's and the baseline writer's heaps are
// small; their cycles take milliseconds, several a minute.
var gcRoles = map[string]bool{"collector": true, "monitor": true, "sim": true, "sim-kill": true}

// ackRoles are the processes a renewal and its ack pass through.
var ackRoles = map[string]bool{"collector": true, "sim": true, "sim-kill": true}

// ackSample is the ack latency histogram of one sample interval ending at
// T, kept for the per-stage split around GC cycles.
type ackSample struct {
	T       float64
	DT      float64
	Buckets []PromBucket
}

// gcStage builds the GC summary of the stage [start, end].
func gcStage(cycles []GCCycle, samples []ackSample, start, end float64) *GCStage {
	g := &GCStage{}
	for _, c := range cycles {
		if c.Start < end && c.End() > start {
			g.Cycles = append(g.Cycles, c)
		}
	}
	sort.SliceStable(g.Cycles, func(i, j int) bool {
		if g.Cycles[i].Role != g.Cycles[j].Role {
			return g.Cycles[i].Role < g.Cycles[j].Role
		}
		return g.Cycles[i].Start < g.Cycles[j].Start
	})
	var outside []PromBucket
	for _, s := range samples {
		if s.T <= start || s.T > end {
			continue
		}
		if gcOverlaps(cycles, ackRoles, s.T, s.DT, gcPad) {
			g.ExcludedSeconds += s.DT
			continue
		}
		outside = addBuckets(outside, s.Buckets)
	}
	if n := totalOf(outside); n > 0 {
		g.OutsideAck = &Latency{N: n, P50: PromQuantile(0.5, outside), P99: PromQuantile(0.99, outside),
			Max: PromMaxBound(outside), MaxIsBound: true, Source: "simulator histogram, seconds outside GC cycles"}
	}
	return g
}

// gcCounts says how many cycles each role had and the longest, e.g.
// "collector 2 (≤ 1.60 s), sim 1 (1.00 s)".
func (g *GCStage) gcCounts(roles map[string]bool) string {
	type agg struct {
		n   int
		max float64
	}
	by := map[string]*agg{}
	var names []string
	for _, c := range g.Cycles {
		if roles != nil && !roles[c.Role] {
			continue
		}
		a := by[c.Role]
		if a == nil {
			a = &agg{}
			by[c.Role] = a
			names = append(names, c.Role)
		}
		a.n++
		a.max = math.Max(a.max, c.Seconds)
	}
	parts := make([]string, 0, len(names))
	for _, n := range names {
		a := by[n]
		s := n + " " + strconv.Itoa(a.n) + " ("
		if a.n > 1 {
			s += "≤ "
		}
		parts = append(parts, s+fdur(a.max)+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// gcCycles lists every cycle the stages recorded, each once, by start.
func (r *Report) gcCycles() []GCCycle {
	type key struct {
		role  string
		start float64
	}
	seen := map[key]bool{}
	var out []GCCycle
	for _, s := range r.Stages {
		if s.GC == nil {
			continue
		}
		for _, c := range s.GC.Cycles {
			if k := (key{c.Role, c.Start}); !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}
