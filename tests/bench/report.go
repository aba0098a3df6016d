// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Report is everything a run measured; report.json is this struct.
type Report struct {
	Title     string          `json:"title"`
	Command   string          `json:"command"`
	Started   time.Time       `json:"started"`
	Duration  float64         `json:"durationSeconds"`
	Machine   MachineInfo     `json:"machine"`
	LoadNote  string          `json:"loadNote,omitempty"`
	Config    ReportConfig    `json:"config"`
	Stages    []*Stage        `json:"stages"`
	Goals     []Goal          `json:"goals"`
	Compare   *Comparison     `json:"comparison,omitempty"`
	Timeline  []TimelinePoint `json:"timeline"`
	Markers   []Marker        `json:"markers"`
	Problems  []string        `json:"problems,omitempty"`
	Profiles  []string        `json:"profiles,omitempty"`
	LeaseSize int             `json:"baselineLeaseBytes,omitempty"`
}

// ReportConfig is the part of Config that shapes the numbers.
type ReportConfig struct {
	Nodes          int     `json:"nodes"`
	Connections    int     `json:"connections"`
	KillCount      int     `json:"killCount"`
	RampRate       float64 `json:"rampRate"`
	HoldSeconds    float64 `json:"holdSeconds"`
	GraceSeconds   float64 `json:"graceSeconds"`
	RenewSeconds   float64 `json:"renewIntervalSeconds"`
	CheckpointSecs float64 `json:"checkpointIntervalSeconds"`
	MonitorPeriod  float64 `json:"monitorPeriodSeconds"`
	// RestartDrainSecs is the collector's --drain.reconnect-window in the
	// run (0: the collector's default).
	RestartDrainSecs float64 `json:"restartDrainWindowSeconds,omitempty"`
	BaselineWorkers  int     `json:"baselineWorkers"`
	BaselineClients  int     `json:"baselineClients"`
	// SimGOMAXPROCS is the simulators' GOMAXPROCS (0: Go's default).
	SimGOMAXPROCS int `json:"simGomaxprocs,omitempty"`
}

// ProcStage is one process over one stage.
type ProcStage struct {
	CPUSeconds   float64 `json:"cpuSeconds"`
	Cores        float64 `json:"cores"`
	CPUPer1k     float64 `json:"cpuSecondsPer1kRenewals"`
	RSSEnd       int64   `json:"rssBytesEnd"`
	RSSMax       int64   `json:"rssBytesMax"`
	WrittenBytes int64   `json:"diskWriteBytes"`
}

// EtcdStage is etcd over one stage, from its own /metrics.
type EtcdStage struct {
	ProposalsPerSec float64 `json:"proposalsCommittedPerSec"` // raft proposals = write requests (Put, Txn, LeaseGrant ...)
	PutsPerSec      float64 `json:"putsPerSec"`
	PutBytesPerSec  float64 `json:"putBytesPerSec"` // key+value bytes put
	WALBytesPerSec  float64 `json:"walBytesPerSec"` // etcd_disk_wal_write_bytes_total
	DiskBytesPerSec float64 `json:"diskWriteBytesPerSec"`
	DBSize          float64 `json:"dbSizeBytes"` // at the end of the stage
	DBSizeInUse     float64 `json:"dbSizeInUseBytes"`
	// DBSizePeak is the largest file size sampled during the stage (every
	// 5 s): a defragmentation can shrink the file before the stage ends.
	DBSizePeak float64 `json:"dbSizePeakBytes"`
	Keys       float64 `json:"keys"`
}

// Latency of renewal acks (seconds).
type Latency struct {
	N          float64 `json:"n"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
	Max        float64 `json:"max"`
	MaxIsBound bool    `json:"maxIsBucketBound"`
	Source     string  `json:"source"`
}

// Detection of the killed nodes.
type Detection struct {
	Killed     int     `json:"killed"`
	Detected   int     `json:"detected"`
	PastGrace  Summary `json:"pastGraceSeconds"`  // Unknown seen − (last renewal or status report seen + grace)
	SinceKill  Summary `json:"sinceKillSeconds"`  // Unknown seen − SIGKILL
	WithinGoal int     `json:"withinGracePlus2s"` // killed nodes Unknown within grace + 2 s of their last renewal or status report
	// The split of PastGrace, from the served Ready condition's
	// lastTransitionTime (the monitor's clock at its mark; same host):
	MarkedPastGrace Summary `json:"markedPastGraceSeconds"` // mark − (last renewal seen + grace)
	SeenAfterMark   Summary `json:"seenAfterMarkSeconds"`   // Unknown seen − mark
}

// RestartResult of the collector restart stage.
type RestartResult struct {
	Survivors       int     `json:"survivors"`
	ReconnectSecs   float64 `json:"reconnectSeconds"` // SIGTERM until every survivor is attached to the new collector (-1: never)
	OldExitSecs     float64 `json:"oldCollectorExitSeconds"`
	UnknownsCaused  int     `json:"unknownsCaused"`
	ReattachedAtEnd int     `json:"reattachedAtEnd"`
}

// Stage is one phase of the run and what was measured in it.
type Stage struct {
	Name                string                `json:"name"`
	System              string                `json:"system"` // nodepulse or baseline
	Start               float64               `json:"startSeconds"`
	End                 float64               `json:"endSeconds"`
	Nodes               int                   `json:"nodes"`
	Renewals            float64               `json:"renewals"`
	RenewalsPS          float64               `json:"renewalsPerSec"`
	SentPS              float64               `json:"sentPerSec,omitempty"`
	Ack                 Latency               `json:"ackLatency"`
	FeedDelay           *Latency              `json:"feedDelay,omitempty"`
	Procs               map[string]*ProcStage `json:"procs"`
	TotalCores          float64               `json:"totalCores"`
	TotalPer1k          float64               `json:"totalCpuSecondsPer1kRenewals"`
	MachineBusy         float64               `json:"machineBusyCores"`  // whole machine, including other tenants
	MachineSteal        float64               `json:"machineStealCores"` // of which stolen by the hypervisor
	Etcd                EtcdStage             `json:"etcd"`
	Flatness            *Flatness             `json:"flatness,omitempty"`
	SentFlatness        *Flatness             `json:"sentFlatness,omitempty"` // the same renewals by when the simulators sent them (Flatness: by arrival)
	BytesPerNode        float64               `json:"collectorBytesPerNode,omitempty"`
	HeapPerNode         float64               `json:"collectorHeapBytesPerNode,omitempty"`
	FalseUnknown        int                   `json:"falseUnknown"`
	Detection           *Detection            `json:"detection,omitempty"`
	Restart             *RestartResult        `json:"restart,omitempty"`
	Errors              float64               `json:"errors,omitempty"`
	StatusReports       float64               `json:"statusReports,omitempty"`
	StatusUnchanged     float64               `json:"statusUnchanged,omitempty"`
	StatusTxns          float64               `json:"statusTxns,omitempty"`
	MonitorPasses       float64               `json:"monitorPasses,omitempty"`
	MonitorPassP50      float64               `json:"monitorPassP50Seconds,omitempty"`
	MonitorPassMax      float64               `json:"monitorPassMaxSeconds,omitempty"`
	MonitorHealthWrites float64               `json:"monitorHealthWrites,omitempty"`
	FalseUnknownSamples []string              `json:"falseUnknownSamples,omitempty"`
	EtcdKeys            map[string]int        `json:"etcdKeysByPrefix,omitempty"`
	GC                  *GCStage              `json:"gc,omitempty"`
	SchedWait           map[string]*SchedWait `json:"schedWait,omitempty"` // by process
	Note                string                `json:"note,omitempty"`
}

// SchedWait is how long one process's runnable goroutines waited for a
// thread to run them over a stage: the Go runtime's scheduling latency
// (/sched/latencies:seconds, exported as nodepulse_go_sched_latency_seconds).
// A renewal's ack passes through several goroutines of the simulator and
// of the collector, each of which may wait like this; a tail here that the
// ack tail matches is the machine's CPU not being there when a goroutine
// is ready, not a slow code path.
type SchedWait struct {
	Waits    float64 `json:"waits"` // sampled: the runtime times about one in eight of a goroutine's waits
	P50      float64 `json:"p50"`
	P99      float64 `json:"p99"`
	P999     float64 `json:"p999"`
	Over10ms float64 `json:"over10msShare"` // share of waits longer than 10 ms
}

// Duration of the stage in seconds.
func (s *Stage) Duration() float64 { return s.End - s.Start }

// Comparison of nodepulse and the baseline at the same N.
type Comparison struct {
	Nodes            int     `json:"nodes"`
	WALBytesRatio    float64 `json:"walBytesRatio"`  // nodepulse / baseline
	PutBytesRatio    float64 `json:"putBytesRatio"`  // nodepulse / baseline
	ProposalsRatio   float64 `json:"proposalsRatio"` // nodepulse / baseline
	TotalCPURatio    float64 `json:"totalCpuRatio"`  // nodepulse / baseline, every process
	EtcdCPURatio     float64 `json:"etcdCpuRatio"`   // nodepulse / baseline, etcd only
	NodepulseMaxN    int     `json:"nodepulseLargestNp99Under1s"`
	NodepulseMaxNote string  `json:"nodepulseLargestNote"`
	BaselineMaxN     int     `json:"baselineLargestNp99Under1s"`
	BaselineMaxNote  string  `json:"baselineLargestNote"`
}

// Goal is one target of issue 8 and whether this run met it.
type Goal struct {
	Goal     string `json:"goal"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      string `json:"met"` // yes, NO, n/a
}

// TimelinePoint is one sample for the chart.
type TimelinePoint struct {
	T          float64            `json:"t"`
	RenewalsPS float64            `json:"renewalsPerSec"`
	AckP99     float64            `json:"ackP99Seconds"`
	Attached   int                `json:"attached"`
	Ready      int                `json:"ready"`
	Unknown    int                `json:"unknown"`
	Cores      map[string]float64 `json:"cores"`
	// MachineBusy and Steal are the whole machine's busy and stolen cores
	// over the sample (steal: a VM's CPUs waiting for the hypervisor).
	MachineBusy float64 `json:"machineBusyCores"`
	Steal       float64 `json:"stealCores"`
	// DBSize is etcd's file size, sampled every 5 s (0 in between).
	DBSize float64 `json:"etcdDbSizeBytes,omitempty"`
}

// Marker is a labelled instant of the run (stage boundaries, kill, restart).
type Marker struct {
	T     float64 `json:"t"`
	Label string  `json:"label"`
}

// StageByName returns the stage or nil.
func (r *Report) StageByName(name string) *Stage {
	for _, s := range r.Stages {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func fnum(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	s := fmt.Sprintf("%.*f", prec, v)
	// thousands separators for the integer part
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	ip, fp, hasF := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range ip {
		if i > 0 && (len(ip)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if hasF {
		out += "." + fp
	}
	if neg {
		out = "-" + out
	}
	return out
}

// fdur renders seconds as ms below 1 s.
func fdur(sec float64) string {
	switch {
	case math.IsNaN(sec):
		return "–"
	case sec < 0.001:
		return fmt.Sprintf("%.2f ms", sec*1000)
	case sec < 1:
		return fmt.Sprintf("%.1f ms", sec*1000)
	default:
		return fmt.Sprintf("%.2f s", sec)
	}
}

func fbytes(b float64) string {
	switch {
	case math.IsNaN(b):
		return "–"
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// procOrder is the column order of processes.
var procOrder = []string{"collector", "monitor", "etcd", "sim", "sim-kill", "writer", "bench"}

// Markdown renders the report. chartPath, when not empty, is linked.
func (r *Report) Markdown(w io.Writer, chartPath string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("### %s\n\n", r.Title)
	p("`%s` — started %s, took %s.\n\n", r.Command, r.Started.UTC().Format("2006-01-02 15:04 UTC"), time.Duration(r.Duration*float64(time.Second)).Round(time.Second))
	m := r.Machine
	p("Machine: %d × %s, %.1f GiB RAM, Linux %s, %s, open files %s. Load average at start %s, at end %s.\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.Kernel, m.GoVersion, m.FDLimit, m.LoadStart, m.LoadEnd)
	if r.LoadNote != "" {
		p("> %s\n\n", r.LoadNote)
	}
	c := r.Config
	conns := fmt.Sprintf("%d connections", c.Connections)
	if c.Connections < 0 {
		conns = "one connection per node"
	}
	p("N = %s nodes (%s, %s killed at once), renewals every %gs with 4%% jitter, ramp %s/s, steady hold %gs, grace %gs, monitor period %gs, lease checkpoint every %gs.\n\n",
		fnum(float64(c.Nodes), 0), conns, fnum(float64(c.KillCount), 0), c.RenewSeconds, fnum(c.RampRate, 0), c.HoldSeconds, c.GraceSeconds, c.MonitorPeriod, c.CheckpointSecs)
	if c.SimGOMAXPROCS > 0 {
		p("The simulators ran with GOMAXPROCS=%d; the system under test with Go's default.\n\n", c.SimGOMAXPROCS)
	}
	if chartPath != "" {
		p("![renewals/s, ack latency and node states over the run](%s)\n\n", chartPath)
	}

	if len(r.Goals) > 0 {
		p("#### Goals\n\n| goal | target | measured | met |\n|---|---|---|---|\n")
		for _, g := range r.Goals {
			p("| %s | %s | %s | %s |\n", g.Goal, g.Target, g.Measured, g.Met)
		}
		p("\n")
	}
	if cmp := r.Compare; cmp != nil {
		p("#### nodepulse vs the Kubernetes write path at N = %s\n\n", fnum(float64(cmp.Nodes), 0))
		p("| | nodepulse / baseline |\n|---|---|\n")
		p("| etcd bytes written (WAL) | %s (%s× fewer) |\n", fnum(cmp.WALBytesRatio, 4), fnum(1/cmp.WALBytesRatio, 0))
		p("| etcd bytes put (key+value) | %s (%s× fewer) |\n", fnum(cmp.PutBytesRatio, 4), fnum(1/cmp.PutBytesRatio, 0))
		p("| etcd write requests (raft proposals) | %s (%s× fewer) |\n", fnum(cmp.ProposalsRatio, 4), fnum(1/cmp.ProposalsRatio, 0))
		p("| etcd CPU | %s |\n", fnum(cmp.EtcdCPURatio, 3))
		p("| total CPU, every process | %s |\n", fnum(cmp.TotalCPURatio, 3))
		p("| largest N with renewal p99 < 1 s | nodepulse %s; baseline %s |\n\n", cmp.NodepulseMaxNote, cmp.BaselineMaxNote)
	}

	p("#### Stages\n\n")
	p("| stage | nodes | s | renewals/s | ack p50 | ack p99 | ack max | etcd writes/s | etcd WAL B/s | etcd put B/s | etcd db | false Unknown |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Stages {
		maxs := fdur(s.Ack.Max)
		if s.Ack.MaxIsBound && !math.IsNaN(s.Ack.Max) {
			maxs = "≤ " + maxs
		}
		p("| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", s.Name, fnum(float64(s.Nodes), 0), s.Duration(),
			fnum(s.RenewalsPS, 0), fdur(s.Ack.P50), fdur(s.Ack.P99), maxs,
			fnum(s.Etcd.ProposalsPerSec, 1), fbytes(s.Etcd.WALBytesPerSec), fbytes(s.Etcd.PutBytesPerSec), fbytes(s.Etcd.DBSize), s.FalseUnknown)
	}
	p("\nAck latency: nodepulse from the simulator's histogram (`nodepulse_sim_lease_ack_latency_seconds`, factor-2 buckets, interpolated like `histogram_quantile`; its max is the bound of the highest bucket hit); baseline from the writer's 5%%-bucket histogram, measured from each renewal's due time (queueing included).\n\n")

	p("#### CPU (cores) and memory per process\n\n")
	names := r.procNames()
	p("| stage |")
	for _, n := range names {
		p(" %s |", n)
	}
	p(" total | CPU s / 1k renewals | machine busy |\n|---|")
	for range names {
		p("---:|")
	}
	p("---:|---:|---:|\n")
	for _, s := range r.Stages {
		p("| %s |", s.Name)
		for _, n := range names {
			if ps := s.Procs[n]; ps != nil {
				p(" %.2f (%s) |", ps.Cores, fbytes(float64(ps.RSSMax)))
			} else {
				p(" |")
			}
		}
		p(" %.2f | %s | %.2f (steal %.2f) |\n", s.TotalCores, fnum(s.TotalPer1k, 3), s.MachineBusy, s.MachineSteal)
	}
	p("\nCores = CPU seconds (utime+stime from /proc) / stage seconds; in brackets the largest RSS in the stage. Machine busy counts every process on the machine, so busy − total is what other tenants used; steal is the time a virtual machine's CPUs waited for the hypervisor (counted in busy; per second in report.json's timeline, `stealCores`).\n\n")

	p("#### Details\n\n")
	for _, s := range r.Stages {
		var parts []string
		if s.FeedDelay != nil && s.FeedDelay.N > 0 {
			parts = append(parts, fmt.Sprintf("renewal → feed delay p50 %s, p99 %s, max %s", fdur(s.FeedDelay.P50), fdur(s.FeedDelay.P99), fdur(s.FeedDelay.Max)))
		}
		if f := s.Flatness; f != nil && f.Bins > 0 {
			parts = append(parts, fmt.Sprintf("renewals per 100 ms: mean %.1f, sd %.1f, min %.0f, max %.0f, largest deviation %.1f%%, %.2f%% of bins within ±20%%",
				f.Mean, f.StdDev, f.Min, f.Max, 100*f.MaxDeviation, 100*f.Within20))
		}
		if f := s.SentFlatness; f != nil && f.Bins > 0 {
			parts = append(parts, fmt.Sprintf("as sent by the simulators: mean %.1f, sd %.1f, min %.0f, max %.0f, largest deviation %.1f%%, %.2f%% of bins within ±20%%",
				f.Mean, f.StdDev, f.Min, f.Max, 100*f.MaxDeviation, 100*f.Within20))
		}
		if s.BytesPerNode > 0 {
			parts = append(parts, fmt.Sprintf("collector memory per connected node: %s RSS (%s Go heap)", fbytes(s.BytesPerNode), fbytes(s.HeapPerNode)))
		}
		for _, n := range []string{"collector", "monitor", "etcd"} {
			if ps := s.Procs[n]; ps != nil && s.Renewals > 0 {
				parts = append(parts, fmt.Sprintf("%s %s CPU s per 1k renewals", n, fnum(ps.CPUPer1k, 4)))
			}
		}
		if s.Etcd.DiskBytesPerSec > 0 {
			parts = append(parts, fmt.Sprintf("etcd disk writes (WAL+bbolt, /proc io) %s/s", fbytes(s.Etcd.DiskBytesPerSec)))
		}
		if s.Etcd.DBSizeInUse > 0 {
			parts = append(parts, fmt.Sprintf("etcd db %s (%s in use; peak %s), %s keys", fbytes(s.Etcd.DBSize), fbytes(s.Etcd.DBSizeInUse), fbytes(s.Etcd.DBSizePeak), fnum(s.Etcd.Keys, 0)))
		}
		if d := s.Detection; d != nil {
			parts = append(parts, fmt.Sprintf("killed %d, Unknown %d (%d within grace + 2 s); past grace min %s / median %s / max %s; after SIGKILL min %s / median %s / max %s",
				d.Killed, d.Detected, d.WithinGoal, fdur(d.PastGrace.Min), fdur(d.PastGrace.Median), fdur(d.PastGrace.Max),
				fdur(d.SinceKill.Min), fdur(d.SinceKill.Median), fdur(d.SinceKill.Max)))
		}
		if rs := s.Restart; rs != nil {
			rc := "never (within the stage)"
			if rs.ReconnectSecs >= 0 {
				rc = fdur(rs.ReconnectSecs)
			}
			parts = append(parts, fmt.Sprintf("collector restart: old collector exited after %s; all %s survivors attached again after %s; Unknowns caused %d",
				fdur(rs.OldExitSecs), fnum(float64(rs.Survivors), 0), rc, rs.UnknownsCaused))
		}
		if s.Errors > 0 {
			parts = append(parts, fmt.Sprintf("%s write errors", fnum(s.Errors, 0)))
		}
		if t := s.schedWaitText(schedRoles); t != "" {
			parts = append(parts, "goroutines waiting to run (Go scheduling latency) p99 / p99.9, share over 10 ms: "+t)
		}
		if g := s.GC; g != nil && len(g.Cycles) > 0 {
			gc := "GC cycles: " + g.gcCounts(nil)
			if g.OutsideAck != nil && g.ExcludedSeconds > 0 {
				gc += fmt.Sprintf("; ack p50 %s, p99 %s over the seconds no cycle of the collector or a simulator touched (%.0f s left out: the cycles and %.0f s after each)",
					fdur(g.OutsideAck.P50), fdur(g.OutsideAck.P99), g.ExcludedSeconds, gcPad)
			}
			parts = append(parts, gc)
		}
		if s.Note != "" {
			parts = append(parts, s.Note)
		}
		if len(s.FalseUnknownSamples) > 0 {
			parts = append(parts, "false Unknown: "+strings.Join(s.FalseUnknownSamples, ", "))
		}
		if len(s.EtcdKeys) > 0 {
			var ks []string
			for k, v := range s.EtcdKeys {
				ks = append(ks, fmt.Sprintf("%s %s", k, fnum(float64(v), 0)))
			}
			sort.Strings(ks)
			parts = append(parts, "etcd keys by prefix: "+strings.Join(ks, ", "))
		}
		if len(parts) > 0 {
			p("- **%s**: %s.\n", s.Name, strings.Join(parts, "; "))
		}
	}
	if r.LeaseSize > 0 {
		p("- Baseline Lease object: %d bytes per write (coordination.k8s.io/v1 with managedFields, protobuf in the API server's `k8s\\x00` storage envelope), one etcd Txn (compare mod_revision, put) per renewal.\n", r.LeaseSize)
	}
	if len(r.Problems) > 0 {
		p("\nProblems seen:\n\n")
		for _, pr := range r.Problems {
			p("- %s\n", pr)
		}
	}
	if len(r.Profiles) > 0 {
		p("\nProfiles: %d files in `profiles/` (`go tool pprof -top <file>`).\n", len(r.Profiles))
	}
}

func (r *Report) procNames() []string {
	seen := map[string]bool{}
	for _, s := range r.Stages {
		for n := range s.Procs {
			seen[n] = true
		}
	}
	var out []string
	for _, n := range procOrder {
		if seen[n] {
			out = append(out, n)
			delete(seen, n)
		}
	}
	var rest []string
	for n := range seen {
		rest = append(rest, n)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// Text prints a short table for the terminal.
func (r *Report) Text(w io.Writer) {
	fmt.Fprintf(w, "\n%-22s %8s %6s %10s %9s %9s %9s %8s %10s %9s %7s\n", "stage", "nodes", "s", "renew/s", "ack p50", "ack p99", "etcd w/s", "etcd B/s", "etcd db", "cores", "falseU")
	for _, s := range r.Stages {
		fmt.Fprintf(w, "%-22s %8d %6.0f %10.0f %9s %9s %9.1f %8s %10s %9.2f %7d\n", s.Name, s.Nodes, s.Duration(), s.RenewalsPS,
			fdur(s.Ack.P50), fdur(s.Ack.P99), s.Etcd.ProposalsPerSec, fbytes(s.Etcd.WALBytesPerSec), fbytes(s.Etcd.DBSize), s.TotalCores, s.FalseUnknown)
	}
	if len(r.Goals) > 0 {
		fmt.Fprintln(w)
		for _, g := range r.Goals {
			fmt.Fprintf(w, "[%-3s] %s: %s (target %s)\n", g.Met, g.Goal, g.Measured, g.Target)
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}

// MarshalReport encodes the report as indented JSON; values that were not
// measured (NaN, ±Inf) become null.
func MarshalReport(r *Report) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		var ue *json.UnsupportedValueError
		if !errors.As(err, &ue) {
			return nil, err
		}
		// Round-trip through generic values with NaN replaced.
		v := sanitize(reflect.ValueOf(r).Elem())
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// sanitize converts v to JSON-ready generic values, following the json
// tags, with NaN and ±Inf as nil.
func sanitize(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return sanitize(v.Elem())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			return t
		}
		m := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fv := v.Field(i)
			if strings.Contains(opts, "omitempty") && fv.IsZero() {
				continue
			}
			m[name] = sanitize(fv)
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = sanitize(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := map[string]any{}
		for _, k := range v.MapKeys() {
			m[fmt.Sprint(k.Interface())] = sanitize(v.MapIndex(k))
		}
		return m
	default:
		return v.Interface()
	}
}

// schedRoles are the processes whose scheduling latency the report shows,
// in its order.
var schedRoles = []string{"collector", "monitor", "sim", "sim-kill"}

// schedWaitText lists the scheduling latency of roles that have one, e.g.
// "collector 6.5 ms / 15.1 ms, 0.21 %; sim 13.5 ms / 50.3 ms, 1.40 %".
func (s *Stage) schedWaitText(roles []string) string {
	var out []string
	for _, role := range roles {
		if w := s.SchedWait[role]; w != nil {
			out = append(out, fmt.Sprintf("%s %s / %s, %.2f %%", role, fdur(w.P99), fdur(w.P999), 100*w.Over10ms))
		}
	}
	return strings.Join(out, "; ")
}
