// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package owners

import (
	"slices"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/podlife"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func owner(kind, name string, replicas int) Owner {
	return Owner{Kind: kind, Namespace: "default", Name: name, UID: name + "-uid", Generation: 2, Replicas: replicas,
		Selector: func(l map[string]string) bool { return l["app"] == name },
		Template: &podv1.Pod{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": name}}}}
}

type podOpt func(*podv1.Pod)

func terminatingOpt(p *podv1.Pod) {
	p.Metadata.DeletionTimestamp = nodemodel.Timestamp(t0.Add(30 * time.Second))
}
func phaseOpt(ph string) podOpt { return func(p *podv1.Pod) { p.Status.Phase = ph } }
func notReadyOpt(p *podv1.Pod)  { p.Status.Conditions = nil }
func ageOpt(d time.Duration) podOpt {
	return func(p *podv1.Pod) { p.Metadata.CreationTimestamp = nodemodel.Timestamp(t0.Add(-d)) }
}

// ownedPod is a Running, Ready pod of o on node.
func ownedPod(o Owner, name, node string, opts ...podOpt) *podv1.Pod {
	p := newPod(o, name, node)
	p.Metadata.Uid = name + "-uid"
	p.Metadata.CreationTimestamp = nodemodel.Timestamp(t0)
	p.Status = &podv1.PodStatus{Phase: podlife.PhaseRunning, Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}}
	for _, f := range opts {
		f(p)
	}
	return p
}

func names(ps []*podv1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.GetMetadata().GetName())
	}
	return out
}

func TestReplicaSet(t *testing.T) {
	rs := owner(KindReplicaSet, "web", 3)
	other := owner(KindReplicaSet, "other", 1)
	for _, tc := range []struct {
		name    string
		o       Owner
		pods    []*podv1.Pod
		creates int
		deletes []string
		status  Status
	}{
		{name: "a terminating pod is replaced in the sync that sees it", o: rs,
			pods:    []*podv1.Pod{ownedPod(rs, "a", "n1", terminatingOpt), ownedPod(rs, "b", "n2"), ownedPod(rs, "c", "n3")},
			creates: 1, status: Status{ObservedGeneration: 2, Replicas: 2, Ready: 2, Terminating: 1}},
		{name: "a not-ready pod is not replaced", o: rs,
			pods:   []*podv1.Pod{ownedPod(rs, "a", "n1", notReadyOpt), ownedPod(rs, "b", "n2"), ownedPod(rs, "c", "n3")},
			status: Status{ObservedGeneration: 2, Replicas: 3, Ready: 2}},
		{name: "failed pods do not count; others' pods are not claimed", o: rs,
			pods:    []*podv1.Pod{ownedPod(rs, "a", "n1", phaseOpt(podlife.PhaseFailed)), ownedPod(other, "x", "n1"), ownedPod(rs, "b", "n2")},
			creates: 2, status: Status{ObservedGeneration: 2, Replicas: 1, Ready: 1}},
		{name: "surplus: unbound, then Pending, then not ready, then newest", o: owner(KindReplicaSet, "web", 1),
			pods: []*podv1.Pod{ownedPod(rs, "old", "n1", ageOpt(time.Hour)), ownedPod(rs, "new", "n1"), ownedPod(rs, "unready", "n2", notReadyOpt),
				ownedPod(rs, "pending", "n2", phaseOpt(podlife.PhasePending)), ownedPod(rs, "unbound", "")},
			deletes: []string{"unbound", "pending", "unready", "new"}, status: Status{ObservedGeneration: 2, Replicas: 5, Ready: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := ReplicaSet(tc.o, tc.pods)
			if len(plan.Create) != tc.creates || !slices.Equal(names(plan.Delete), tc.deletes) || plan.Status != tc.status {
				t.Fatalf("creates %d deletes %v status %+v; want %d %v %+v", len(plan.Create), names(plan.Delete), plan.Status, tc.creates, tc.deletes, tc.status)
			}
			for _, p := range plan.Create {
				r := controllerRef(p)
				if r.GetUid() != tc.o.UID || r.GetKind() != KindReplicaSet || p.GetMetadata().GetLabels()["app"] != tc.o.Name || p.GetSpec().GetNodeName() != "" {
					t.Fatalf("created pod %v", p)
				}
			}
		})
	}
}

func TestStatefulSet(t *testing.T) {
	ss := owner(KindStatefulSet, "db", 3)
	par := ss
	par.Parallel = true
	for _, tc := range []struct {
		name    string
		o       Owner
		pods    []*podv1.Pod
		creates []string
		deletes []string
		waiting string
	}{
		{name: "ordered: one at a time", o: ss, creates: []string{"db-0"}, waiting: "StatefulSet is waiting for Pod db-0 to be Running and Ready"},
		{name: "ordered: a not-ready pod blocks higher ordinals", o: ss,
			pods: []*podv1.Pod{ownedPod(ss, "db-0", "n1", notReadyOpt)}, waiting: "StatefulSet is waiting for Pod db-0 to be Running and Ready"},
		{name: "a terminating pod fills its slot: waiting for Pod to Terminate", o: ss,
			pods:    []*podv1.Pod{ownedPod(ss, "db-0", "n1"), ownedPod(ss, "db-1", "n2", terminatingOpt), ownedPod(ss, "db-2", "n3")},
			waiting: WaitingForTerminate + " db-1"},
		{name: "parallel: only the terminating ordinal waits", o: par,
			pods:    []*podv1.Pod{ownedPod(ss, "db-1", "n2", terminatingOpt)},
			creates: []string{"db-0", "db-2"}},
		{name: "failed pod deleted, recreated later", o: ss,
			pods:    []*podv1.Pod{ownedPod(ss, "db-0", "n1", phaseOpt(podlife.PhaseFailed))},
			deletes: []string{"db-0"}, waiting: "StatefulSet is recreating failed Pod db-0"},
		{name: "a foreign pod with the name fills the slot too", o: ss,
			pods: []*podv1.Pod{ownedPod(owner(KindReplicaSet, "x", 1), "db-0", "n1", notReadyOpt)}, waiting: "StatefulSet is waiting for Pod db-0 to be Running and Ready"},
		{name: "scale down: highest ordinal first, one at a time", o: owner(KindStatefulSet, "db", 1),
			pods:    []*podv1.Pod{ownedPod(ss, "db-0", "n1"), ownedPod(ss, "db-1", "n2"), ownedPod(ss, "db-2", "n3")},
			deletes: []string{"db-2"}},
		{name: "scale down waits for the terminating one", o: owner(KindStatefulSet, "db", 1),
			pods:    []*podv1.Pod{ownedPod(ss, "db-0", "n1"), ownedPod(ss, "db-1", "n2"), ownedPod(ss, "db-2", "n3", terminatingOpt)},
			waiting: WaitingForTerminate + " db-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := StatefulSet(tc.o, tc.pods)
			if !slices.Equal(names(plan.Create), tc.creates) || !slices.Equal(names(plan.Delete), tc.deletes) || plan.Waiting != tc.waiting {
				t.Fatalf("creates %v deletes %v waiting %q; want %v %v %q", names(plan.Create), names(plan.Delete), plan.Waiting, tc.creates, tc.deletes, tc.waiting)
			}
		})
	}
}

func tnode(name string, taints ...*nodev1.Taint) *nodev1.Node {
	return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name}, Spec: &nodev1.NodeSpec{Taints: taints},
		Status: &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True}}}}
}

func TestNodeShouldRunDaemonPod(t *testing.T) {
	ds := owner(KindDaemonSet, "agent", 0)
	shape := DaemonTolerations(ds, admission.DefaultConfig())
	hn := ds
	hn.Template = &podv1.Pod{Spec: &podv1.PodSpec{HostNetwork: true}}
	hnShape := DaemonTolerations(hn, admission.DefaultConfig())
	taint := func(key, effect string) *nodev1.Taint { return &nodev1.Taint{Key: key, Effect: effect} }
	for _, tc := range []struct {
		name      string
		shape     *podv1.Pod
		taints    []*nodev1.Taint
		run, cont bool
	}{
		{name: "healthy", shape: shape, run: true, cont: true},
		{name: "unreachable: NoSchedule not tolerated, NoExecute tolerated for ever", shape: shape,
			taints: []*nodev1.Taint{taint(nodemodel.TaintUnreachable, nodemodel.NoSchedule), taint(nodemodel.TaintUnreachable, nodemodel.NoExecute)}, run: false, cont: true},
		{name: "cordoned and under pressure: tolerated", shape: shape,
			taints: []*nodev1.Taint{taint(nodemodel.TaintUnschedulable, nodemodel.NoSchedule), taint(nodemodel.TaintDiskPressure, nodemodel.NoSchedule),
				taint(nodemodel.TaintMemoryPressure, nodemodel.NoSchedule), taint(nodemodel.TaintPIDPressure, nodemodel.NoSchedule)}, run: true, cont: true},
		{name: "network unavailable: only host-network pods", shape: shape,
			taints: []*nodev1.Taint{taint(nodemodel.TaintNetworkUnavailable, nodemodel.NoSchedule)}, run: false, cont: true},
		{name: "network unavailable, host network", shape: hnShape,
			taints: []*nodev1.Taint{taint(nodemodel.TaintNetworkUnavailable, nodemodel.NoSchedule)}, run: true, cont: true},
		{name: "out-of-service NoExecute: evicted, not recreated", shape: shape,
			taints: []*nodev1.Taint{taint(nodemodel.TaintOutOfService, nodemodel.NoExecute)}, run: false, cont: false},
		{name: "PreferNoSchedule ignored", shape: shape, taints: []*nodev1.Taint{taint("x", nodemodel.PreferNoSchedule)}, run: true, cont: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, cont := NodeShouldRunDaemonPod(tnode("n1", tc.taints...), tc.shape)
			if run != tc.run || cont != tc.cont {
				t.Fatalf("(shouldRun, shouldContinueRunning) = (%v, %v), want (%v, %v)", run, cont, tc.run, tc.cont)
			}
		})
	}
	pinned := newPod(ds, "", "n2")
	pinned.Spec.Tolerations = shape.Spec.Tolerations
	if run, cont := NodeShouldRunDaemonPod(tnode("n1"), pinned); run || cont {
		t.Fatalf("pod pinned to n2 on n1: (%v, %v)", run, cont)
	}
}

func TestDaemonSet(t *testing.T) {
	ds := owner(KindDaemonSet, "agent", 0)
	shape := DaemonTolerations(ds, admission.DefaultConfig())
	unreachable := []*nodev1.Taint{{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoSchedule}, {Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}}
	oos := []*nodev1.Taint{{Key: nodemodel.TaintOutOfService, Effect: nodemodel.NoExecute}}
	nodes := []*nodev1.Node{tnode("n1"), tnode("n2", unreachable...), tnode("n3", oos...), tnode("n4"), tnode("n5")}
	pods := []*podv1.Pod{
		ownedPod(ds, "a1", "n1"),
		ownedPod(ds, "a2", "n2", notReadyOpt),
		ownedPod(ds, "a3", "n3"),
		ownedPod(ds, "a4", "n4", phaseOpt(podlife.PhaseFailed), notReadyOpt),
		ownedPod(ds, "a5old", "n5", ageOpt(time.Hour)), ownedPod(ds, "a5new", "n5"),
	}
	plan := DaemonSet(ds, shape, nodes, pods)
	if got := names(plan.Delete); !slices.Equal(got, []string{"a3", "a4", "a5new"}) {
		t.Errorf("deletes %v", got)
	}
	if len(plan.Create) != 0 {
		t.Errorf("creates %v (the failed pod is recreated at a later sync)", names(plan.Create))
	}
	want := Status{ObservedGeneration: 2, Desired: 3, Current: 3, Ready: 2, Misscheduled: 2}
	if plan.Status != want {
		t.Errorf("status %+v, want %+v", plan.Status, want)
	}
	// A missing pod is created bound to its node only where it should run.
	plan = DaemonSet(ds, shape, nodes, nil)
	var created []string
	for _, p := range plan.Create {
		created = append(created, p.GetSpec().GetNodeName())
	}
	if !slices.Equal(created, []string{"n1", "n4", "n5"}) {
		t.Errorf("created on %v", created)
	}
}

func TestOrphans(t *testing.T) {
	rs := owner(KindReplicaSet, "web", 1)
	gone := owner(KindReplicaSet, "gone", 1)
	noUID := ownedPod(gone, "nouid", "n1")
	noUID.Metadata.OwnerReferences[0].Uid = ""
	mirror := ownedPod(gone, "mirror", "n1")
	mirror.Metadata.OwnerReferences[0].Kind = "Node"
	sameNameNewUID := ownedPod(gone, "old", "n1")
	sameNameNewUID.Metadata.OwnerReferences[0].Name = "web"
	pods := []*podv1.Pod{ownedPod(rs, "kept", "n1"), ownedPod(gone, "orphan", "n1"), ownedPod(gone, "ending", "n1", terminatingOpt), noUID, mirror, sameNameNewUID}
	if got := names(Orphans([]Owner{rs}, pods)); !slices.Equal(got, []string{"orphan", "old"}) {
		t.Fatalf("orphans %v, want [orphan old]", got)
	}
}

func TestManaged(t *testing.T) {
	rs := owner(KindReplicaSet, "web", 1)
	if !Managed(rs) {
		t.Fatal("a valid owner is not managed")
	}
	noSel := rs
	noSel.Selector = nil
	other := rs
	other.Template = &podv1.Pod{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": "db"}}}
	noTmpl := rs
	noTmpl.Template = nil
	for _, o := range []Owner{noSel, other, noTmpl} {
		if Managed(o) {
			t.Errorf("owner %+v managed", o)
		}
	}
}
