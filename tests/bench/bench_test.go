// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/tests/procutil"
)

func TestPercentileAndSummary(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {10, 1}, {50, 5}, {90, 9}, {99, 10}, {100, 10}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if xs[0] != 5 {
		t.Fatal("Percentile sorted its input")
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty sample must be NaN")
	}
	s := Summarize(xs)
	if s != (Summary{N: 10, Min: 1, Median: 5, P99: 10, Max: 10}) {
		t.Errorf("Summarize = %+v", s)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("empty summary must be zero")
	}
}

func TestFlatness(t *testing.T) {
	f := FlatnessOf([]float64{100, 100, 120, 80, 100}, 0.1)
	if f.Mean != 100 || f.Min != 80 || f.Max != 120 || f.Within20 != 1 || math.Abs(f.MaxDeviation-0.2) > 1e-9 {
		t.Errorf("flat: %+v", f)
	}
	f = FlatnessOf([]float64{100, 100, 150, 50}, 0.1)
	if f.Within20 != 0.5 || math.Abs(f.MaxDeviation-0.5) > 1e-9 {
		t.Errorf("bumpy: %+v", f)
	}
	if f := FlatnessOf(nil, 0.1); f.Bins != 0 || f.Mean != 0 {
		t.Errorf("empty: %+v", f)
	}
}

func TestHistogram(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Observe(time.Duration(i) * time.Millisecond)
	}
	s := h.Snapshot()
	if s.Total() != 1000 {
		t.Fatalf("total %d", s.Total())
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 0.5}, {0.99, 0.99}, {1, 1}} {
		got := s.Quantile(c.q)
		if got < c.want || got > c.want*1.05+1e-9 {
			t.Errorf("Quantile(%v) = %v, want within 5%% above %v", c.q, got, c.want)
		}
	}
	if s.MaxSec != 1 {
		t.Errorf("max %v", s.MaxSec)
	}
	before := s
	h.Observe(5 * time.Second)
	d := h.Snapshot().Sub(before)
	if d.Total() != 1 || d.MaxBucket() < 5 || d.MaxBucket() > 5.25 {
		t.Errorf("delta %+v max %v", d, d.MaxBucket())
	}
	if !math.IsNaN((HistSnapshot{}).Quantile(0.5)) {
		t.Error("empty quantile must be NaN")
	}
	// Bucket boundaries: a value on a boundary falls in that bucket.
	for i := range 50 {
		if got := bucketOf(BucketUpper(i)); got != i {
			t.Errorf("bucketOf(upper(%d)) = %d", i, got)
		}
	}
}

const sampleMetrics = `# HELP nodepulse_sim_lease_ack_latency_seconds Lease renewal send until its ack.
# TYPE nodepulse_sim_lease_ack_latency_seconds histogram
nodepulse_sim_lease_ack_latency_seconds_bucket{le="0.001"} 50
nodepulse_sim_lease_ack_latency_seconds_bucket{le="0.002"} 90
nodepulse_sim_lease_ack_latency_seconds_bucket{le="0.004"} 99
nodepulse_sim_lease_ack_latency_seconds_bucket{le="0.008"} 100
nodepulse_sim_lease_ack_latency_seconds_bucket{le="+Inf"} 100
nodepulse_sim_lease_ack_latency_seconds_sum 0.1
nodepulse_sim_lease_ack_latency_seconds_count 100
nodepulse_collector_messages_total{kind="status",result="ok"} 7
nodepulse_collector_messages_total{kind="status",result="unchanged"} 3
nodepulse_collector_messages_total{kind="lease",result="ok"} 1e+06
etcd_server_proposals_committed_total 12345 1700000000000
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if v := m.Value("nodepulse_collector_messages_total", `kind="status"`); v != 10 {
		t.Errorf("status messages %v", v)
	}
	if v := m.Value("nodepulse_collector_messages_total", `kind="status"`, `result="unchanged"`); v != 3 {
		t.Errorf("unchanged %v", v)
	}
	if v := m.Value("nodepulse_collector_messages_total"); v != 1e6+10 {
		t.Errorf("all %v", v)
	}
	if v := m.Value("etcd_server_proposals_committed_total"); v != 12345 {
		t.Errorf("with timestamp %v", v)
	}
	if !math.IsNaN(m.Value("absent")) {
		t.Error("absent must be NaN")
	}
	b := m.Buckets("nodepulse_sim_lease_ack_latency_seconds")
	if len(b) != 5 || !math.IsInf(b[4].Le, 1) || b[0].Le != 0.001 {
		t.Fatalf("buckets %+v", b)
	}
	// p50 at the top of the first bucket; p90 at the top of the second;
	// p95 interpolated inside the third.
	if q := PromQuantile(0.5, b); q != 0.001 {
		t.Errorf("p50 %v", q)
	}
	if q := PromQuantile(0.9, b); q != 0.002 {
		t.Errorf("p90 %v", q)
	}
	if q := PromQuantile(0.95, b); math.Abs(q-(0.002+0.002*5.0/9)) > 1e-12 {
		t.Errorf("p95 %v", q)
	}
	if mb := PromMaxBound(b); mb != 0.008 {
		t.Errorf("max bound %v", mb)
	}
	zero := SubBuckets(b, b)
	if !math.IsNaN(PromQuantile(0.5, zero)) || !math.IsNaN(PromMaxBound(zero)) {
		t.Error("an empty delta has no quantile")
	}
	if _, err := ParseMetrics(strings.NewReader("broken{ 1\n")); err == nil {
		t.Error("want error for a broken line")
	}
}

// fixedReport is a small report with every section filled.
func fixedReport() *Report {
	np := &Stage{Name: "steady", System: "nodepulse", Start: 30, End: 180, Nodes: 100000, Renewals: 1.5e6, RenewalsPS: 10000,
		Ack:        Latency{P50: 0.0011, P99: 0.0042, Max: 0.016, MaxIsBound: true},
		Procs:      map[string]*ProcStage{"collector": {Cores: 0.4, RSSMax: 2 << 30}, "etcd": {Cores: 0.05}, "monitor": {Cores: 0.1}},
		TotalCores: 0.55, Etcd: EtcdStage{ProposalsPerSec: 3, WALBytesPerSec: 90e3, PutBytesPerSec: 80e3, DBSize: 80e6},
		Flatness:     &Flatness{Bins: 1500, Mean: 1000, Within20: 1, MaxDeviation: 0.12},
		SentFlatness: &Flatness{Bins: 1500, Mean: 1000, Min: 960, Max: 1051, Within20: 1, MaxDeviation: 0.051}, BytesPerNode: 20e3, StatusReports: 100, StatusUnchanged: 100,
		GC: &GCStage{Cycles: []GCCycle{{Role: "collector", Start: 90, Seconds: 1.6}, {Role: "monitor", Start: 100, Seconds: 2.1}},
			ExcludedSeconds: 4, OutsideAck: &Latency{N: 1.46e6, P50: 0.001, P99: 0.0031}},
		SchedWait: map[string]*SchedWait{"collector": {Waits: 1e6, P99: 0.0021, P999: 0.0064, Over10ms: 0.0002},
			"sim": {Waits: 2e6, P99: 0.0135, P999: 0.05, Over10ms: 0.014}}}
	kill := &Stage{Name: "kill", System: "nodepulse", Start: 180, End: 230, Nodes: 90000,
		Detection: &Detection{Killed: 10000, Detected: 10000, WithinGoal: 10000, PastGrace: Summary{N: 10000, Min: 0.1, Median: 0.9, Max: 1.8}},
		Ack:       Latency{P50: math.NaN(), P99: math.NaN(), Max: math.NaN()}}
	restart := &Stage{Name: "restart", System: "nodepulse", Start: 230, End: 290, Nodes: 90000, Restart: &RestartResult{Survivors: 90000, ReconnectSecs: 25}}
	bl := &Stage{Name: "baseline-100000", System: "baseline", Start: 300, End: 360, Nodes: 100000, Renewals: 4e5, RenewalsPS: 6600,
		Ack: Latency{P50: 0.5, P99: 3.2, Max: 9}, TotalCores: 1.9, Procs: map[string]*ProcStage{"etcd": {Cores: 1.2}, "writer": {Cores: 0.7}},
		Etcd: EtcdStage{ProposalsPerSec: 6600, WALBytesPerSec: 5e6, PutBytesPerSec: 4.7e6}}
	small := &Stage{Name: "baseline-10000", System: "baseline", Nodes: 10000, RenewalsPS: 990, Ack: Latency{P99: 0.02}}
	r := &Report{Title: "100,000 nodes, 1000 connections", Command: "bench --nodes=100000", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration: 700, Machine: MachineInfo{CPUs: 2, CPUModel: "Test CPU"},
		Config: ReportConfig{Nodes: 100000, Connections: 1000, KillCount: 10000, RenewSeconds: 10, GraceSeconds: 40, SimGOMAXPROCS: 4},
		Stages: []*Stage{np, kill, restart, small, bl},
		Timeline: []TimelinePoint{{T: 0, AckP99: math.NaN()}, {T: 1, RenewalsPS: 9000, AckP99: 0.004, Attached: 100, Ready: 90, Unknown: 10},
			{T: 2, RenewalsPS: 10000, AckP99: 0.002, Attached: 100, Ready: 100}},
		Markers: []Marker{{T: 1, Label: "steady <&>"}}}
	r.Compare = CompareStages(r)
	r.Goals = EvaluateGoals(r)
	return r
}

func TestCompareAndGoals(t *testing.T) {
	r := fixedReport()
	c := r.Compare
	if c == nil || math.Abs(c.WALBytesRatio-90e3/5e6) > 1e-12 || c.BaselineMaxN != 10000 || c.NodepulseMaxN != 100000 {
		t.Fatalf("comparison %+v", c)
	}
	met := map[string]string{}
	for _, g := range r.Goals {
		met[g.Goal] = g.Met
	}
	for goal, want := range map[string]string{
		"nodes steady, 0 false Unknown":                                  "yes",
		"collector CPU at 10,000 renewals/s":                             "yes",
		"renewal ack p99":                                                "yes",
		"etcd write Txns/s, steady":                                      "yes",
		"etcd bytes written/s, steady":                                   "yes",
		"unchanged statuses cost 0 etcd writes":                          "yes",
		"etcd database size":                                             "yes",
		"collector memory per connected node":                            "yes",
		"killed nodes Unknown within grace + 2 s (10% at once)":          "yes",
		"collector restart: all reconnected, 0 Unknown":                  "yes",
		"renewals per 100 ms within ±20% of the mean":                    "yes",
		"etcd bytes written vs the Kubernetes-style baseline at equal N": "yes",
	} {
		if met[goal] != want {
			t.Errorf("goal %q: met %q, want %q", goal, met[goal], want)
		}
	}
	// A slow detection is a miss.
	r.StageByName("kill").Detection.WithinGoal = 9999
	for _, g := range EvaluateGoals(r) {
		if strings.HasPrefix(g.Goal, "killed nodes") && g.Met != "NO" {
			t.Errorf("detection goal with a late node: %+v", g)
		}
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	r := fixedReport()
	var b bytes.Buffer
	r.Markdown(&b, "chart.svg")
	md := b.String()
	for _, want := range []string{"### 100,000 nodes, 1000 connections", "![renewals/s", "| etcd bytes written (WAL) | 0.018", "56× fewer",
		"| steady | 100,000 | 150 | 10,000 | 1.1 ms | 4.2 ms | ≤ 16.0 ms |", "#### Goals", "killed 10000, Unknown 10000", "≥ 100,000",
		"| stage | collector | monitor | etcd | writer | total |",
		"4.2 ms (p50 1.1 ms); p99 3.1 ms over the seconds no GC cycle touched (left out: 4 s of cycles and the 1 s after each; collector 1 (1.60 s))",
		"GC cycles: collector 1 (1.60 s), monitor 1 (2.10 s); ack p50 1.0 ms, p99 3.1 ms over the seconds",
		"| renewals per 100 ms within ±20% of the mean | every bin | 100.00% of 1500 bins; largest deviation 12.0% (mean 1000); as sent: 100.00%, largest deviation 5.1% | yes |",
		"as sent by the simulators: mean 1000.0, sd 0.0, min 960, max 1051, largest deviation 5.1%",
		"(left out: 4 s of cycles and the 1 s after each; collector 1 (1.60 s)); goroutines waiting to run, p99 / p99.9, share over 10 ms: collector 2.1 ms / 6.4 ms, 0.02 %; sim 13.5 ms / 50.0 ms, 1.40 % | yes |",
		"goroutines waiting to run (Go scheduling latency) p99 / p99.9, share over 10 ms: collector 2.1 ms / 6.4 ms, 0.02 %; sim 13.5 ms / 50.0 ms, 1.40 %",
		"The simulators ran with GOMAXPROCS=4; the system under test with Go's default."} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	js, err := MarshalReport(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("report.json does not parse: %v", err)
	}
	if !strings.Contains(string(js), `"p50": null`) {
		t.Error("NaN must become null")
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	svg := Chart(fixedReport())
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
	}
	for _, want := range []string{"<svg", "renewals/s", "Unknown", "steady &lt;&amp;&gt;", "<path d=\"M", "<title>collector GC 1.60 s</title>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "NaN") {
		t.Error("chart contains NaN coordinates")
	}
	// An empty report still renders.
	if s := Chart(&Report{}); !strings.Contains(s, "</svg>") {
		t.Error("empty chart")
	}
}

func TestConfigSteps(t *testing.T) {
	c := Config{Nodes: 50000, BaselineSteps: "10000, 25000,50000,80000", Connections: 1000, LeaseSeconds: 40}
	s, err := c.Steps()
	if err != nil || len(s) != 4 || s[0] != 10000 || s[1] != 25000 || s[2] != 50000 || s[3] != 80000 {
		t.Errorf("steps %v %v", s, err)
	}
	c.BaselineSteps = "x"
	if c.Validate() == nil {
		t.Error("bad steps must fail")
	}
	c.BaselineSteps = ""
	c.ProfileGoroutines = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--profile-goroutines") {
		t.Errorf("goroutine dumps without profiles: %v, want an error naming --profile-goroutines", err)
	}
	c.Profile = true
	if err := c.Validate(); err != nil {
		t.Errorf("goroutine dumps with profiles: %v", err)
	}
	c = Config{Nodes: 1000, KillFraction: 0.1, Kill: true}
	if c.KillCount() != 100 {
		t.Errorf("kill count %d", c.KillCount())
	}
}

// The simulators share the memory limit under which they run with GC off
// by node count, never below 512 MiB each; negative keeps their default.
func TestSimMemoryLimit(t *testing.T) {
	c := Config{Nodes: 100000, SimMemoryLimitMiB: 8192}
	if got := c.simMemoryLimitMiB(90000); got != 7372 {
		t.Errorf("90,000 of 100,000 nodes: %d MiB, want 7372", got)
	}
	if got := c.simMemoryLimitMiB(1000); got != 512 {
		t.Errorf("1,000 of 100,000 nodes: %d MiB, want the 512 floor", got)
	}
	c.SimMemoryLimitMiB = -1
	if got := c.simMemoryLimitMiB(90000); got != 0 {
		t.Errorf("negative: %d MiB, want 0 (the simulator's default)", got)
	}
	c.SimMemoryLimitMiB = 0
	half := procutil.MemTotal() / 2 >> 20
	if got := c.simMemoryLimitMiB(100000); got < 100000*40>>10 || got < half {
		t.Errorf("auto: %d MiB, want half the machine (%d MiB), at least 40 KiB per node", got, half)
	}
	// The automatic share on the project machine (24,064 MiB) and smaller
	// ones: two thirds where the system under test leaves that much, what
	// it leaves down to half, and never under 40 KiB per node.
	for _, tc := range []struct {
		total int64
		nodes int
		want  int64
	}{
		{24064, 100000, 16042}, // two thirds: 18,110 MiB left
		{24064, 250000, 12251}, // what is left: 24,064 - 9,765 - 2,048
		{24064, 400000, 15625}, // 40 KiB per node, above two thirds
		{8192, 100000, 4096},   // half: 2,240 MiB left
		{0, 100000, 0},         // unknown machine
	} {
		if got := autoSimMemoryMiB(tc.total, tc.nodes); got != tc.want {
			t.Errorf("autoSimMemoryMiB(%d MiB, %d nodes) = %d, want %d", tc.total, tc.nodes, got, tc.want)
		}
	}
}

// TestRestartDrainWindow: the collector gets the short drain window the
// restart stage is documented with, and 0 leaves the collector's defaults.
func TestRestartDrainWindow(t *testing.T) {
	r := &runner{cfg: Config{Nodes: 1000, Checkpoint: time.Minute, RestartDrain: time.Second}}
	args := strings.Join(r.collectorArgs(), " ")
	if !strings.Contains(args, "--drain.reconnect-window=1s") || !strings.Contains(args, "--grpc.drain-timeout=3s") {
		t.Errorf("collector args %q lack the drain window", args)
	}
	r.cfg.RestartDrain = 0
	if args := strings.Join(r.collectorArgs(), " "); strings.Contains(args, "drain") {
		t.Errorf("collector args %q: want the collector's drain defaults", args)
	}
	c := Config{Nodes: 1000, Connections: 10, LeaseSeconds: 40, RestartDrain: -time.Second}
	if c.Validate() == nil {
		t.Error("negative drain window accepted")
	}
}

// promHist is a scrape holding one cumulative histogram (bound → count)
// of a process started at start.
func promHist(name string, start float64, cum map[string]float64) Metrics {
	m := Metrics{"process_start_time_seconds": {{Value: start}}}
	for le, n := range cum {
		m[name+"_bucket"] = append(m[name+"_bucket"], Sample{Labels: `le="` + le + `"`, Value: n})
	}
	return m
}

func TestSchedWaits(t *testing.T) {
	a := &snap{coll: promHist(schedMetric, 1, map[string]float64{"0.001": 900, "0.01": 990, "+Inf": 1000}),
		mon: promHist(schedMetric, 1, map[string]float64{"0.001": 50, "0.01": 50, "+Inf": 50}), sims: map[string]Metrics{}}
	b := &snap{coll: promHist(schedMetric, 1, map[string]float64{"0.001": 1800, "0.01": 1980, "+Inf": 2000}),
		// The monitor restarted within the stage: its counts are its own.
		mon: promHist(schedMetric, 2, map[string]float64{"0.001": 10, "0.01": 10, "+Inf": 10}),
		// The simulator was not scraped at the start: all of its life.
		sims: map[string]Metrics{"sim": promHist(schedMetric, 1, map[string]float64{"0.001": 40, "0.01": 80, "+Inf": 100})}}
	got := schedWaits(a, b)
	for role, want := range map[string]SchedWait{
		"collector": {Waits: 1000, Over10ms: 0.01},
		"monitor":   {Waits: 10, Over10ms: 0},
		"sim":       {Waits: 100, Over10ms: 0.2},
	} {
		w := got[role]
		if w == nil || w.Waits != want.Waits || math.Abs(w.Over10ms-want.Over10ms) > 1e-12 {
			t.Errorf("%s: %+v, want waits %v, over 10 ms %v", role, w, want.Waits, want.Over10ms)
		}
	}
	// 900 of the collector's 1,000 waits ≤ 1 ms, 90 more ≤ 10 ms: the
	// median interpolates in the first bucket, p99 ends the second.
	if c := got["collector"]; math.Abs(c.P50-0.001*500/900) > 1e-12 || math.Abs(c.P99-0.01) > 1e-12 {
		t.Errorf("collector p50 %v, p99 %v", c.P50, c.P99)
	}
	if len(schedWaits(&snap{sims: map[string]Metrics{}}, &snap{sims: map[string]Metrics{}})) != 0 {
		t.Error("no scrapes must give no scheduling latency")
	}
}

func TestSimEnv(t *testing.T) {
	for _, c := range []struct {
		set  int
		want []string
	}{
		{0, []string{"GOMAXPROCS=" + strconv.Itoa(2*runtime.NumCPU())}},
		{3, []string{"GOMAXPROCS=3"}},
		{-1, nil},
	} {
		cfg := Config{SimGOMAXPROCS: c.set}
		if got := cfg.simEnv(); !slices.Equal(got, c.want) {
			t.Errorf("--sim-gomaxprocs=%d: simulator environment %q, want %q", c.set, got, c.want)
		}
	}
}
