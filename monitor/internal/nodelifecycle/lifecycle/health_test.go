// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"strings"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func cond(typ, status string, hb, tr time.Time) *nodev1.NodeCondition {
	return &nodev1.NodeCondition{Type: typ, Status: status, Reason: "R" + status, Message: "m",
		LastHeartbeatTime: nodemodel.Timestamp(hb), LastTransitionTime: nodemodel.Timestamp(tr)}
}

// reported returns a fresh node status with every reporter condition.
func reported(ready string, hb time.Time) *nodev1.NodeStatus {
	return &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
		cond(nodemodel.MemoryPressure, nodemodel.False, hb, t0),
		cond(nodemodel.DiskPressure, nodemodel.False, hb, t0),
		cond(nodemodel.PIDPressure, nodemodel.False, hb, t0),
		cond(nodemodel.Ready, ready, hb, t0),
		cond(nodemodel.NetworkUnavailable, nodemodel.False, hb, t0),
	}}
}

func nodeWith(st *nodev1.NodeStatus, overrides []*nodev1.NodeCondition) *nodev1.Node {
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1", CreationTimestamp: nodemodel.Timestamp(t0.Add(-time.Hour))}}
	return nodemodel.Merge(meta, st, &nodev1.NodeHealth{ConditionOverrides: overrides})
}

// step runs Evaluate and, like the controller, feeds the new overrides into
// the next input.
type sim struct {
	cfg       Config
	rec       Record
	st        *nodev1.NodeStatus
	overrides []*nodev1.NodeCondition
	lease     time.Time
	leaseAt   time.Time
	feed      uint64
	feedAt    time.Time
	epoch     uint64
	paused    bool
	blind     time.Duration
	fresh     time.Time
	quiet     time.Time
	// statusHB, statusAt: the newest STATUS_REPORTED heartbeat on the feed
	// and when it arrived (unchanged reports never reach st).
	statusHB, statusAt time.Time
}

func (s *sim) at(now time.Time) Result {
	r := Evaluate(s.cfg, now, &s.rec, &Input{
		Node: nodeWith(s.st, s.overrides), Reported: s.st, Overrides: s.overrides, Heartbeat: s.heartbeat(),
	})
	s.overrides = r.Overrides
	return r
}

// heartbeat is what liveness.Merge hands the controller: the lease as the
// controller picked it (etcd's or the feed's), the feed's counters, the
// status heartbeat read from st.
func (s *sim) heartbeat() liveness.Heartbeat {
	m := liveness.Merge(liveness.Node{StatusHeartbeat: s.statusHB, StatusObservedAt: s.statusAt}, nil, s.st, liveness.Grants{})
	return liveness.Heartbeat{LeaseRenew: s.lease, LeaseObservedAt: s.leaseAt, Renewals: s.feed, ObservedAt: s.feedAt,
		StatusHeartbeat: m.StatusHeartbeat, StatusObservedAt: m.StatusObservedAt, Reported: m.Reported,
		Epoch: s.epoch, Held: s.paused, FreshSince: s.fresh, Blind: s.blind, QuietUntil: s.quiet}
}

func ready(r Result) string { return r.Current.GetStatus() }

func TestGraceBoundary(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  string
	}{
		{"well within grace", 10 * time.Second, nodemodel.True},
		{"exactly at probe+grace is still healthy", cfg.GracePeriod, nodemodel.True},
		{"one nanosecond past grace is Unknown", cfg.GracePeriod + time.Nanosecond, nodemodel.Unknown},
		{"long past grace", 10 * time.Minute, nodemodel.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
			if r := s.at(t0); ready(r) != nodemodel.True || r.Changed {
				t.Fatalf("first sight: ready=%s changed=%v", ready(r), r.Changed)
			}
			r := s.at(t0.Add(tc.after))
			if got := ready(r); got != tc.want {
				t.Fatalf("Ready after %s = %s, want %s", tc.after, got, tc.want)
			}
			if r.Marked != (tc.want == nodemodel.Unknown) {
				t.Errorf("Marked = %v", r.Marked)
			}
		})
	}
}

func TestUnknownMarkingExactStrings(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	now := t0.Add(cfg.GracePeriod + time.Second)
	r := s.at(now)
	if !r.Changed || !r.Marked || r.Observed.GetStatus() != nodemodel.True {
		t.Fatalf("want a marking write with observed True, got %+v", r)
	}
	n := nodeWith(s.st, r.Overrides)
	for _, typ := range nodemodel.ReporterConditions {
		c := nodemodel.FindCondition(n.GetStatus().GetConditions(), typ)
		if c.GetStatus() != nodemodel.Unknown || c.GetReason() != nodemodel.ReasonNodeStatusUnknown || c.GetMessage() != "Kubelet stopped posting node status." {
			t.Errorf("%s = %s/%s/%q", typ, c.GetStatus(), c.GetReason(), c.GetMessage())
		}
		if !c.GetLastTransitionTime().AsTime().Equal(now) {
			t.Errorf("%s transition = %v, want now", typ, c.GetLastTransitionTime().AsTime())
		}
		if !c.GetLastHeartbeatTime().AsTime().Equal(t0) {
			t.Errorf("%s heartbeat changed to %v; it must stay untouched", typ, c.GetLastHeartbeatTime().AsTime())
		}
	}
	if nu := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.NetworkUnavailable); nu.GetStatus() != nodemodel.False {
		t.Errorf("NetworkUnavailable touched: %s", nu.GetStatus())
	}
	// Already Unknown: untouched on later passes.
	if r := s.at(now.Add(time.Minute)); r.Changed {
		t.Errorf("second pass rewrote overrides: %+v", r.Overrides)
	}
}

func TestStartupGrace(t *testing.T) {
	cfg := DefaultConfig()
	created := t0.Add(-10 * time.Second)
	newNode := func() *sim {
		s := &sim{cfg: cfg, st: &nodev1.NodeStatus{}}
		return s
	}
	evalAt := func(s *sim, now time.Time) Result {
		meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1", CreationTimestamp: nodemodel.Timestamp(created)}}
		r := Evaluate(s.cfg, now, &s.rec, &Input{Node: nodemodel.Merge(meta, s.st, &nodev1.NodeHealth{ConditionOverrides: s.overrides}),
			Reported: s.st, Overrides: s.overrides, Heartbeat: s.heartbeat()})
		s.overrides = r.Overrides
		return r
	}
	t.Run("probe seeded with creation time; startup grace applies", func(t *testing.T) {
		s := newNode()
		r := evalAt(s, t0)
		if r.Grace != cfg.StartupGracePeriod || r.Changed {
			t.Fatalf("grace %s changed %v", r.Grace, r.Changed)
		}
		if r := evalAt(s, created.Add(cfg.StartupGracePeriod)); r.Changed {
			t.Fatal("marked exactly at creation+startup grace")
		}
		r = evalAt(s, created.Add(cfg.StartupGracePeriod+time.Millisecond))
		if !r.Changed || ready(r) != nodemodel.Unknown {
			t.Fatalf("not marked past startup grace: %+v", r)
		}
		n := nodeWith(s.st, r.Overrides)
		for _, typ := range nodemodel.ReporterConditions {
			c := nodemodel.FindCondition(n.GetStatus().GetConditions(), typ)
			if c.GetReason() != nodemodel.ReasonNodeStatusNeverUpdated || c.GetMessage() != "Kubelet never posted node status." {
				t.Errorf("%s: %s %q", typ, c.GetReason(), c.GetMessage())
			}
		}
	})
	t.Run("a node older than the leadership is judged from the takeover", func(t *testing.T) {
		s := newNode()
		s.fresh = t0
		evalAt(s, t0)
		if r := evalAt(s, t0.Add(cfg.StartupGracePeriod)); r.Changed {
			t.Fatal("marked within startup grace of the takeover")
		}
	})
}

func TestLeaseOnlyHeartbeatsKeepNodeHealthy(t *testing.T) {
	cfg := DefaultConfig()
	for _, src := range []string{"etcd lease", "feed"} {
		t.Run(src, func(t *testing.T) {
			s := &sim{cfg: cfg, st: reported(nodemodel.True, t0), lease: t0.Add(-time.Hour)}
			s.at(t0)
			// The status never changes again; only heartbeats arrive, every 10s,
			// with reporter clocks an hour off (never compared with ours).
			for i := 1; i <= 30; i++ {
				now := t0.Add(time.Duration(i) * 10 * time.Second)
				if src == "feed" {
					s.feed++
				} else {
					s.lease = s.lease.Add(10 * time.Second)
				}
				if r := s.at(now); ready(r) != nodemodel.True {
					t.Fatalf("Unknown at %s despite heartbeats", now.Sub(t0))
				}
			}
			if r := s.at(t0.Add(300*time.Second + cfg.GracePeriod + time.Second)); ready(r) != nodemodel.Unknown {
				t.Fatal("not Unknown after heartbeats stopped")
			}
		})
	}
}

func TestRecoveryNeedsNewEvidence(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	marked := t0.Add(cfg.GracePeriod + time.Second)
	s.at(marked)
	// A fresh grace period (failover, resume) is not evidence.
	s.epoch++
	if r := s.at(marked.Add(time.Second)); ready(r) != nodemodel.Unknown || r.Changed {
		t.Fatalf("fresh grace lifted the override: %+v", r)
	}
	// A lease renewal is.
	s.feed++
	r := s.at(marked.Add(2 * time.Second))
	if !r.Recovered || len(r.Overrides) != 0 || ready(r) != nodemodel.True {
		t.Fatalf("renewal did not lift the override: %+v", r)
	}
}

func TestNewLeaderKeepsInheritedOverrides(t *testing.T) {
	cfg := DefaultConfig()
	// A previous leader marked the node; this controller has no record.
	st := reported(nodemodel.True, t0)
	inherited, _ := markUnknown(t0, nodeWith(st, nil), nil, time.Time{})
	s := &sim{cfg: cfg, st: st, overrides: inherited, feed: 7, lease: t0}
	now := t0.Add(time.Hour)
	if r := s.at(now); r.Changed || ready(r) != nodemodel.Unknown {
		t.Fatalf("first sight changed the node: %+v", r)
	}
	if r := s.at(now.Add(cfg.GracePeriod + time.Second)); r.Changed {
		t.Fatalf("already Unknown node rewritten: %+v", r)
	}
	s.feed++
	if r := s.at(now.Add(cfg.GracePeriod + 2*time.Second)); !r.Recovered {
		t.Fatal("new renewal did not lift the inherited override")
	}
}

func TestPausedNeverMarks(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	s.paused = true
	for d := time.Duration(0); d < 5*time.Minute; d += 5 * time.Second {
		if r := s.at(t0.Add(d)); r.Changed {
			t.Fatalf("marked while paused at %s", d)
		}
	}
	// The feed resumes after a 5-minute gap: the node's clock stood still
	// for it, so it has the whole grace period from the gap's end (the
	// probe never moves past now).
	s.paused, s.blind = false, 5*time.Minute
	end := t0.Add(5 * time.Minute)
	if r := s.at(end.Add(cfg.GracePeriod - 5*time.Second)); r.Changed {
		t.Fatal("marked within grace after pause")
	}
	if r := s.at(end.Add(cfg.GracePeriod + 5*time.Second)); !r.Changed {
		t.Fatal("not marked after grace following pause")
	}
}

// A short stale gap of the feed while a node is dead delays its marking by
// the gap, not by a grace period: the node's clock stops only while the
// monitor was blind.
func TestBlindGapStopsTheClockForItsLength(t *testing.T) {
	cfg := DefaultConfig()
	gap := 3 * time.Second
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0), feed: 1, feedAt: t0}
	s.at(t0)
	s.feed, s.feedAt = 2, t0.Add(5*time.Second) // the node's last renewal
	s.at(t0.Add(5 * time.Second))
	last := t0.Add(5 * time.Second)
	// 10 s later the feed stalls; passes and sweeps during the gap hold.
	s.paused = true
	for d := 15 * time.Second; d <= 18*time.Second; d += time.Second {
		if r := s.at(t0.Add(d)); r.Changed {
			t.Fatalf("marked while paused at %s", d)
		}
	}
	// The feed resumes; the tracker counted the gap.
	s.paused, s.blind = false, gap
	if r := s.at(t0.Add(19 * time.Second)); r.Changed {
		t.Fatal("marked right after the gap")
	}
	if r := s.at(last.Add(cfg.GracePeriod + gap)); r.Changed {
		t.Fatal("marked before probe + grace + gap")
	}
	if r := s.at(last.Add(cfg.GracePeriod + gap + time.Millisecond)); !r.Changed {
		t.Fatal("not marked just after probe + grace + gap: the gap was not its length")
	}
}

// A node its collector refused and told to stay away is judged from the
// end of that wait: a WAITING at t0+5s with a 30 s wait moves its deadline
// from t0+5s+grace to t0+35s+grace. Once it is heard attached again the
// tracker clears the wait, and its deadline is its probe's again.
func TestCollectorImposedWaitDelaysTheDeadline(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0), feed: 1, feedAt: t0}
	s.at(t0)
	heard := t0.Add(5 * time.Second)
	s.feed, s.feedAt, s.quiet = 2, heard, heard.Add(30*time.Second) // WAITING with retry_within 30 s
	s.at(heard)
	if got, want := s.rec.Deadline(cfg.GracePeriod), heard.Add(30*time.Second+cfg.GracePeriod); !got.Equal(want) {
		t.Fatalf("deadline = %s, want %s", got, want)
	}
	if r := s.at(heard.Add(cfg.GracePeriod + time.Millisecond)); r.Changed {
		t.Fatal("marked past probe + grace although told to stay away 30 s")
	}
	if r := s.at(heard.Add(30*time.Second + cfg.GracePeriod)); r.Changed {
		t.Fatal("marked exactly at the end of the wait + grace")
	}
	if r := s.at(heard.Add(30*time.Second + cfg.GracePeriod + time.Millisecond)); !r.Changed || ready(r) != nodemodel.Unknown {
		t.Fatalf("not marked past the end of the wait + grace: ready=%s", ready(r))
	}

	// Attached 10 s into the wait: the wait no longer counts.
	s = &sim{cfg: cfg, st: reported(nodemodel.True, t0), feed: 1, feedAt: t0}
	s.at(t0)
	s.feed, s.feedAt, s.quiet = 2, heard, heard.Add(30*time.Second)
	s.at(heard)
	back := heard.Add(10 * time.Second)
	s.feed, s.feedAt, s.quiet = 3, back, time.Time{}
	s.at(back)
	if r := s.at(back.Add(cfg.GracePeriod + time.Millisecond)); !r.Changed {
		t.Fatal("a node heard attached after its wait was not judged from that renewal")
	}
}

// Past its deadline while paused, a node is marked as soon as the feed is
// back without any gap to give back (the pause was the tail of a gap that
// is already counted, or another reason).
func TestPausedPastDeadlineMarkedWhenResumed(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	s.paused = true
	if r := s.at(t0.Add(cfg.GracePeriod + time.Second)); r.Changed {
		t.Fatal("marked while paused")
	}
	s.paused = false
	if r := s.at(t0.Add(cfg.GracePeriod + 2*time.Second)); !r.Changed {
		t.Fatal("not marked once resumed")
	}
}

func TestStatusHeartbeatAdvancesProbe(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	s.st = reported(nodemodel.True, t0.Add(30*time.Second))
	s.at(t0.Add(30 * time.Second))
	if r := s.at(t0.Add(30*time.Second + cfg.GracePeriod)); r.Changed {
		t.Fatal("status heartbeat did not advance the probe")
	}
}

func TestReadyFalseIsNotOverridden(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.False, t0)}
	r := s.at(t0)
	if ready(r) != nodemodel.False || r.Changed {
		t.Fatalf("%+v", r)
	}
	r = s.at(t0.Add(cfg.GracePeriod + time.Second))
	if ready(r) != nodemodel.Unknown || r.Observed.GetStatus() != nodemodel.False {
		t.Fatalf("False node past grace: observed %s current %s", r.Observed.GetStatus(), ready(r))
	}
}

// TestFeedRenewalDatedOnArrival: a live renewal counts from when the monitor
// received it, not from the later pass that notices it, so a node that dies
// right after renewing turns Unknown one grace period after that renewal.
func TestFeedRenewalDatedOnArrival(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	arrived := t0.Add(11 * time.Second)
	s.feed, s.feedAt = 1, arrived
	pass := arrived.Add(4 * time.Second) // the next pass notices it 4s later
	if r := s.at(pass); ready(r) != nodemodel.True {
		t.Fatalf("Ready = %s after a renewal", ready(r))
	}
	if !s.rec.Probe.Equal(arrived) {
		t.Fatalf("probe = %s, want the arrival time %s", s.rec.Probe.Sub(t0), arrived.Sub(t0))
	}
	if r := s.at(arrived.Add(cfg.GracePeriod)); ready(r) != nodemodel.True {
		t.Fatal("Unknown exactly at arrival+grace")
	}
	if r := s.at(arrived.Add(cfg.GracePeriod + time.Nanosecond)); ready(r) != nodemodel.Unknown {
		t.Fatal("still healthy past arrival+grace: the renewal was dated by the pass")
	}

	// An arrival time in the monitor's future (clock step) is clamped to now,
	// and the probe never moves backwards.
	s2 := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s2.at(t0)
	s2.feed, s2.feedAt = 1, t0.Add(time.Hour)
	s2.at(t0.Add(5 * time.Second))
	if !s2.rec.Probe.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("future arrival: probe = %s, want now", s2.rec.Probe.Sub(t0))
	}
	s2.feed, s2.feedAt = 2, t0.Add(time.Second)
	s2.at(t0.Add(6 * time.Second))
	if !s2.rec.Probe.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("probe moved backwards to %s", s2.rec.Probe.Sub(t0))
	}
}

// The controller hands the feed's renewTime over as the lease when it is at
// least as new as etcd's checkpoint, together with its arrival time: the
// renewal must be dated by its arrival on both paths, or the lease path
// (dated "now") would undo the feed's dating and detection would slip by up
// to one period again.
func TestLeaseFromFeedDatedOnArrival(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	arrived := t0.Add(11 * time.Second)
	s.lease, s.leaseAt = arrived, arrived // the reporter's renewTime (its own clock) and the arrival
	s.feed, s.feedAt = 1, arrived
	s.at(arrived.Add(4 * time.Second))
	if !s.rec.Probe.Equal(arrived) {
		t.Fatalf("probe = %s, want the arrival time %s", s.rec.Probe.Sub(t0), arrived.Sub(t0))
	}
	if r := s.at(arrived.Add(cfg.GracePeriod + time.Nanosecond)); ready(r) != nodemodel.Unknown {
		t.Fatal("still healthy past arrival+grace: the lease path dated the renewal by the pass")
	}

	// An etcd checkpoint without an arrival time is dated by the pass.
	s2 := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s2.at(t0)
	s2.lease = t0.Add(11 * time.Second)
	s2.at(t0.Add(15 * time.Second))
	if !s2.rec.Probe.Equal(t0.Add(15 * time.Second)) {
		t.Fatalf("etcd lease: probe = %s, want the pass time", s2.rec.Probe.Sub(t0))
	}
}

// TestStatusReportsAloneKeepNodeHealthy states upstream's rule (spec §6.2
// steps 2-3, §6.7): the probe moves on a Ready heartbeat change OR a lease
// renewTime change, so a node whose lease is stuck but whose status
// reports keep coming is not Unknown. Here the reports are unchanged, so
// status/ never moves: their heartbeats come from the feed
// (STATUS_REPORTED), each dated when it arrived.
func TestStatusReportsAloneKeepNodeHealthy(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0), lease: t0}
	s.at(t0)
	var last time.Time
	for i := 1; i <= 30; i++ {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		// Arrived 2 s before the pass that reads it.
		s.statusHB, s.statusAt = t0.Add(time.Duration(i)*10*time.Second), now.Add(-2*time.Second)
		last = s.statusAt
		if r := s.at(now); ready(r) != nodemodel.True {
			t.Fatalf("Unknown at %s although status reports kept arriving (lease stuck)", now.Sub(t0))
		}
		if !s.rec.Probe.Equal(s.statusAt) {
			t.Fatalf("probe %v, want the report's arrival %v", s.rec.Probe, s.statusAt)
		}
	}
	// The reports stop: Unknown strictly after the last one's arrival + grace.
	if r := s.at(last.Add(cfg.GracePeriod)); ready(r) != nodemodel.True {
		t.Fatal("Unknown at the last report + grace; must be strictly after")
	}
	if r := s.at(last.Add(cfg.GracePeriod + time.Millisecond)); ready(r) != nodemodel.Unknown {
		t.Fatal("not Unknown after status reports and lease both stopped")
	}
}

// TestUnknownOrderIsUpstreams: upstream's controller changes the
// conditions a node has in place and appends the missing ones in the order
// Ready, MemoryPressure, DiskPressure, PIDPressure (nodeConditionTypes in
// tryUpdateNodeHealth, spec §6.2 step 4). The served order after Unknown is
// the same here.
func TestUnknownOrderIsUpstreams(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name string
		st   *nodev1.NodeStatus
		want []string
	}{
		{"never reported", &nodev1.NodeStatus{}, []string{"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}},
		{"only NetworkUnavailable and Ready", &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
			cond(nodemodel.NetworkUnavailable, nodemodel.False, t0, t0), cond(nodemodel.Ready, nodemodel.True, t0, t0)}},
			[]string{"NetworkUnavailable", "Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}},
		{"pressure but no Ready", &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
			cond(nodemodel.PIDPressure, nodemodel.False, t0, t0), cond(nodemodel.MemoryPressure, nodemodel.False, t0, t0)}},
			[]string{"PIDPressure", "MemoryPressure", "Ready", "DiskPressure"}},
		{"everything, reporter order", reported(nodemodel.True, t0),
			[]string{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "NetworkUnavailable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sim{cfg: cfg, st: tc.st}
			r := s.at(t0) // a node without Ready is judged from its creation, an hour ago
			if !r.Marked {
				r = s.at(t0.Add(time.Hour))
			}
			if !r.Marked {
				t.Fatalf("not marked: %+v", r)
			}
			var got []string
			for _, c := range nodeWith(s.st, r.Overrides).GetStatus().GetConditions() {
				got = append(got, c.GetType())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("served order %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUnknownKeepsTheLatestReportedHeartbeat: upstream's Unknown leaves a
// condition's heartbeat as it was, the last status the kubelet posted.
// Unchanged reports are not in status/, so "as it was" is the latest
// report's heartbeat (served as such before the marking, spec §6.7), not
// the older stored one.
func TestUnknownKeepsTheLatestReportedHeartbeat(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	s.at(t0)
	last := t0.Add(5 * time.Minute)
	s.statusHB, s.statusAt = last, last
	s.at(last)
	r := s.at(last.Add(cfg.GracePeriod + time.Second))
	if !r.Marked {
		t.Fatalf("not marked: %+v", r)
	}
	n := nodeWith(s.st, r.Overrides)
	for _, typ := range nodemodel.ReporterConditions {
		if c := nodemodel.FindCondition(n.GetStatus().GetConditions(), typ); !c.GetLastHeartbeatTime().AsTime().Equal(last) {
			t.Errorf("%s Unknown with heartbeat %v, want the latest report's %v", typ, c.GetLastHeartbeatTime().AsTime(), last)
		}
	}
	if nu := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.NetworkUnavailable); !nu.GetLastHeartbeatTime().AsTime().Equal(t0) {
		t.Errorf("NetworkUnavailable heartbeat moved to %v", nu.GetLastHeartbeatTime().AsTime())
	}
}
