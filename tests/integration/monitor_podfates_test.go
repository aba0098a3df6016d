// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestMonitorPodFates runs the pod fates of spec §12 on a real etcd through
// PodService: a pod whose toleration runs out turns Terminating (kept, with
// DisruptionTarget and a deletion timestamp 30 s on) and stays until a
// grace-0 delete with its UID; a Terminating pod on a node tainted
// out-of-service goes to pod GC; the pod of a deleted node is removed by
// pod GC after the quarantine, Failed with DeletionByPodGC. Watchers see
// MODIFIED for Terminating and DELETED for each removal.
func TestMonitorPodFates(t *testing.T) {
	c := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	f.add("lost", false)
	f.add("gone", true)

	const quarantine = 2 * time.Second
	m := startMonitor(t, c, store.Prefix(), "monitor-a", func(cfg *app.Config) {
		cfg.Admission.UnreachableSeconds = 2
		cfg.Admission.NotReadySeconds = 2
		cfg.PodGCPeriod = 200 * time.Millisecond
		cfg.PodGCQuarantine = quarantine
	})
	waitFor(t, 30*time.Second, "monitor-a to lead", m.app.Leading)
	cc, err := grpc.NewClient(m.app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	pods := podv1.NewPodServiceClient(cc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ws, err := pods.WatchPods(ctx, &podv1.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []*podv1.WatchPodsResponse
	go func() {
		for {
			ev, err := ws.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}()
	seen := func(typ, name string, ok func(*podv1.Pod) bool) *podv1.Pod {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.GetType() == typ && ev.GetPod().GetMetadata().GetName() == name && (ok == nil || ok(ev.GetPod())) {
				return ev.GetPod()
			}
		}
		return nil
	}

	create := func(name, node string) *podv1.Pod {
		r, err := pods.CreatePod(ctx, &podv1.CreatePodRequest{Pod: &podv1.Pod{
			Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name,
				OwnerReferences: []*nodev1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: true}}},
			Spec:   &podv1.PodSpec{NodeName: node},
			Status: &podv1.PodStatus{Phase: podlife.PhaseRunning, Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if g := r.GetPod().GetSpec().GetTerminationGracePeriodSeconds(); g != 30 {
			t.Fatalf("terminationGracePeriodSeconds defaulted to %d, want 30", g)
		}
		return r.GetPod()
	}
	web := create("web", "lost")
	create("db", "lost")
	create("orphan", "gone")

	get := func(name string) (*podv1.Pod, bool) {
		r, err := pods.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: name})
		if status.Code(err) == codes.NotFound {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return r.GetPod(), true
	}

	// Toleration expiry: Terminating, kept.
	waitFor(t, time.Minute, "web and db to turn Terminating", func() bool {
		w, ok1 := get("web")
		d, ok2 := get("db")
		return ok1 && ok2 && podlife.IsTerminating(w) && podlife.IsTerminating(d)
	})
	w, _ := get("web")
	md := w.GetMetadata()
	if md.GetDeletionGracePeriodSeconds() != 30 {
		t.Errorf("deletionGracePeriodSeconds = %d, want 30", md.GetDeletionGracePeriodSeconds())
	}
	var dt *podv1.PodCondition
	for _, c := range w.GetStatus().GetConditions() {
		if c.GetType() == podlife.DisruptionTarget {
			dt = c
		}
	}
	if dt.GetStatus() != nodemodel.True || dt.GetReason() != podlife.ReasonTaintManager {
		t.Errorf("DisruptionTarget = %v", dt)
	}
	if d := md.GetDeletionTimestamp().AsTime().Sub(dt.GetLastTransitionTime().AsTime()); d < 29*time.Second || d > 31*time.Second {
		t.Errorf("deletion timestamp %s after the DisruptionTarget, want 30 s", d)
	}
	// Nothing removes it when time passes on a node that is merely lost.
	time.Sleep(10 * 200 * time.Millisecond)
	if _, ok := get("web"); !ok {
		t.Fatal("a Terminating pod on a lost node was removed")
	}
	if seen("MODIFIED", "web", podlife.IsTerminating) == nil {
		t.Error("watch did not deliver the Terminating update")
	}

	// The node's reporter would confirm with grace 0 and the UID: gone.
	zero := int64(0)
	if _, err := pods.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web", GracePeriodSeconds: &zero, Uid: "not-" + web.GetMetadata().GetUid()}); status.Code(err) != codes.Aborted {
		t.Fatalf("delete with a wrong uid: %v, want Aborted", err)
	}
	r, err := pods.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web", GracePeriodSeconds: &zero, Uid: web.GetMetadata().GetUid()})
	if err != nil || !r.GetGone() {
		t.Fatalf("grace-0 delete: %v gone=%v", err, r.GetGone())
	}
	waitFor(t, 10*time.Second, "web's DELETED event", func() bool { return seen("DELETED", "web", nil) != nil })

	// Out-of-service on the not-Ready node: pod GC force-deletes db.
	o, err := store.Get(ctx, nodestore.Nodes, "lost")
	if err != nil {
		t.Fatal(err)
	}
	n := o.Value.(*nodev1.Node)
	if n.Spec == nil {
		n.Spec = &nodev1.NodeSpec{}
	}
	n.Spec.Taints = append(n.Spec.Taints, &nodev1.Taint{Key: nodemodel.TaintOutOfService, Value: "nodeshutdown", Effect: nodemodel.NoExecute})
	if _, err := store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "lost", Value: n, IfModRevision: o.ModRevision}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "db to be force-deleted", func() bool { _, ok := get("db"); return !ok })
	// The read can see the pod gone before the watch has delivered its
	// DELETED event: wait for the event, then look at its last state.
	waitFor(t, 10*time.Second, "db's DELETED event", func() bool { return seen("DELETED", "db", nil) != nil })
	if last := seen("DELETED", "db", nil); last.GetStatus().GetPhase() != podlife.PhaseFailed {
		t.Errorf("db's last phase %q, want Failed", last.GetStatus().GetPhase())
	}

	// Orphan: the node is deleted; its pod goes after the quarantine.
	if _, ok := get("orphan"); !ok {
		t.Fatal("orphan pod gone before its node")
	}
	deleted := time.Now()
	if _, err := store.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, "gone"), nodestore.Delete(nodestore.Statuses, "gone")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the orphan to be collected", func() bool { _, ok := get("orphan"); return !ok })
	if d := time.Since(deleted); d < quarantine {
		t.Errorf("orphan removed %s after its node, before the %s quarantine", d, quarantine)
	}
	waitFor(t, 10*time.Second, "the orphan's DELETED event", func() bool { return seen("DELETED", "orphan", nil) != nil })
	last := seen("DELETED", "orphan", nil)
	var gc *podv1.PodCondition
	for _, c := range last.GetStatus().GetConditions() {
		if c.GetType() == podlife.DisruptionTarget {
			gc = c
		}
	}
	if last.GetStatus().GetPhase() != podlife.PhaseFailed || gc.GetReason() != podlife.ReasonPodGC || gc.GetMessage() != podlife.MessagePodGCOrphan {
		t.Errorf("orphan's last state %v, want Failed with DeletionByPodGC", last.GetStatus())
	}
}
