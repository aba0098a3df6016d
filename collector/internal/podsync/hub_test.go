// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podsync

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/validation"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func pod(ns, name, uid, node string) *podv1.Pod {
	return &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name, Uid: uid},
		Spec:     &podv1.PodSpec{NodeName: node},
		Status:   &podv1.PodStatus{Phase: validation.PodRunning},
	}
}

func put(t *testing.T, s nodestore.Store, p *podv1.Pod) int64 {
	t.Helper()
	rev, err := s.Apply(context.Background(), nil, nodestore.Put(nodestore.Pods, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName(), p))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// target records the PodSync messages sent to one stream.
type target struct{ ch chan *collectorv1.PodSync }

func newTarget() *target { return &target{ch: make(chan *collectorv1.PodSync, 16)} }

func (t *target) SendPods(m *collectorv1.PodSync) error { t.ch <- m; return nil }

func (t *target) next(tb testing.TB) *collectorv1.PodSync {
	tb.Helper()
	select {
	case m := <-t.ch:
		return m
	case <-time.After(10 * time.Second):
		tb.Fatal("no PodSync within 10s")
	}
	return nil
}

func names(ps []*podv1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.GetMetadata().GetName())
	}
	return out
}

func startHub(t *testing.T, s nodestore.Store) *Hub {
	t.Helper()
	h, err := New(s, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func TestAttachGetsItsPodsThenTheirChanges(t *testing.T) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	put(t, s, pod("ns", "a", "ua", "n1"))
	put(t, s, pod("ns", "b", "ub", "n2"))
	put(t, s, pod("ns", "c", "uc", "")) // not scheduled: nobody's
	h := startHub(t, s)

	n1 := newTarget()
	sub := h.Attach("n1", n1)
	m := n1.next(t)
	if !m.GetFull() || !slices.Equal(names(m.GetPods()), []string{"a"}) || len(m.GetDeleted()) != 0 {
		t.Fatalf("first PodSync = full %v pods %v deleted %v, want the full list [a]", m.GetFull(), names(m.GetPods()), m.GetDeleted())
	}
	if m.GetPods()[0].GetMetadata().GetResourceVersion() == "" {
		t.Fatal("pods are sent with their resource version")
	}

	// A node without pods is told so: its reporter then knows a static
	// pod's mirror is missing.
	n3 := newTarget()
	h.Attach("n3", n3)
	if m := n3.next(t); !m.GetFull() || len(m.GetPods()) != 0 {
		t.Fatalf("attach without pods: full %v pods %v, want an empty full list", m.GetFull(), names(m.GetPods()))
	}

	put(t, s, pod("ns", "d", "ud", "n1"))
	put(t, s, pod("ns", "e", "ue", "n2")) // another node's: not sent to n1
	if m := n1.next(t); m.GetFull() || !slices.Equal(names(m.GetPods()), []string{"d"}) {
		t.Fatalf("change = full %v pods %v, want [d]", m.GetFull(), names(m.GetPods()))
	}
	if _, err := s.Apply(context.Background(), nil, nodestore.Delete(nodestore.Pods, "ns/a")); err != nil {
		t.Fatal(err)
	}
	m = n1.next(t)
	if len(m.GetDeleted()) != 1 || m.GetDeleted()[0].GetName() != "a" || m.GetDeleted()[0].GetUid() != "ua" {
		t.Fatalf("deletion = %v, want ns/a uid ua", m.GetDeleted())
	}

	sub.Detach()
	put(t, s, pod("ns", "f", "uf", "n1"))
	put(t, s, pod("ns", "g", "ug", "n3")) // a marker: n3 hears it after anything for n1 would be sent
	n3.next(t)
	select {
	case m := <-n1.ch:
		t.Fatalf("detached stream was sent %v", m)
	default:
	}
}

// nodes is a fake table of attached streams.
type nodes struct {
	mu       sync.Mutex
	attached map[string]string
	ended    chan string
}

func (n *nodes) AttachedUID(name string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	uid, ok := n.attached[name]
	return uid, ok
}

func (n *nodes) AttachedNames() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for k := range n.attached {
		out = append(out, k)
	}
	return out
}

func (n *nodes) NodeDeleted(name, uid string) { n.ended <- name + "/" + uid }

func TestDeletedNodeEndsItsStream(t *testing.T) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	ctx := context.Background()
	for _, n := range []string{"n1", "n2"} {
		if _, err := s.Apply(ctx, nil, nodestore.Put(nodestore.Nodes, n, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: n, Uid: "u-" + n}})); err != nil {
			t.Fatal(err)
		}
	}
	h := startHub(t, s)
	nd := &nodes{attached: map[string]string{"n1": "u-n1"}, ended: make(chan string, 4)}
	h.SetNodes(nd)
	// Wait for the hub to follow the store: a pod marker.
	tg := newTarget()
	h.Attach("n9", tg)
	tg.next(t)
	put(t, s, pod("ns", "marker", "um", "n9"))
	tg.next(t)

	// n2 is not attached here: nothing to end.
	if _, err := s.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, "n2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, "n1")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-nd.ended:
		if got != "n1/u-n1" {
			t.Fatalf("ended %s, want n1/u-n1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of the deleted node was not ended")
	}
	select {
	case got := <-nd.ended:
		t.Fatalf("also ended %s", got)
	case <-time.After(50 * time.Millisecond):
	}
}

func refusal(t *testing.T, err error, code codes.Code, field string) {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) || r.Code != code || r.Field != field {
		t.Fatalf("err = %v, want %s on %s", err, code, field)
	}
}

func get(t *testing.T, s nodestore.Store, key string) (*podv1.Pod, bool) {
	t.Helper()
	o, err := s.Get(context.Background(), nodestore.Pods, key)
	if errors.Is(err, nodestore.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.Value.(*podv1.Pod), true
}

func TestWritesAreTheNodesOwn(t *testing.T) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	ctx := context.Background()
	h, err := New(s, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := pod("ns", "mine", "u1", "n1")
	mine.Status.Conditions = []*podv1.PodCondition{{Type: "DisruptionTarget", Status: "True"}}
	put(t, s, mine)
	put(t, s, pod("ns", "theirs", "u2", "n2"))
	ready := &podv1.PodStatus{Phase: validation.PodRunning, Conditions: []*podv1.PodCondition{{Type: nodemodel.Ready, Status: nodemodel.True}}}

	// Another node's pod: PermissionDenied naming the field.
	refusal(t, h.WriteStatus(ctx, "n1", &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "theirs", Uid: "u2", Status: ready}), codes.PermissionDenied, "podStatus.name")
	refusal(t, h.FinishDeletion(ctx, "n1", &collectorv1.PodDelete{Namespace: "ns", Name: "theirs", Uid: "u2"}), codes.PermissionDenied, "podDelete.name")
	// The UID precondition.
	refusal(t, h.WriteStatus(ctx, "n1", &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "mine", Uid: "old", Status: ready}), codes.Aborted, "podStatus.uid")
	refusal(t, h.WriteStatus(ctx, "n1", &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "gone", Uid: "u9", Status: ready}), codes.NotFound, "podStatus.name")
	// A node does not start deletions.
	refusal(t, h.FinishDeletion(ctx, "n1", &collectorv1.PodDelete{Namespace: "ns", Name: "mine", Uid: "u1"}), codes.FailedPrecondition, "podDelete.name")
	if p, _ := get(t, s, "ns/theirs"); p.GetStatus().GetPhase() != validation.PodRunning {
		t.Fatal("a refused write changed the pod")
	}

	if err := h.WriteStatus(ctx, "n1", &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "mine", Uid: "u1", Status: ready}); err != nil {
		t.Fatal(err)
	}
	// The node's Ready, and the evictor's DisruptionTarget kept, as the
	// kubelet's mergePodStatus keeps the conditions it does not own.
	if p, _ := get(t, s, "ns/mine"); len(p.GetStatus().GetConditions()) != 2 || p.GetStatus().GetConditions()[0].GetType() != nodemodel.Ready ||
		p.GetStatus().GetConditions()[1].GetType() != "DisruptionTarget" {
		t.Fatalf("status = %v, want what the node wrote and the stored DisruptionTarget", p.GetStatus())
	}

	// Terminating: the terminal status, then gone.
	term := pod("ns", "term", "u3", "n1")
	term.Metadata.DeletionTimestamp = nodemodel.Timestamp(t0)
	put(t, s, term)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs, rev, err := s.List(ctx, nodestore.Pods, nodestore.ListOptions{})
	if err != nil || len(objs) == 0 {
		t.Fatal(err)
	}
	w := nodestore.WatchKind(wctx, s, nodestore.Pods, rev, nodestore.KindWatchOptions{})
	failed := &podv1.PodStatus{Phase: validation.PodFailed}
	if err := h.FinishDeletion(ctx, "n1", &collectorv1.PodDelete{Namespace: "ns", Name: "term", Uid: "u3", Status: failed}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for len(seen) < 2 {
		b := <-w
		for _, e := range b.Events {
			if e.Type == nodestore.PutEvent {
				seen = append(seen, "put "+e.Object.Value.(*podv1.Pod).GetStatus().GetPhase())
			} else {
				seen = append(seen, "delete")
			}
		}
	}
	if !slices.Equal(seen, []string{"put Failed", "delete"}) {
		t.Fatalf("watchers saw %v, want the Failed pod, then its deletion", seen)
	}
}

func mirror(name, node, nodeUID, hash string) *collectorv1.MirrorPod {
	return &collectorv1.MirrorPod{Pod: &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "kube-system", Name: name + "-" + node,
			Annotations:     map[string]string{validation.MirrorPodAnnotation: hash},
			OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "v1", Kind: "Node", Name: node, Uid: nodeUID, Controller: true}}},
		Spec:   &podv1.PodSpec{NodeName: node, Tolerations: []*nodev1.Toleration{{Operator: "Exists", Effect: "NoExecute"}}},
		Status: &podv1.PodStatus{Phase: validation.PodRunning},
	}}
}

func TestMirrorPods(t *testing.T) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	ctx := context.Background()
	h, err := New(s, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "kube-system/etcd-n1"
	// Missing: created, with a uid and the default termination grace.
	if err := h.EnsureMirror(ctx, "n1", "nu1", mirror("etcd", "n1", "nu1", "h1"), t0); err != nil {
		t.Fatal(err)
	}
	p, ok := get(t, s, key)
	if !ok || p.GetMetadata().GetUid() == "" || p.GetSpec().GetTerminationGracePeriodSeconds() != 30 {
		t.Fatalf("mirror pod = %v", p)
	}
	uid1 := p.GetMetadata().GetUid()
	// The same again: unchanged.
	if err := h.EnsureMirror(ctx, "n1", "nu1", mirror("etcd", "n1", "nu1", "h1"), t0); err != nil {
		t.Fatal(err)
	}
	if p, _ := get(t, s, key); p.GetMetadata().GetUid() != uid1 {
		t.Fatal("an unchanged mirror pod was replaced")
	}
	// Terminating (deleted through the API): replaced, new uid.
	p.Metadata.DeletionTimestamp = nodemodel.Timestamp(t0)
	put(t, s, p)
	if err := h.EnsureMirror(ctx, "n1", "nu1", mirror("etcd", "n1", "nu1", "h1"), t0); err != nil {
		t.Fatal(err)
	}
	p2, _ := get(t, s, key)
	if p2.GetMetadata().GetUid() == uid1 || p2.GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatalf("terminating mirror pod not replaced: %v", p2.GetMetadata())
	}
	// Another version of the static pod: replaced.
	if err := h.EnsureMirror(ctx, "n1", "nu1", mirror("etcd", "n1", "nu1", "h2"), t0); err != nil {
		t.Fatal(err)
	}
	if p3, _ := get(t, s, key); p3.GetMetadata().GetUid() == p2.GetMetadata().GetUid() {
		t.Fatal("a mirror pod of another version was kept")
	}

	// Not this node's: refused, naming the field.
	refusal(t, h.EnsureMirror(ctx, "n1", "nu1", mirror("etcd", "n2", "nu1", "h1"), t0), codes.PermissionDenied, "mirrorPod.pod.spec.nodeName")
	m := mirror("etcd", "n1", "nu1", "h1")
	m.Pod.Metadata.OwnerReferences[0].Name = "n2"
	refusal(t, h.EnsureMirror(ctx, "n1", "nu1", m, t0), codes.PermissionDenied, "mirrorPod.pod.metadata.ownerReferences[0].name")
	refusal(t, h.EnsureMirror(ctx, "n1", "nu2", mirror("etcd", "n1", "nu1", "h1"), t0), codes.FailedPrecondition, "mirrorPod.pod.metadata.ownerReferences[0].uid")
	// A pod of that name that is not a mirror pod is left alone.
	put(t, s, pod("kube-system", "dns-n1", "ud", "n1"))
	refusal(t, h.EnsureMirror(ctx, "n1", "nu1", mirror("dns", "n1", "nu1", "h1"), t0), codes.AlreadyExists, "mirrorPod.pod.metadata.name")

	// A mirror pod may be deleted by its node without a deletion timestamp
	// (its static pod is gone).
	p4, _ := get(t, s, key)
	if err := h.FinishDeletion(ctx, "n1", &collectorv1.PodDelete{Namespace: "kube-system", Name: "etcd-n1", Uid: p4.GetMetadata().GetUid()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, s, key); ok {
		t.Fatal("orphaned mirror pod not deleted")
	}
}

// TestNodeStatusKeepsOthersConditions replays a reporter resuming after a
// freeze: it decides from a copy older than the store (before the evictor's
// DisruptionTarget) and writes Ready=True, then finishes the deletion from
// another old copy. Phase and the kubelet's conditions are the node's;
// DisruptionTarget stays as the evictor wrote it, as upstream's
// mergePodStatus keeps the conditions the kubelet does not own.
func TestNodeStatusKeepsOthersConditions(t *testing.T) {
	dt := &podv1.PodCondition{Type: "DisruptionTarget", Status: nodemodel.True, Reason: "DeletionByTaintManager", LastTransitionTime: nodemodel.Timestamp(t0)}
	cur := &podv1.PodStatus{Phase: validation.PodRunning, Conditions: []*podv1.PodCondition{
		{Type: nodemodel.Ready, Status: nodemodel.False, LastTransitionTime: nodemodel.Timestamp(t0.Add(-time.Second))}, dt}}
	cases := []struct {
		name  string
		sent  *podv1.PodStatus
		phase string
		want  []string // type=status[/reason]
	}{{
		name: "Ready=True from a copy without DisruptionTarget",
		sent: &podv1.PodStatus{Phase: validation.PodRunning, Conditions: []*podv1.PodCondition{{Type: nodemodel.Ready, Status: nodemodel.True}}},
		want: []string{"Ready=True", "DisruptionTarget=True/DeletionByTaintManager"},
	}, {
		name: "a copy with another DisruptionTarget and a readiness gate: stored ones win, in the node's order",
		sent: &podv1.PodStatus{Phase: validation.PodFailed, Conditions: []*podv1.PodCondition{
			{Type: "DisruptionTarget", Status: nodemodel.False}, {Type: "example.com/gate", Status: nodemodel.True},
			{Type: nodemodel.Ready, Status: nodemodel.False, Reason: "PodCompleted"}}},
		phase: validation.PodFailed,
		want:  []string{"DisruptionTarget=True/DeletionByTaintManager", "Ready=False/PodCompleted"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeStatus(cur, tc.sent)
			var conds []string
			for _, c := range got.GetConditions() {
				s := c.GetType() + "=" + c.GetStatus()
				if c.GetReason() != "" {
					s += "/" + c.GetReason()
				}
				conds = append(conds, s)
			}
			if !slices.Equal(conds, tc.want) {
				t.Errorf("conditions = %v, want %v", conds, tc.want)
			}
			if want := cmp.Or(tc.phase, validation.PodRunning); got.GetPhase() != want {
				t.Errorf("phase = %s, want the node's %s", got.GetPhase(), want)
			}
		})
	}
	if cur.GetConditions()[1] != dt || len(cur.GetConditions()) != 2 {
		t.Error("the stored status was modified")
	}
}
