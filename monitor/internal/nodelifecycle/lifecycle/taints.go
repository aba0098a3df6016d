// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Taint templates of the controller (spec §6.4, §6.5).
var (
	// NotReadyNoExecute is added when Ready is False.
	NotReadyNoExecute = &nodev1.Taint{Key: nodemodel.TaintNotReady, Effect: nodemodel.NoExecute}
	// UnreachableNoExecute is added when Ready is Unknown.
	UnreachableNoExecute = &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}
)

// conditionTaintKey returns the NoSchedule taint key that condition type t
// with status st implies, if any (upstream nodeConditionToTaintKeyStatusMap).
// A switch rather than a map of maps: a health pass asks it of every
// condition of every node, and two string-keyed lookups per condition were
// a tenth of a pass's CPU at 100,000 nodes.
func conditionTaintKey(t, st string) (string, bool) {
	switch t {
	case nodemodel.Ready:
		switch st {
		case nodemodel.False:
			return nodemodel.TaintNotReady, true
		case nodemodel.Unknown:
			return nodemodel.TaintUnreachable, true
		}
	case nodemodel.MemoryPressure:
		return nodemodel.TaintMemoryPressure, st == nodemodel.True
	case nodemodel.DiskPressure:
		return nodemodel.TaintDiskPressure, st == nodemodel.True
	case nodemodel.PIDPressure:
		return nodemodel.TaintPIDPressure, st == nodemodel.True
	case nodemodel.NetworkUnavailable:
		return nodemodel.TaintNetworkUnavailable, st == nodemodel.True
	}
	return "", false
}

// noScheduleKeys are the NoSchedule taint keys the controller manages; no
// other taint is ever added or removed by it.
var noScheduleKeys = []string{
	nodemodel.TaintNotReady, nodemodel.TaintUnreachable, nodemodel.TaintMemoryPressure,
	nodemodel.TaintDiskPressure, nodemodel.TaintPIDPressure, nodemodel.TaintNetworkUnavailable,
	nodemodel.TaintUnschedulable,
}

// IsControllerManaged reports whether a taint with this key and effect is
// owned by the lifecycle controller: the NoSchedule condition taints and the
// not-ready/unreachable NoExecute taints. Operators may not set these.
func IsControllerManaged(key, effect string) bool {
	switch effect {
	case nodemodel.NoSchedule:
		return slices.Contains(noScheduleKeys, key)
	case nodemodel.NoExecute:
		return key == nodemodel.TaintNotReady || key == nodemodel.TaintUnreachable
	}
	return false
}

// DesiredNoScheduleTaints computes the condition taints of spec §6.4 from the
// conditions after this pass and spec.unschedulable, sorted by key. A node
// that has no Ready condition yet gets nothing stored: nodemodel.Merge serves
// it with not-ready:NoSchedule (the TaintNodesByCondition equivalent), so a
// joining node costs no health write and no delete.
func DesiredNoScheduleTaints(conds []*nodev1.NodeCondition, unschedulable bool) []*nodev1.Taint {
	// A healthy node (the common case in every pass) allocates nothing.
	var buf [8]string
	keys := buf[:0]
	for _, c := range conds {
		if k, ok := conditionTaintKey(c.GetType(), c.GetStatus()); ok {
			keys = append(keys, k)
		}
	}
	if unschedulable {
		keys = append(keys, nodemodel.TaintUnschedulable)
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	out := make([]*nodev1.Taint, len(keys))
	for i, k := range keys {
		out[i] = &nodev1.Taint{Key: k, Effect: nodemodel.NoSchedule}
	}
	return out
}

// ReconcileNoSchedule returns the controller taints with the managed
// NoSchedule subset replaced by desired in one swap (other controller taints
// keep their place), and whether anything changed. Taints the user already
// set with the same key and effect are not duplicated.
func ReconcileNoSchedule(controller, user, desired []*nodev1.Taint) ([]*nodev1.Taint, bool) {
	var want []*nodev1.Taint
	for _, d := range desired {
		if !nodemodel.HasTaint(user, d.GetKey(), d.GetEffect()) {
			want = append(want, d)
		}
	}
	var out []*nodev1.Taint
	changed := false
	for _, t := range controller {
		managed := t.GetEffect() == nodemodel.NoSchedule && slices.Contains(noScheduleKeys, t.GetKey())
		if managed && !nodemodel.HasTaint(want, t.GetKey(), t.GetEffect()) {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, w := range want {
		if !nodemodel.HasTaint(out, w.GetKey(), w.GetEffect()) {
			out = append(out, w)
			changed = true
		}
	}
	return out, changed
}

// SwapTaints removes every taint matching (key, effect) of remove and adds
// add (with TimeAdded = now for NoExecute) unless already present. It
// reports whether the set changed.
func SwapTaints(now time.Time, taints []*nodev1.Taint, add []*nodev1.Taint, remove []*nodev1.Taint) ([]*nodev1.Taint, bool) {
	var out []*nodev1.Taint
	changed := false
	for _, t := range taints {
		if nodemodel.HasTaint(remove, t.GetKey(), t.GetEffect()) {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, a := range add {
		if nodemodel.HasTaint(out, a.GetKey(), a.GetEffect()) {
			continue
		}
		t := proto.CloneOf(a)
		if t.GetEffect() == nodemodel.NoExecute {
			t.TimeAdded = nodemodel.Timestamp(now)
		}
		out = append(out, t)
		changed = true
	}
	return out, changed
}

// NoExecuteAction is what the health pass does with a node's NoExecute taints
// (spec §6.5), decided from the Ready condition as read.
type NoExecuteAction int

// NoExecute actions.
const (
	// NoExecuteNone: nothing to do (should not happen for a valid status).
	NoExecuteNone NoExecuteAction = iota
	// SwapToNotReady: replace unreachable:NoExecute by not-ready:NoExecute now.
	SwapToNotReady
	// SwapToUnreachable: replace not-ready:NoExecute by unreachable:NoExecute now.
	SwapToUnreachable
	// Enqueue the node in its zone's rate-limited queue.
	Enqueue
	// MarkReachable: remove both NoExecute taints and drop the node from its
	// zone's queue.
	MarkReachable
)

// DecideNoExecute implements spec §6.5 from the observed Ready status and the
// taints as read. forget says the zone queue must first forget the node
// (its expected taint is missing), so a taint removed by hand is re-applied.
func DecideNoExecute(observed string, taints []*nodev1.Taint) (action NoExecuteAction, forget bool) {
	notReady := nodemodel.HasTaint(taints, nodemodel.TaintNotReady, nodemodel.NoExecute)
	unreachable := nodemodel.HasTaint(taints, nodemodel.TaintUnreachable, nodemodel.NoExecute)
	switch observed {
	case nodemodel.False:
		if unreachable {
			return SwapToNotReady, false
		}
		return Enqueue, !notReady
	case nodemodel.Unknown:
		if notReady {
			return SwapToUnreachable, false
		}
		return Enqueue, !unreachable
	case nodemodel.True:
		return MarkReachable, false
	}
	return NoExecuteNone, false
}

// QueuedTaint is what processing a queued node does (spec §6.5, queue
// processing), given its Ready condition at processing time.
type QueuedTaint struct {
	Add, Remove *nodev1.Taint
	// Done: drop the node from the queue (Ready again, or nothing to do).
	Done bool
	// Retry after this wait (no Ready condition yet).
	Retry time.Duration
}

// ProcessQueued decides the taint change for a node taken off its zone queue.
func ProcessQueued(ready *nodev1.NodeCondition) QueuedTaint {
	if ready == nil {
		return QueuedTaint{Retry: 50 * time.Millisecond}
	}
	switch ready.GetStatus() {
	case nodemodel.False:
		return QueuedTaint{Add: NotReadyNoExecute, Remove: UnreachableNoExecute}
	case nodemodel.Unknown:
		return QueuedTaint{Add: UnreachableNoExecute, Remove: NotReadyNoExecute}
	}
	// Ready again while queued: ignore the taint request.
	return QueuedTaint{Done: true}
}
