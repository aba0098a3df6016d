// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodemodel

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func cond(typ, st string, hb, tr time.Time) *nodev1.NodeCondition {
	return &nodev1.NodeCondition{Type: typ, Status: st, Reason: "R" + st, Message: "m", LastHeartbeatTime: Timestamp(hb), LastTransitionTime: Timestamp(tr)}
}

func baseStatus() *nodev1.NodeStatus {
	return &nodev1.NodeStatus{
		Capacity:   map[string]string{"cpu": "4", "memory": "16Gi"},
		Conditions: []*nodev1.NodeCondition{cond(MemoryPressure, False, t0, t0), cond(Ready, True, t0, t0)},
		Addresses:  []*nodev1.NodeAddress{{Type: AddressInternalIP, Address: "10.0.0.1"}},
		NodeInfo:   &nodev1.NodeSystemInfo{BootId: "b1"},
	}
}

func TestStatusChanged(t *testing.T) {
	later := t0.Add(10 * time.Second)
	cases := []struct {
		name   string
		mutate func(s *nodev1.NodeStatus)
		want   bool
	}{
		{"identical", func(s *nodev1.NodeStatus) {}, false},
		{"only heartbeats advanced", func(s *nodev1.NodeStatus) {
			for _, c := range s.Conditions {
				c.LastHeartbeatTime = Timestamp(later)
			}
		}, false},
		{"conditions reordered", func(s *nodev1.NodeStatus) { s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0] }, false},
		{"quantity respelled", func(s *nodev1.NodeStatus) { s.Capacity["memory"] = "16384Mi" }, false},
		{"quantity changed", func(s *nodev1.NodeStatus) { s.Capacity["memory"] = "15Gi" }, true},
		{"condition flipped", func(s *nodev1.NodeStatus) { s.Conditions[1].Status = False }, true},
		{"transition moved", func(s *nodev1.NodeStatus) { s.Conditions[1].LastTransitionTime = Timestamp(later) }, true},
		{"condition added", func(s *nodev1.NodeStatus) { s.Conditions = append(s.Conditions, cond(DiskPressure, False, t0, t0)) }, true},
		{"address changed", func(s *nodev1.NodeStatus) { s.Addresses[0].Address = "10.0.0.2" }, true},
		{"reboot", func(s *nodev1.NodeStatus) { s.NodeInfo.BootId = "b2" }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := baseStatus(), baseStatus()
			c.mutate(b)
			if got := StatusChanged(a, b); got != c.want {
				t.Errorf("StatusChanged = %v, want %v", got, c.want)
			}
		})
	}
}

func TestMergeOverridesAndTaints(t *testing.T) {
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1"}, Spec: &nodev1.NodeSpec{Taints: []*nodev1.Taint{{Key: "user", Effect: NoSchedule}}}}
	st := baseStatus()
	h := &nodev1.NodeHealth{
		ConditionOverrides: []*nodev1.NodeCondition{
			{Type: Ready, Status: Unknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastTransitionTime: Timestamp(t0.Add(time.Minute))},
			{Type: PIDPressure, Status: Unknown, Reason: ReasonNodeStatusNeverUpdated},
		},
		Taints: []*nodev1.Taint{{Key: TaintUnreachable, Effect: NoSchedule}},
	}
	before := proto.CloneOf(st)
	n := Merge(meta, st, h)
	if !proto.Equal(st, before) {
		t.Fatal("Merge modified its input")
	}
	if got := ConditionStatus(n.Status.Conditions, Ready); got != Unknown {
		t.Errorf("Ready = %s, want Unknown", got)
	}
	if got := FindCondition(n.Status.Conditions, PIDPressure); got == nil || got.Status != Unknown {
		t.Errorf("PIDPressure override not appended: %v", got)
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Key != "user" || n.Spec.Taints[1].Key != TaintUnreachable {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
}

// A node without a Ready condition is served not-ready:NoSchedule, once,
// without anything stored for it; once it reports Ready the taint is gone.
func TestMergeNotReadyUntilReported(t *testing.T) {
	notReady := TaintKeyEffect{TaintNotReady, NoSchedule}
	count := func(n *nodev1.Node) int {
		c := 0
		for _, tn := range n.GetSpec().GetTaints() {
			if (TaintKeyEffect{tn.GetKey(), tn.GetEffect()}) == notReady {
				c++
			}
		}
		return c
	}
	user := &nodev1.Node{Spec: &nodev1.NodeSpec{Taints: []*nodev1.Taint{{Key: TaintNotReady, Effect: NoSchedule, Value: "mine"}}}}
	noReady := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{cond(MemoryPressure, False, t0, t0)}}
	neverUpdated := &nodev1.NodeHealth{ConditionOverrides: []*nodev1.NodeCondition{{Type: Ready, Status: Unknown, Reason: ReasonNodeStatusNeverUpdated}},
		Taints: []*nodev1.Taint{{Key: TaintUnreachable, Effect: NoSchedule}}}
	for _, c := range []struct {
		name   string
		meta   *nodev1.Node
		status *nodev1.NodeStatus
		health *nodev1.NodeHealth
		want   int
	}{
		{"registered, no status", &nodev1.Node{}, nil, nil, 1},
		{"status without Ready", nil, noReady, nil, 1},
		{"user taint of the same key and effect", user, nil, nil, 1},
		{"Ready reported", &nodev1.Node{}, baseStatus(), nil, 0},
		{"judged never updated: Ready Unknown, unreachable stored", &nodev1.Node{}, nil, neverUpdated, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := Merge(c.meta, c.status, c.health)
			if got := count(n); got != c.want {
				t.Errorf("%d not-ready:NoSchedule taints in %v, want %d", got, n.GetSpec().GetTaints(), c.want)
			}
			if c.meta == user && n.GetSpec().GetTaints()[0].GetValue() != "mine" {
				t.Errorf("the user's taint was replaced: %v", n.GetSpec().GetTaints())
			}
		})
	}
	if len(user.Spec.Taints) != 1 {
		t.Error("Merge modified its input")
	}
}

func TestMergeRecoveryTransition(t *testing.T) {
	rec := t0.Add(5 * time.Minute)
	n := Merge(&nodev1.Node{}, baseStatus(), &nodev1.NodeHealth{RecoveryTime: Timestamp(rec)})
	if got := FindCondition(n.Status.Conditions, Ready).LastTransitionTime.AsTime(); !got.Equal(rec) {
		t.Errorf("Ready transition = %v, want recovery time %v", got, rec)
	}
}

// EffectiveConditions must agree with Merge on every condition's type and
// status: the monitor derives condition taints from it instead of Merge.
func TestEffectiveConditionsAgreesWithMerge(t *testing.T) {
	overrides := []*nodev1.NodeCondition{
		{Type: Ready, Status: Unknown, Reason: ReasonNodeStatusUnknown},
		{Type: PIDPressure, Status: Unknown, Reason: ReasonNodeStatusNeverUpdated},
	}
	cases := []struct {
		name   string
		status *nodev1.NodeStatus
		health *nodev1.NodeHealth
	}{
		{"no health", baseStatus(), nil},
		{"no overrides", baseStatus(), &nodev1.NodeHealth{RecoveryTime: Timestamp(t0.Add(time.Minute))}},
		{"overrides", baseStatus(), &nodev1.NodeHealth{ConditionOverrides: overrides}},
		{"no status", nil, &nodev1.NodeHealth{ConditionOverrides: overrides}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before *nodev1.NodeStatus
			if c.status != nil {
				before = proto.CloneOf(c.status)
			}
			got := EffectiveConditions(c.status, c.health)
			want := Merge(&nodev1.Node{}, c.status, c.health).GetStatus().GetConditions()
			if len(got) != len(want) {
				t.Fatalf("%d conditions, Merge serves %d", len(got), len(want))
			}
			for i := range want {
				if got[i].GetType() != want[i].GetType() || got[i].GetStatus() != want[i].GetStatus() {
					t.Errorf("condition %d = %s=%s, Merge serves %s=%s", i, got[i].GetType(), got[i].GetStatus(), want[i].GetType(), want[i].GetStatus())
				}
			}
			if c.status != nil && !proto.Equal(c.status, before) {
				t.Error("EffectiveConditions modified its input")
			}
		})
	}
}

// MergeShared serves exactly what Merge serves, and neither it nor a caller
// setting the fields MergeShared allows (name, resource version) changes
// the parts it shares.
func TestMergeSharedServesMergeWithoutTouchingItsParts(t *testing.T) {
	meta := func() *nodev1.Node {
		return &nodev1.Node{
			Metadata: &nodev1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}, Annotations: map[string]string{"x": "y"}},
			Spec: &nodev1.NodeSpec{ProviderId: "test://n1",
				// Spare capacity: an append that reused it would write
				// into the stored spec's array.
				Taints: append(make([]*nodev1.Taint, 0, 4), &nodev1.Taint{Key: "user", Effect: NoSchedule})},
		}
	}
	overrides := &nodev1.NodeHealth{
		ConditionOverrides: []*nodev1.NodeCondition{
			{Type: Ready, Status: Unknown, Reason: ReasonNodeStatusUnknown, LastTransitionTime: Timestamp(t0.Add(time.Minute))},
			{Type: PIDPressure, Status: Unknown, Reason: ReasonNodeStatusNeverUpdated},
		},
		Taints: []*nodev1.Taint{{Key: TaintUnreachable, Effect: NoSchedule}, {Key: TaintUnreachable, Effect: NoExecute}},
	}
	recovered := &nodev1.NodeHealth{RecoveryTime: Timestamp(t0.Add(5 * time.Minute))}
	noReady := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{cond(MemoryPressure, False, t0, t0)}}
	for _, c := range []struct {
		name   string
		meta   *nodev1.Node
		status *nodev1.NodeStatus
		health *nodev1.NodeHealth
	}{
		{"parts only", meta(), baseStatus(), nil},
		{"overrides and taints", meta(), baseStatus(), overrides},
		{"recovery time", meta(), baseStatus(), recovered},
		{"no Ready yet", meta(), noReady, nil},
		{"no status", meta(), nil, overrides},
		{"empty meta", &nodev1.Node{}, baseStatus(), overrides},
		{"nothing", nil, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before []proto.Message
			for _, m := range []proto.Message{c.meta, c.status, c.health} {
				before = append(before, proto.Clone(m))
			}
			want := Merge(c.meta, c.status, c.health)
			got := MergeShared(c.meta, c.status, c.health)
			if !proto.Equal(got, want) {
				t.Fatalf("MergeShared served\n%v\nMerge serves\n%v", got, want)
			}
			if got.Metadata == nil {
				got.Metadata = &nodev1.ObjectMeta{}
			}
			got.Metadata.Name, got.Metadata.ResourceVersion = "renamed", "42"
			for i, m := range []proto.Message{c.meta, c.status, c.health} {
				if !proto.Equal(m, before[i]) {
					t.Errorf("part %d changed: %v, was %v", i, m, before[i])
				}
			}
			if c.meta.GetSpec() != nil && cap(c.meta.Spec.Taints) > 1 && c.meta.Spec.Taints[:2][1] != nil {
				t.Error("a taint was appended into the stored spec's array")
			}
		})
	}
}

// The zone key prefers the legacy failure-domain labels, falls back to the
// topology ones, and renders as "region/zone" (or "zone" alone).
func TestZoneKeyAndName(t *testing.T) {
	for _, tc := range []struct {
		labels    map[string]string
		key, name string
	}{
		{nil, "", ""},
		{map[string]string{LabelZone: "a", LabelRegion: "r"}, "r\x00a", "r/a"},
		{map[string]string{LabelZoneLegacy: "old", LabelZone: "new"}, "\x00old", "old"},
		{map[string]string{LabelRegionLegacy: "r1", LabelZone: "z"}, "r1\x00z", "r1/z"},
		{map[string]string{LabelRegion: "r"}, "r\x00", "r/"},
	} {
		key := ZoneKey(tc.labels)
		if key != tc.key {
			t.Errorf("ZoneKey(%v) = %q, want %q", tc.labels, key, tc.key)
		}
		if got := ZoneName(key); got != tc.name {
			t.Errorf("ZoneName(%q) = %q, want %q", key, got, tc.name)
		}
	}
	if got := ZoneName("no-separator"); got != "no-separator" {
		t.Errorf("ZoneName without a separator = %q", got)
	}
}
