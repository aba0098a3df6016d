// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodemodel

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// ReportedHeartbeat is the latest heartbeat among the reporter's own
// conditions; NetworkUnavailable is not the reporter's.
func TestReportedHeartbeat(t *testing.T) {
	st := baseStatus()
	st.Conditions[0].LastHeartbeatTime = Timestamp(t0.Add(time.Second))
	st.Conditions = append(st.Conditions, cond(NetworkUnavailable, False, t0.Add(time.Hour), t0))
	if got := ReportedHeartbeat(st); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("ReportedHeartbeat %v, want %v", got, t0.Add(time.Second))
	}
	if got := ReportedHeartbeat(&nodev1.NodeStatus{}); !got.IsZero() {
		t.Fatalf("no conditions: %v", got)
	}
}

// WithHeartbeat serves max(stored, reported) as the lastHeartbeatTime of
// the reporter's conditions (spec §6.7), but never over an override the
// monitor wrote (its Unknown keeps its own times), never on
// NetworkUnavailable, never backwards, and never modifies the node it was
// given (the watch cache's, shared).
func TestWithHeartbeat(t *testing.T) {
	st := baseStatus()
	st.Conditions = append(st.Conditions, cond(NetworkUnavailable, False, t0, t0), cond(DiskPressure, False, t0, t0))
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1"}}
	unknown := cond(DiskPressure, Unknown, t0, t0.Add(time.Minute))
	health := &nodev1.NodeHealth{ConditionOverrides: []*nodev1.NodeCondition{unknown}}
	n := MergeShared(meta, st, health)
	before := proto.CloneOf(n)
	later := t0.Add(5 * time.Minute)

	got := WithHeartbeat(n, health, later)
	if !proto.Equal(n, before) {
		t.Fatal("WithHeartbeat modified the node it was given")
	}
	want := map[string]time.Time{MemoryPressure: later, Ready: later, NetworkUnavailable: t0, DiskPressure: t0}
	if len(got.GetStatus().GetConditions()) != len(n.GetStatus().GetConditions()) {
		t.Fatalf("conditions %v", got.GetStatus().GetConditions())
	}
	for i, c := range got.GetStatus().GetConditions() {
		if c.GetType() != n.GetStatus().GetConditions()[i].GetType() {
			t.Fatalf("order changed: %v", got.GetStatus().GetConditions())
		}
		if hb := c.GetLastHeartbeatTime().AsTime(); !hb.Equal(want[c.GetType()]) {
			t.Errorf("%s heartbeat %v, want %v", c.GetType(), hb, want[c.GetType()])
		}
	}
	if c := FindCondition(got.GetStatus().GetConditions(), DiskPressure); c.GetStatus() != Unknown {
		t.Errorf("the override is gone: %v", c)
	}
	// Everything else is the node as it was.
	cp := proto.CloneOf(got)
	for _, c := range cp.GetStatus().GetConditions() {
		c.LastHeartbeatTime = FindCondition(before.GetStatus().GetConditions(), c.GetType()).GetLastHeartbeatTime()
	}
	if !proto.Equal(cp, before) {
		t.Errorf("more than heartbeats changed:\n%v\n%v", cp, before)
	}

	// Nothing newer: the node itself.
	if WithHeartbeat(n, health, t0) != n || WithHeartbeat(n, health, t0.Add(-time.Hour)) != n || WithHeartbeat(n, health, time.Time{}) != n {
		t.Error("a heartbeat that moves nothing copied the node")
	}
}
