// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// JudgeInput is everything the judge reads about one node for one pass.
// The controller gathers it (cache, its own records, liveness) and the
// judge reads nothing else: no cache, store, lock or clock.
type JudgeInput struct {
	Name string
	// Meta is the stored node (labels, spec: user taints, unschedulable),
	// Status the reporter's stored status, Health the stored health record
	// (nil: none), and Node the node as served from the three.
	Meta   *nodev1.Node
	Status *nodev1.NodeStatus
	Health *nodev1.NodeHealth
	Node   *nodev1.Node
	// Heartbeat is what was heard of the node (liveness.Merge).
	Heartbeat liveness.Heartbeat
	// Record is the node's record as the last judgement left it (zero
	// when it was never judged in this leadership).
	Record Record
	// New: first sight of the node in this leadership (spec §6.5, new
	// nodes), not one that existed at the takeover.
	New bool
	// PodRetry: marking the node's pods not ready failed earlier (§6.3).
	PodRetry bool
}

// Health is what a node's stored health record says: the only part of it
// the judge decides (who wrote it, and when, is the writer's business).
type Health struct {
	Overrides    []*nodev1.NodeCondition
	Taints       []*nodev1.Taint
	RecoveryTime *timestamppb.Timestamp
}

// HealthOf is what a stored record says (nil says nothing).
func HealthOf(h *nodev1.NodeHealth) Health {
	return Health{Overrides: h.GetConditionOverrides(), Taints: h.GetTaints(), RecoveryTime: h.GetRecoveryTime()}
}

// Empty: a record that says nothing, the same as no record.
func (h Health) Empty() bool {
	return len(h.Overrides) == 0 && len(h.Taints) == 0 && h.RecoveryTime == nil
}

// Equal compares what h and the stored record say, field by field (it runs
// for every node on every pass); no record equals an empty one.
func (h Health) Equal(stored *nodev1.NodeHealth) bool {
	if stored == nil {
		return h.Empty()
	}
	return slices.EqualFunc(h.Overrides, stored.GetConditionOverrides(), equalMsg[*nodev1.NodeCondition]) &&
		slices.EqualFunc(h.Taints, stored.GetTaints(), equalMsg[*nodev1.Taint]) &&
		proto.Equal(h.RecoveryTime, stored.GetRecoveryTime())
}

func equalMsg[M proto.Message](x, y M) bool { return proto.Equal(x, y) }

// QueueAction is what the node's zone taint queue must do (spec §6.5).
type QueueAction int

// Queue actions.
const (
	// QueueKeep: leave the queue as it is.
	QueueKeep QueueAction = iota
	// QueueAdd: enqueue the node (a no-op while the queue remembers it).
	QueueAdd
	// QueueForgetAndAdd: forget the node first, then enqueue it: its
	// expected NoExecute taint is missing, so it is applied again.
	QueueForgetAndAdd
	// QueueRemove: drop the node (Ready again).
	QueueRemove
)

// PodAction is what happens to the node's pods after the pass (§6.3).
type PodAction int

// Pod actions.
const (
	// PodsKeep: nothing (the node has no Ready condition at all).
	PodsKeep PodAction = iota
	// PodsMark: mark every pod on the node not ready.
	PodsMark
	// PodsForget: the node needs no marking; forget an earlier failure.
	PodsForget
)

// Event is an event about the node to record (spec §6.3, §6.5).
type Event struct{ Type, Reason, Message string }

// Decision is the judgement of one node for one pass: what to remember,
// write, queue and tell.
type Decision struct {
	// Record replaces the node's record.
	Record Record
	// Result of the grace-period rule (spec §6.2): the grace applied,
	// Ready as read (Observed) and after this pass (Current), whether the
	// node was marked Unknown or recovered.
	Result Result
	// Health is what the node's health record must say after this pass;
	// Write: it differs from the stored record.
	Health Health
	Write  bool
	// LeaseAdvanced: a lease renewal newer than the last one seen arrived.
	LeaseAdvanced bool
	Queue         QueueAction
	Pods          PodAction
	// Events to record, in order.
	Events []Event
}

// Judge applies spec §6.2-§6.5 to one node at now: the grace-period rule
// (Evaluate), the NoSchedule condition taints, the NoExecute taint decision
// and the pod marking, in that order. It is pure: the controller gathers
// the input and applies the decision. (in is a pointer only because the
// pass judges every node every few seconds; Judge never modifies it.)
func Judge(cfg Config, now time.Time, in *JudgeInput) Decision {
	d := Decision{Record: in.Record, Health: HealthOf(in.Health)}
	node := in.Node
	if in.New {
		d.Events = append(d.Events, Event{"Normal", "RegisteredNode", fmt.Sprintf("Registered Node %s in Controller", in.Name)})
		// Leftover NoExecute taints of a re-registered node go
		// (upstream markNodeAsReachable), before anything reads the node.
		if taints, changed := SwapTaints(now, d.Health.Taints, nil, noExecuteTaints); changed {
			d.Health.Taints = taints
			node = nodemodel.Merge(in.Meta, in.Status, &nodev1.NodeHealth{NodeName: in.Name,
				ConditionOverrides: d.Health.Overrides, Taints: taints, RecoveryTime: d.Health.RecoveryTime})
		}
	}

	before := d.Record.LeaseRenew
	res := Evaluate(cfg, now, &d.Record, &Input{Node: node, Reported: in.Status, Overrides: d.Health.Overrides, Heartbeat: in.Heartbeat})
	d.Result = res
	d.LeaseAdvanced = d.Record.LeaseRenew.After(before) && !before.IsZero()
	if res.Changed {
		d.Health.Overrides = res.Overrides
		if res.Recovered {
			d.Health.RecoveryTime = nodemodel.Timestamp(now)
		}
	}

	// NoSchedule condition taints follow the conditions after this pass.
	// (Only types and statuses matter here: no need to build the served
	// node, which cost a third of a pass's CPU at 100,000 nodes.)
	effective := nodemodel.EffectiveConditions(in.Status, &nodev1.NodeHealth{ConditionOverrides: d.Health.Overrides})
	desired := DesiredNoScheduleTaints(effective, in.Meta.GetSpec().GetUnschedulable())
	d.Health.Taints, _ = ReconcileNoSchedule(d.Health.Taints, in.Meta.GetSpec().GetTaints(), desired)

	// NoExecute taints follow the Ready condition as read (spec §6.5), so
	// the taint trails the Unknown flip by one pass, as upstream.
	if current := res.Current; current != nil {
		observed := res.Observed.GetStatus()
		action, forget := DecideNoExecute(observed, node.GetSpec().GetTaints())
		switch action {
		case SwapToNotReady:
			d.Health.Taints, _ = SwapTaints(now, d.Health.Taints, []*nodev1.Taint{NotReadyNoExecute}, []*nodev1.Taint{UnreachableNoExecute})
		case SwapToUnreachable:
			d.Health.Taints, _ = SwapTaints(now, d.Health.Taints, []*nodev1.Taint{UnreachableNoExecute}, []*nodev1.Taint{NotReadyNoExecute})
		case Enqueue:
			d.Queue = QueueAdd
			if forget {
				d.Queue = QueueForgetAndAdd
			}
		case MarkReachable:
			d.Health.Taints, _ = SwapTaints(now, d.Health.Taints, nil, noExecuteTaints)
			d.Queue = QueueRemove
		}
		cur := current.GetStatus()
		flip := observed == nodemodel.True && cur != nodemodel.True
		if flip {
			d.Events = append(d.Events, Event{"Normal", "NodeNotReady", fmt.Sprintf("Node %s status is now: NodeNotReady", in.Name)})
		}
		d.Pods = PodsForget
		if flip || in.PodRetry && cur != nodemodel.True {
			d.Pods = PodsMark
		}
	}
	if ev, ok := skewEvent(cfg.ClockSkewWarning, in.Name, &d.Record, in.Heartbeat); ok {
		d.Events = append(d.Events, ev)
	}
	d.Write = !d.Health.Equal(in.Health)
	return d
}

// Event reasons of the clock skew warning (nodepulse's own; upstream never
// measures node clocks).
const (
	ReasonNodeClockSkew         = "NodeClockSkew"
	ReasonNodeClockSkewResolved = "NodeClockSkewResolved"
)

// skewEvent decides the clock skew events: a warning when the node's
// measured skew first exceeds warn, a Normal event when it is back within
// half of it (the gap keeps a skew hovering at the threshold from
// repeating both). rec.SkewWarned remembers which was last said.
func skewEvent(warn time.Duration, name string, rec *Record, hb liveness.Heartbeat) (Event, bool) {
	if warn <= 0 || hb.ClockSkewAt.IsZero() {
		return Event{}, false
	}
	abs := hb.ClockSkew.Abs()
	switch {
	case !rec.SkewWarned && abs > warn:
		rec.SkewWarned = true
		return Event{"Warning", ReasonNodeClockSkew, fmt.Sprintf("Node %s clock is %s %s its collector's (at its latest status report). "+
			"Liveness is judged by the control plane's clocks, so the node stays as healthy as it reports; fix its time sync (NTP).",
			name, abs.Round(time.Second), SkewSide(hb.ClockSkew))}, true
	case rec.SkewWarned && abs <= warn/2:
		rec.SkewWarned = false
		return Event{"Normal", ReasonNodeClockSkewResolved, fmt.Sprintf("Node %s clock is back within %s of its collector's (%s %s).",
			name, (warn / 2).Round(time.Second), abs.Round(time.Millisecond), SkewSide(hb.ClockSkew))}, true
	}
	return Event{}, false
}

// SkewSide words the sign of a node's clock skew: "ahead of" or "behind"
// (its collector's), for events and explanations alike.
func SkewSide(d time.Duration) string {
	if d < 0 {
		return "behind"
	}
	return "ahead of"
}

// noExecuteTaints are both NoExecute taints the controller manages.
var noExecuteTaints = []*nodev1.Taint{NotReadyNoExecute, UnreachableNoExecute}
