// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

func (r *runner) finish() {
	r.tlMu.Lock()
	r.report.Timeline = r.timeline
	r.report.Markers = r.markers
	r.report.Problems = append(r.report.Problems, r.problems...)
	r.report.Profiles = r.profiles
	samples := r.ackSamples
	r.tlMu.Unlock()
	r.addGC(samples)
	r.report.Compare = CompareStages(r.report)
	r.report.Goals = EvaluateGoals(r.report)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// sustains says a stage kept up with its offered load with renewal p99
// under 1 s: every node renewed about once per interval.
func sustains(s *Stage, interval float64) bool {
	if s == nil || math.IsNaN(s.Ack.P99) || s.Ack.P99 >= 1 {
		return false
	}
	offered := float64(s.Nodes) / (interval * 1.02)
	return s.RenewalsPS >= 0.9*offered
}

// CompareStages compares the nodepulse steady stage with the baseline
// stage at the same N (nil when either is missing).
func CompareStages(r *Report) *Comparison {
	np := r.StageByName("steady")
	if np == nil {
		return nil
	}
	var bl []*Stage
	for _, s := range r.Stages {
		if s.System == "baseline" {
			bl = append(bl, s)
		}
	}
	iv := r.Config.RenewSeconds
	c := &Comparison{Nodes: np.Nodes}
	if sustains(np, iv) {
		c.NodepulseMaxN = np.Nodes
		c.NodepulseMaxNote = fmt.Sprintf("≥ %s (the largest N of this run)", fnum(float64(np.Nodes), 0))
	} else {
		c.NodepulseMaxNote = fmt.Sprintf("< %s (p99 %s at %s)", fnum(float64(np.Nodes), 0), fdur(np.Ack.P99), fnum(float64(np.Nodes), 0))
	}
	if len(bl) == 0 {
		c.BaselineMaxNote = "not run"
		return c
	}
	sort.Slice(bl, func(i, j int) bool { return bl[i].Nodes < bl[j].Nodes })
	var tested []string
	for _, s := range bl {
		tested = append(tested, fmt.Sprintf("%s: p99 %s, %s renewals/s", fnum(float64(s.Nodes), 0), fdur(s.Ack.P99), fnum(s.RenewalsPS, 0)))
		if !sustains(s, iv) {
			break
		}
		c.BaselineMaxN = s.Nodes
	}
	switch {
	case c.BaselineMaxN == 0:
		c.BaselineMaxNote = fmt.Sprintf("< %s", fnum(float64(bl[0].Nodes), 0))
	case c.BaselineMaxN == bl[len(bl)-1].Nodes:
		c.BaselineMaxNote = fmt.Sprintf("≥ %s", fnum(float64(c.BaselineMaxN), 0))
	default:
		c.BaselineMaxNote = fmt.Sprintf("%s (of the steps tried)", fnum(float64(c.BaselineMaxN), 0))
	}
	c.BaselineMaxNote += " [" + strings.Join(tested, "; ") + "]"
	var eq *Stage
	for _, s := range bl {
		if s.Nodes == np.Nodes {
			eq = s
		}
	}
	if eq == nil {
		return c
	}
	c.WALBytesRatio = ratio(np.Etcd.WALBytesPerSec, eq.Etcd.WALBytesPerSec)
	c.PutBytesRatio = ratio(np.Etcd.PutBytesPerSec, eq.Etcd.PutBytesPerSec)
	c.ProposalsRatio = ratio(np.Etcd.ProposalsPerSec, eq.Etcd.ProposalsPerSec)
	c.TotalCPURatio = ratio(np.TotalCores, eq.TotalCores)
	if a, b := np.Procs["etcd"], eq.Procs["etcd"]; a != nil && b != nil {
		c.EtcdCPURatio = ratio(a.Cores, b.Cores)
	}
	return c
}

// EvaluateGoals checks the goals of issue 8 against the stages.
func EvaluateGoals(r *Report) []Goal {
	var g []Goal
	add := func(goal, target, measured, met string) {
		g = append(g, Goal{Goal: goal, Target: target, Measured: measured, Met: met})
	}
	steady := r.StageByName("steady")
	if steady == nil {
		return nil
	}
	n := steady.Nodes
	falseU := 0
	for _, s := range r.Stages {
		if s.System == "nodepulse" && s.Name != "restart" {
			falseU += s.FalseUnknown
		}
	}
	big := n >= 100000
	scale := func(ok bool) string {
		if !big {
			return "n/a (N < 100,000)"
		}
		return yes(ok)
	}
	add("nodes steady, 0 false Unknown", "100,000 (stretch 250,000)", fmt.Sprintf("%s nodes, %d false Unknown", fnum(float64(n), 0), falseU),
		scale(falseU == 0 && sustains(steady, r.Config.RenewSeconds)))
	if c := steady.Procs["collector"]; c != nil && steady.RenewalsPS > 0 {
		at10k := c.Cores * 10000 / steady.RenewalsPS
		add("collector CPU at 10,000 renewals/s", "≤ 0.5 core", fmt.Sprintf("%.2f core (%.2f at %s/s)", at10k, c.Cores, fnum(steady.RenewalsPS, 0)), yes(at10k <= 0.5))
	}
	ack := fmt.Sprintf("%s (p50 %s)", fdur(steady.Ack.P99), fdur(steady.Ack.P50))
	if gs := steady.GC; gs != nil && gs.OutsideAck != nil && gs.ExcludedSeconds > 0 {
		// Judged over the whole stage; what the seconds without a cycle of
		// the collector or the load generator saw says what the cycles cost.
		ack += fmt.Sprintf("; p99 %s over the seconds no GC cycle touched (left out: %.0f s of cycles and the %.0f s after each; %s)",
			fdur(gs.OutsideAck.P99), gs.ExcludedSeconds, gcPad, gs.gcCounts(ackRoles))
	}
	if t := steady.schedWaitText([]string{"collector", "sim"}); t != "" {
		// The ack passes through goroutines of both: how long those waited
		// to run at all bounds what the code can do about the tail.
		ack += "; goroutines waiting to run, p99 / p99.9, share over 10 ms: " + t
	}
	add("renewal ack p99", "≤ 10 ms", ack, yes(steady.Ack.P99 <= 0.010))
	e := steady.Etcd
	add("etcd write Txns/s, steady", "≤ 50", fmt.Sprintf("%.1f/s", e.ProposalsPerSec), scale(e.ProposalsPerSec <= 50))
	add("etcd bytes written/s, steady", "≤ 100 KB/s", fmt.Sprintf("%s/s WAL (%s/s key+value put)", fbytes(e.WALBytesPerSec), fbytes(e.PutBytesPerSec)),
		scale(e.WALBytesPerSec <= 100e3))
	if steady.StatusReports > 0 || steady.StatusTxns > 0 {
		add("unchanged statuses cost 0 etcd writes", "0", fmt.Sprintf("%s status reports (%s unchanged), %s status Txns",
			fnum(steady.StatusReports, 0), fnum(steady.StatusUnchanged, 0), fnum(steady.StatusTxns, 0)), yes(steady.StatusTxns == 0))
	} else {
		add("unchanged statuses cost 0 etcd writes", "0", "no status re-sends fell into the steady stage", "n/a")
	}
	// Judged at the ends of the stages, the steady state; the peak within
	// them (before a defragmentation, or before a compaction frees a
	// storm's history) is shown beside it.
	db, peak := e.DBSize, e.DBSizePeak
	for _, s := range r.Stages {
		if s.System == "nodepulse" {
			db, peak = max(db, s.Etcd.DBSize), max(peak, s.Etcd.DBSizePeak)
		}
	}
	add("etcd database size", "≤ 100 MB", fmt.Sprintf("%s at the end of a stage (peak within a stage %s)", fbytes(db), fbytes(peak)), scale(db <= 100e6))
	if steady.BytesPerNode > 0 {
		add("collector memory per connected node", "≤ 25 KB", fmt.Sprintf("%s RSS (%s Go heap)", fbytes(steady.BytesPerNode), fbytes(steady.HeapPerNode)),
			yes(steady.BytesPerNode <= 25e3))
	}
	if k := r.StageByName("kill"); k != nil && k.Detection != nil {
		d := k.Detection
		add("killed nodes Unknown within grace + 2 s (10% at once)", fmt.Sprintf("%d of %d", d.Killed, d.Killed),
			fmt.Sprintf("%d of %d; past grace median %s, max %s", d.WithinGoal, d.Killed, fdur(d.PastGrace.Median), fdur(d.PastGrace.Max)),
			yes(d.WithinGoal == d.Killed && d.Killed > 0))
	}
	if rs := r.StageByName("restart"); rs != nil && rs.Restart != nil {
		x := rs.Restart
		rc := "never"
		if x.ReconnectSecs >= 0 {
			rc = fdur(x.ReconnectSecs)
		}
		add("collector restart: all reconnected, 0 Unknown", "≤ 60 s, 0", fmt.Sprintf("%s, %d Unknown", rc, x.UnknownsCaused),
			yes(x.ReconnectSecs >= 0 && x.ReconnectSecs <= 60 && x.UnknownsCaused == 0))
	}
	if f := steady.Flatness; f != nil && f.Bins > 0 {
		m := fmt.Sprintf("%.2f%% of %d bins; largest deviation %.1f%% (mean %.0f)", 100*f.Within20, f.Bins, 100*f.MaxDeviation, f.Mean)
		if sf := steady.SentFlatness; sf != nil && sf.Bins > 0 {
			// Judged on arrival, the load the collector sees; the load as
			// sent says whether an uneven bin was offered or made on the way.
			m += fmt.Sprintf("; as sent: %.2f%%, largest deviation %.1f%%", 100*sf.Within20, 100*sf.MaxDeviation)
		}
		add("renewals per 100 ms within ±20% of the mean", "every bin", m, yes(f.Within20 >= 1))
	}
	if c := r.Compare; c != nil && c.WALBytesRatio > 0 {
		add("etcd bytes written vs the Kubernetes-style baseline at equal N", "≥ 10× fewer",
			fmt.Sprintf("%s× fewer (WAL), %s× fewer key+value bytes", fnum(1/c.WALBytesRatio, 0), fnum(1/c.PutBytesRatio, 0)), yes(c.WALBytesRatio <= 0.1))
	}
	return g
}
