// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodemodel

import (
	"slices"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// ReportedHeartbeat is the heartbeat of a status report: the latest
// lastHeartbeatTime of its reporter-owned conditions (the reporter stamps
// them all with the time of the report, spec §5.3, §5.4). Zero when none
// has one.
func ReportedHeartbeat(st *nodev1.NodeStatus) time.Time {
	var hb time.Time
	for _, c := range st.GetConditions() {
		if c.GetLastHeartbeatTime() == nil || !slices.Contains(ReporterConditions, c.GetType()) {
			continue
		}
		if t := c.GetLastHeartbeatTime().AsTime(); t.After(hb) {
			hb = t
		}
	}
	return hb
}

// WithHeartbeat returns the served node n with every reporter-owned
// condition's lastHeartbeatTime raised to reported, the heartbeat of the
// reporter's latest status report (spec §6.7). Unchanged reports are not
// written to status/ (docs/adr/0001-heartbeats-in-collector-memory.md), so
// the stored heartbeat is the time of the last change; the report itself
// reaches the monitor on the collector's feed and in the lease checkpoint.
//
// A condition the monitor overrides in health (its Unknown, spec §6.2 step
// 4) keeps its own times: upstream's controller leaves an Unknown's
// heartbeat as it found it, and a report after the marking lifts the
// override rather than refreshing it. NetworkUnavailable is not the
// reporter's and is left alone.
//
// n may be shared (MergeShared, the watch cache): it is never modified.
// When nothing moves, n itself is returned; otherwise a node that shares
// everything with n but its Status message, its conditions slice and the
// conditions it changes.
func WithHeartbeat(n *nodev1.Node, health *nodev1.NodeHealth, reported time.Time) *nodev1.Node {
	if reported.IsZero() {
		return n
	}
	conds := n.GetStatus().GetConditions()
	raise := func(c *nodev1.NodeCondition) bool {
		return slices.Contains(ReporterConditions, c.GetType()) &&
			FindCondition(health.GetConditionOverrides(), c.GetType()) == nil &&
			(c.GetLastHeartbeatTime() == nil || reported.After(c.GetLastHeartbeatTime().AsTime()))
	}
	if !slices.ContainsFunc(conds, raise) {
		return n
	}
	out := &nodev1.Node{Metadata: n.GetMetadata(), Spec: n.GetSpec()}
	out.Status = shallowCopy(n.GetStatus()).(*nodev1.NodeStatus)
	out.Status.Conditions = make([]*nodev1.NodeCondition, len(conds))
	hb := Timestamp(reported)
	for i, c := range conds {
		if raise(c) {
			c = shallowCopy(c).(*nodev1.NodeCondition)
			c.LastHeartbeatTime = hb
		}
		out.Status.Conditions[i] = c
	}
	return out
}
