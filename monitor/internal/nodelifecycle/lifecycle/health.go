// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Record is the controller's in-memory health record of one node (spec §6.2,
// the upstream nodeHealthData). All times are the monitor's clock. Records
// are never persisted: a new leader starts with empty records, which gives
// every node a fresh grace period.
type Record struct {
	// Probe is when the controller last saw the node alive (or granted it a
	// fresh grace period); the node is judged against Probe + grace, or
	// QuietUntil + grace when that is later (Deadline).
	Probe time.Time
	// QuietUntil is Heartbeat.QuietUntil as last applied.
	QuietUntil time.Time
	// ReadyTransition is when the controller saw the Ready condition's
	// transition time change.
	ReadyTransition time.Time
	// HasReady: the served node had a Ready condition at the last pass.
	HasReady bool
	// ReadyHeartbeat and ReadyTransitionSeen are the served Ready condition's
	// timestamps at the last pass (compared, never interpreted).
	ReadyHeartbeat      time.Time
	ReadyTransitionSeen time.Time
	// ReportedHeartbeat is the reporter's own status heartbeat at the last
	// pass (Heartbeat.StatusHeartbeat: stored, or a later report's from the
	// feed or the checkpoint). Health overrides hide it from the served
	// node, and unchanged reports never reach status/, so it is tracked
	// separately: a change proves the reporter is alive (spec §6.7).
	ReportedHeartbeat time.Time
	// LeaseRenew is the newest leases/ renewTime seen in etcd (reporter clock;
	// only compared with itself).
	LeaseRenew time.Time
	// FeedRenewals is the live renewal counter seen on the collectors' feeds.
	FeedRenewals uint64
	// GraceEpoch is the last fresh-grace epoch applied.
	GraceEpoch uint64
	// FeedBlind is Heartbeat.Blind as last applied.
	FeedBlind time.Duration
	// Heard is when liveness evidence last arrived (lease advanced, feed
	// renewal, status heartbeat); fresh grace periods do not set it.
	Heard time.Time
	// MarkedAt is when this controller last saw the node's conditions
	// overridden to Unknown (by itself, or by a previous leader when the
	// record was created). Overrides are lifted only on evidence heard after
	// it, so a failover can never make a dead node look alive.
	MarkedAt time.Time
	// SkewWarned: a NodeClockSkew warning was recorded for the node in
	// this leadership and its clock has not come back in step since.
	SkewWarned bool

	initialized bool
}

// clampTo brings the record's monitor-clock times that lie after now back to
// now (see Evaluate). QuietUntil is left alone: a wait a collector imposed
// may rightly end in the future.
func (r *Record) clampTo(now time.Time) {
	for _, t := range []*time.Time{&r.Probe, &r.ReadyTransition, &r.Heard, &r.MarkedAt} {
		if t.After(now) {
			*t = now
		}
	}
}

// Input is what the controller observed about a node for one pass.
type Input struct {
	// Node as served: stored node merged with its status and the current
	// health overrides (the "node as read" of the spec).
	Node *nodev1.Node
	// Reported is the reporter's stored status, without overrides.
	Reported *nodev1.NodeStatus
	// Overrides currently stored in the node's health record.
	Overrides []*nodev1.NodeCondition
	// Heartbeat is everything heard of the node's liveness (lease, feed,
	// status heartbeat), with the fresh grace periods it is owed and
	// whether it may be judged now.
	Heartbeat liveness.Heartbeat
}

// Result is the judgement of one pass.
type Result struct {
	// Grace applied (monitor or startup grace).
	Grace time.Duration
	// Observed is the Ready condition as read; a synthetic Unknown one with
	// the node's creation time when the node has no Ready.
	Observed *nodev1.NodeCondition
	// Current is the Ready condition after this pass (nil when missing and
	// not marked).
	Current *nodev1.NodeCondition
	// Overrides to store; equal to Input.Overrides unless Changed.
	Overrides []*nodev1.NodeCondition
	// Changed: Overrides differ from Input.Overrides.
	Changed bool
	// Recovered: overrides were lifted because the node was heard again.
	Recovered bool
	// Marked: the node was found past its grace period and marked Unknown.
	Marked bool
}

func ts(t interface{ AsTime() time.Time }) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// Evaluate applies spec §6.2 to one node at now, updating rec in place.
// Order matters and mirrors upstream: the record is refreshed from the Ready
// condition first, then heartbeats (lease, feed, status) advance the probe,
// fresh-grace grants are applied, overrides are lifted on new evidence, and
// only then is the probe compared with the grace period.
func Evaluate(cfg Config, now time.Time, rec *Record, in *Input) Result {
	node, hb := in.Node, &in.Heartbeat
	ready := nodemodel.FindCondition(node.GetStatus().GetConditions(), nodemodel.Ready)
	res := Result{Grace: cfg.GracePeriod, Current: ready, Overrides: in.Overrides}
	// Every time in the record is the monitor's own reading, never later
	// than now, unless the monitor's clock went back since (an NTP step
	// on a clock without monotonic readings, as an injected one is).
	// Brought back to now, or a node's deadline would move out by the
	// step, and an override set before it would stay until the clock
	// caught up (evidence must arrive after MarkedAt to lift it).
	// Forward steps need nothing here: every feed looks stale at once,
	// which holds every node, and the gap is given back (FeedBlind).
	rec.clampTo(now)

	// Step 1-2: the record follows the served Ready condition.
	if ready == nil {
		res.Grace = cfg.StartupGracePeriod
		res.Observed = &nodev1.NodeCondition{
			Type: nodemodel.Ready, Status: nodemodel.Unknown,
			LastHeartbeatTime: node.GetMetadata().GetCreationTimestamp(), LastTransitionTime: node.GetMetadata().GetCreationTimestamp(),
		}
		if !rec.initialized {
			// Upstream seeds a never-reporting node's probe with its creation
			// time; a node that predates this leadership gets the takeover time.
			seed := ts(node.GetMetadata().GetCreationTimestamp())
			if seed.IsZero() || seed.Before(hb.FreshSince) {
				seed = hb.FreshSince
			}
			*rec = Record{Probe: seed, ReadyTransition: seed, MarkedAt: now}
		}
		// Ready vanished from a node that had it: the probe is kept, only the
		// grace switches to the startup grace (see spec §6.2 step 2).
		rec.HasReady = false
	} else {
		res.Observed = ready
		hb, tr := ts(ready.GetLastHeartbeatTime()), ts(ready.GetLastTransitionTime())
		switch {
		case !rec.initialized || !rec.HasReady:
			keep := *rec
			*rec = Record{Probe: now, ReadyTransition: now, LeaseRenew: keep.LeaseRenew, FeedRenewals: keep.FeedRenewals,
				ReportedHeartbeat: keep.ReportedHeartbeat, GraceEpoch: keep.GraceEpoch, FeedBlind: keep.FeedBlind, Heard: keep.Heard, MarkedAt: keep.MarkedAt,
				SkewWarned: keep.SkewWarned}
			if !keep.initialized {
				rec.MarkedAt = now
			}
		case !hb.Equal(rec.ReadyHeartbeat):
			rec.Probe = now
			if !tr.Equal(rec.ReadyTransitionSeen) {
				rec.ReadyTransition = now
			}
		}
		rec.HasReady = true
		rec.ReadyHeartbeat, rec.ReadyTransitionSeen = hb, tr
	}
	first := !rec.initialized
	if first {
		// The first sight of lease, feed and status is a baseline, not
		// evidence: it says nothing about whether the node is alive now.
		rec.LeaseRenew, rec.FeedRenewals, rec.GraceEpoch, rec.FeedBlind = hb.LeaseRenew, hb.Renewals, hb.Epoch, hb.Blind
		rec.ReportedHeartbeat = hb.StatusHeartbeat
		rec.initialized = true
	}

	// Time the monitor was blind to the node's feed does not count against
	// the node: its clock stops for exactly that long (never past now).
	// Restarting the grace period instead, as this did until a pause was
	// measured at 100,000 nodes, let one feed batch arriving 3 s late while
	// 10 % of the fleet died push every dead node's deadline out by up to a
	// whole grace period (median 9.4 s past grace, 51 of 10,000 on time).
	if d := hb.Blind - rec.FeedBlind; d > 0 && !rec.Probe.IsZero() {
		rec.Probe = rec.Probe.Add(d)
		if rec.Probe.After(now) {
			rec.Probe = now
		}
	}
	rec.FeedBlind = hb.Blind
	// The tracker owns the wait (it ends it when the node is heard
	// attached); the record keeps it so the sweep can see the deadline.
	rec.QuietUntil = hb.QuietUntil

	// Step 3: heartbeats. Any of them proves the reporter alive now.
	heard := false
	heardAt := time.Time{}
	// Each piece of evidence is dated when it arrived if the monitor knows
	// (never later than now), else now; the newest date wins.
	hear := func(arrived time.Time) {
		at := now
		if !arrived.IsZero() && arrived.Before(now) {
			at = arrived
		}
		if !heard || at.After(heardAt) {
			heardAt = at
		}
		heard = true
	}
	if hb.LeaseRenew.After(rec.LeaseRenew) {
		rec.LeaseRenew = hb.LeaseRenew
		hear(hb.LeaseObservedAt)
	}
	// A status report is liveness as a renewal is, also while the lease
	// is stuck (upstream's probe moves on a Ready heartbeat change or a
	// lease renewTime change, spec §6.2 steps 2-3).
	if sh := hb.StatusHeartbeat; !sh.Equal(rec.ReportedHeartbeat) {
		rec.ReportedHeartbeat = sh
		if !sh.IsZero() {
			hear(hb.StatusObservedAt)
		}
	}
	if hb.Renewals > rec.FeedRenewals {
		rec.FeedRenewals = hb.Renewals
		hear(hb.ObservedAt)
	}
	if heard && heardAt.After(rec.Probe) {
		rec.Probe = heardAt
	}
	if heard {
		rec.Heard = now
	}
	// Fresh grace: resuming after a pause or losing the node's collector.
	if hb.Epoch != rec.GraceEpoch {
		rec.GraceEpoch = hb.Epoch
		rec.Probe = now
	}

	// Overrides are lifted only by evidence that arrived after they were set.
	if len(in.Overrides) > 0 && !rec.Heard.IsZero() && rec.Heard.After(rec.MarkedAt) {
		res.Overrides, res.Changed, res.Recovered = nil, true, true
		res.Current = nodemodel.FindCondition(in.Reported.GetConditions(), nodemodel.Ready)
		return res
	}

	// Step 4: strictly past the grace period → Unknown. Not while paused:
	// renewals may be on their way that the monitor cannot see yet. The
	// probe stays where it was; the gap is given back (FeedBlind) once the
	// feed resumes and its length is known. Nor before the wait a
	// collector imposed on the node has run out (QuietUntil).
	if hb.Held || !now.After(rec.Deadline(res.Grace)) {
		return res
	}
	// Upstream writes only when Ready itself changed, and a Ready that is
	// Unknown already stays as it is: skip building the overrides, which
	// every pass did again for every node already marked (10% of the fleet
	// after a mass failure).
	if ready.GetStatus() == nodemodel.Unknown {
		return res
	}
	overrides, current := markUnknown(now, node, in.Overrides, hb.Reported)
	if proto.Equal(current, ready) {
		return res
	}
	rec.MarkedAt = now
	res.Overrides, res.Current, res.Changed, res.Marked = overrides, current, true, true
	return res
}

// Deadline is when the node's grace period runs out: grace after the
// later of its probe and the end of a wait its collector imposed.
func (r *Record) Deadline(grace time.Duration) time.Time {
	if r.QuietUntil.After(r.Probe) {
		return r.QuietUntil.Add(grace)
	}
	return r.Probe.Add(grace)
}

// markUnknown returns the overrides after marking every reporter-owned
// condition Unknown (spec §6.2 step 4), and the resulting Ready.
// NetworkUnavailable is never touched: the network plugin owns it.
//
// Order: the overrides replace the node's conditions in place when served
// (nodemodel.Merge) and the missing ones are appended in the order listed
// here, nodemodel.UnknownOrder, upstream's (Ready first), so the served
// order after Unknown is Kubernetes' (spec §6.2).
//
// A present condition keeps its heartbeat, as upstream's does; "its"
// heartbeat is the one served before the marking, the reporter's latest
// report (reported, spec §6.7), not the older one status/ holds.
func markUnknown(now time.Time, node *nodev1.Node, existing []*nodev1.NodeCondition, reported time.Time) ([]*nodev1.NodeCondition, *nodev1.NodeCondition) {
	out := make([]*nodev1.NodeCondition, 0, len(nodemodel.UnknownOrder))
	for _, o := range existing {
		out = append(out, proto.CloneOf(o))
	}
	var ready *nodev1.NodeCondition
	for _, t := range nodemodel.UnknownOrder {
		c := nodemodel.FindCondition(node.GetStatus().GetConditions(), t)
		var next *nodev1.NodeCondition
		switch {
		case c == nil:
			next = &nodev1.NodeCondition{
				Type: t, Status: nodemodel.Unknown,
				Reason: nodemodel.ReasonNodeStatusNeverUpdated, Message: nodemodel.MessageNodeStatusNeverUpd,
				LastHeartbeatTime:  node.GetMetadata().GetCreationTimestamp(),
				LastTransitionTime: nodemodel.Timestamp(now),
			}
		case c.GetStatus() != nodemodel.Unknown:
			next = proto.CloneOf(c)
			if !reported.IsZero() && (c.GetLastHeartbeatTime() == nil || reported.After(c.GetLastHeartbeatTime().AsTime())) {
				next.LastHeartbeatTime = nodemodel.Timestamp(reported)
			}
			next.Status = nodemodel.Unknown
			next.Reason = nodemodel.ReasonNodeStatusUnknown
			next.Message = nodemodel.MessageNodeStatusUnknown
			next.LastTransitionTime = nodemodel.Timestamp(now)
		default:
			if t == nodemodel.Ready {
				ready = c
			}
			continue // already Unknown: untouched
		}
		if t == nodemodel.Ready {
			ready = next
		}
		if o := nodemodel.FindCondition(out, t); o != nil {
			proto.Reset(o)
			proto.Merge(o, next)
		} else {
			out = append(out, next)
		}
	}
	return out, ready
}
