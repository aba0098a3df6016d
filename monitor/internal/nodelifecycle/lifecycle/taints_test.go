// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"slices"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func keys(ts []*nodev1.Taint) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.GetKey()+":"+t.GetEffect())
	}
	slices.Sort(out)
	return out
}

func TestDesiredNoScheduleTaints(t *testing.T) {
	c := func(typ, st string) *nodev1.NodeCondition { return &nodev1.NodeCondition{Type: typ, Status: st} }
	for _, tc := range []struct {
		name          string
		conds         []*nodev1.NodeCondition
		unschedulable bool
		want          []string
	}{
		{"healthy", []*nodev1.NodeCondition{c("Ready", "True"), c("MemoryPressure", "False")}, false, nil},
		{"ready false", []*nodev1.NodeCondition{c("Ready", "False")}, false, []string{"node.kubernetes.io/not-ready:NoSchedule"}},
		{"ready unknown", []*nodev1.NodeCondition{c("Ready", "Unknown")}, false, []string{"node.kubernetes.io/unreachable:NoSchedule"}},
		{"no Ready yet: served by nodemodel.Merge, not stored", nil, false, nil},
		{"pressures and network", []*nodev1.NodeCondition{c("Ready", "True"), c("MemoryPressure", "True"), c("DiskPressure", "True"),
			c("PIDPressure", "True"), c("NetworkUnavailable", "True")}, false,
			[]string{"node.kubernetes.io/disk-pressure:NoSchedule", "node.kubernetes.io/memory-pressure:NoSchedule",
				"node.kubernetes.io/network-unavailable:NoSchedule", "node.kubernetes.io/pid-pressure:NoSchedule"}},
		{"pressure Unknown gives no taint", []*nodev1.NodeCondition{c("Ready", "True"), c("MemoryPressure", "Unknown")}, false, nil},
		{"cordoned", []*nodev1.NodeCondition{c("Ready", "True")}, true, []string{"node.kubernetes.io/unschedulable:NoSchedule"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys(DesiredNoScheduleTaints(tc.conds, tc.unschedulable)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReconcileNoScheduleLeavesOtherTaintsAlone(t *testing.T) {
	ne := &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}
	ctl := []*nodev1.Taint{{Key: nodemodel.TaintNotReady, Effect: nodemodel.NoSchedule}, ne}
	user := []*nodev1.Taint{{Key: "dedicated", Value: "gpu", Effect: nodemodel.NoSchedule}, {Key: nodemodel.TaintMemoryPressure, Effect: nodemodel.NoSchedule}}
	desired := DesiredNoScheduleTaints([]*nodev1.NodeCondition{{Type: "Ready", Status: "Unknown"}, {Type: "MemoryPressure", Status: "True"}}, false)
	out, changed := ReconcileNoSchedule(ctl, user, desired)
	if !changed {
		t.Fatal("no change reported")
	}
	want := []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"}
	if got := keys(out); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (memory-pressure already set by the user is not duplicated)", got, want)
	}
	if _, changed := ReconcileNoSchedule(out, user, desired); changed {
		t.Error("second reconcile changed something")
	}
}

func TestDecideNoExecute(t *testing.T) {
	nr := &nodev1.Taint{Key: nodemodel.TaintNotReady, Effect: nodemodel.NoExecute}
	un := &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}
	user := &nodev1.Taint{Key: "x", Effect: nodemodel.NoExecute}
	for _, tc := range []struct {
		name       string
		observed   string
		taints     []*nodev1.Taint
		want       NoExecuteAction
		wantForget bool
	}{
		{"False with unreachable swaps at once", nodemodel.False, []*nodev1.Taint{un}, SwapToNotReady, false},
		{"False without taint enqueues (forgetting a stale entry)", nodemodel.False, []*nodev1.Taint{user}, Enqueue, true},
		{"False already tainted enqueues (no-op)", nodemodel.False, []*nodev1.Taint{nr}, Enqueue, false},
		{"Unknown with not-ready swaps at once", nodemodel.Unknown, []*nodev1.Taint{nr}, SwapToUnreachable, false},
		{"Unknown without taint enqueues", nodemodel.Unknown, nil, Enqueue, true},
		{"Unknown already tainted", nodemodel.Unknown, []*nodev1.Taint{un}, Enqueue, false},
		{"True removes both", nodemodel.True, []*nodev1.Taint{un, nr}, MarkReachable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, f := DecideNoExecute(tc.observed, tc.taints)
			if a != tc.want || f != tc.wantForget {
				t.Errorf("got (%v, %v), want (%v, %v)", a, f, tc.want, tc.wantForget)
			}
		})
	}
}

func TestSwapTaintsKeepsUserTaintsAndStampsNoExecute(t *testing.T) {
	user := &nodev1.Taint{Key: "dedicated", Effect: nodemodel.NoSchedule}
	in := []*nodev1.Taint{user, {Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}}
	now := t0.Add(time.Minute)
	out, changed := SwapTaints(now, in, []*nodev1.Taint{NotReadyNoExecute}, []*nodev1.Taint{UnreachableNoExecute})
	if !changed || len(out) != 2 || out[0] != user {
		t.Fatalf("got %v", keys(out))
	}
	if !out[1].GetTimeAdded().AsTime().Equal(now) || out[1].GetKey() != nodemodel.TaintNotReady {
		t.Errorf("added taint %v", out[1])
	}
	if NotReadyNoExecute.TimeAdded != nil {
		t.Error("template modified")
	}
}

func TestProcessQueued(t *testing.T) {
	if q := ProcessQueued(nil); q.Retry != 50*time.Millisecond {
		t.Errorf("no Ready: %+v", q)
	}
	if q := ProcessQueued(&nodev1.NodeCondition{Status: "False"}); q.Add.GetKey() != nodemodel.TaintNotReady || q.Remove.GetKey() != nodemodel.TaintUnreachable {
		t.Errorf("False: %+v", q)
	}
	if q := ProcessQueued(&nodev1.NodeCondition{Status: "Unknown"}); q.Add.GetKey() != nodemodel.TaintUnreachable || q.Remove.GetKey() != nodemodel.TaintNotReady {
		t.Errorf("Unknown: %+v", q)
	}
	if q := ProcessQueued(&nodev1.NodeCondition{Status: "True"}); !q.Done || q.Add != nil {
		t.Errorf("True: %+v", q)
	}
}

func TestIsControllerManaged(t *testing.T) {
	for _, tc := range []struct {
		key, effect string
		want        bool
	}{
		{nodemodel.TaintUnreachable, nodemodel.NoExecute, true},
		{nodemodel.TaintNotReady, nodemodel.NoSchedule, true},
		{nodemodel.TaintUnschedulable, nodemodel.NoSchedule, true},
		{nodemodel.TaintMemoryPressure, nodemodel.NoExecute, false},
		{nodemodel.TaintOutOfService, nodemodel.NoExecute, false},
		{"dedicated", nodemodel.NoSchedule, false},
	} {
		if got := IsControllerManaged(tc.key, tc.effect); got != tc.want {
			t.Errorf("%s:%s = %v", tc.key, tc.effect, got)
		}
	}
}

// The health pass shares the stored record's taint slice with the record it
// decides on (controller.workingHealth): the taint helpers must build new
// slices, never write into the one they are given, even when it has room.
func TestTaintHelpersNeverWriteIntoTheirInput(t *testing.T) {
	user := &nodev1.Taint{Key: "dedicated", Effect: nodemodel.NoSchedule}
	stored := append(make([]*nodev1.Taint, 0, 8), user, &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute})
	before := slices.Clone(stored[:cap(stored)])
	_, _ = SwapTaints(t0, stored, []*nodev1.Taint{NotReadyNoExecute}, []*nodev1.Taint{UnreachableNoExecute})
	_, _ = ReconcileNoSchedule(stored, nil, []*nodev1.Taint{{Key: nodemodel.TaintNotReady, Effect: nodemodel.NoSchedule}})
	if !slices.Equal(stored[:cap(stored)], before) {
		t.Fatalf("the input's array changed: %v, was %v", keys(stored[:cap(stored)]), keys(before))
	}
	if user.TimeAdded != nil || stored[1].TimeAdded != nil {
		t.Fatal("an input taint was modified")
	}
}
