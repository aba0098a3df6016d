// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

type world struct {
	t     *testing.T
	ctx   context.Context
	store *memstore.Store
	cache *cache.Cache
	start time.Time
}

func newWorld(t *testing.T, ctx context.Context) *world {
	ms := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = ms.Close() })
	c := cache.New(ms, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	go func() { _ = c.Run(ctx) }()
	synctest.Wait()
	return &world{t: t, ctx: ctx, store: ms, cache: c, start: time.Now()}
}

// campaign wins the election for id and returns its session and fence.
func (w *world) campaign(id string) (nodestore.Session, nodestore.Fence) {
	s, err := w.store.NewSession(w.ctx, 10*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	l, err := w.store.Campaign(w.ctx, s, "monitor", id)
	if err != nil {
		w.t.Fatal(err)
	}
	return s, l.Fence()
}

func (w *world) runner(leader Leader, reg prometheus.Registerer) *Runner {
	r, err := New(Config{}, w.store, w.cache, leader, zap.NewNop(), reg)
	if err != nil {
		w.t.Fatal(err)
	}
	go func() { _ = r.Run(w.ctx) }()
	return r
}

func (w *world) addNode(name string) {
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid"}}
	if _, err := w.store.Apply(w.ctx, nil, nodestore.Put(nodestore.Nodes, name, meta)); err != nil {
		w.t.Fatal(err)
	}
}

// setTaints writes the controller's NoExecute taints of node (as the
// lifecycle controller does in health/).
func (w *world) setTaints(node string, taints ...*nodev1.Taint) {
	for _, t := range taints {
		t.TimeAdded = nodemodel.Timestamp(time.Now())
	}
	h := &nodev1.NodeHealth{NodeName: node, Taints: taints}
	if _, err := w.store.Apply(w.ctx, nil, nodestore.Put(nodestore.Health, node, h)); err != nil {
		w.t.Fatal(err)
	}
}

func unreachableTaint() *nodev1.Taint {
	return &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}
}

// addPod stores a pod owned by kind after admission defaults, as
// PodService would.
func (w *world) addPod(name, node, kind string, tols ...*nodev1.Toleration) {
	p := &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"},
		Spec:     &podv1.PodSpec{NodeName: node, Tolerations: tols},
		Status: &podv1.PodStatus{Phase: podutil.PhaseRunning, Conditions: []*podv1.PodCondition{
			{Type: podutil.Ready, Status: nodemodel.True}}},
	}
	if kind != "" {
		p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{Kind: kind, Name: name + "-owner", Controller: true}}
	}
	admission.DefaultConfig().Apply(p)
	if _, err := w.store.Apply(w.ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: "default/" + name, Value: p, IfAbsent: true}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) exists(name string) bool {
	_, err := w.store.Get(w.ctx, nodestore.Pods, "default/"+name)
	if err != nil && !errors.Is(err, nodestore.ErrNotFound) {
		w.t.Fatal(err)
	}
	return err == nil
}

// at sleeps until start+d and lets everything settle.
func (w *world) at(d time.Duration) {
	time.Sleep(time.Until(w.start.Add(d)))
	synctest.Wait()
}

func (w *world) expect(when string, present map[string]bool) {
	w.t.Helper()
	for name, want := range present {
		if got := w.exists(name); got != want {
			w.t.Errorf("%s: pod %s exists=%v, want %v", when, name, got, want)
		}
	}
}

// TestTimelineByOwnerKind is the seeds' timeline (spec §10) under the fake
// clock: unreachable:NoExecute at t=0; a ReplicaSet pod and a StatefulSet
// pod go at 300s, a pod tolerating 60s at 60s, a pod whose toleration was
// edited to 30s after scheduling still at 300s; DaemonSet and static pods
// stay.
func TestTimelineByOwnerKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.addNode("n1")
		for _, p := range []struct{ name, kind string }{{"web-rs", "ReplicaSet"}, {"db-sts", "StatefulSet"}, {"agent-ds", "DaemonSet"}, {"static", "Node"}, {"edited", "ReplicaSet"}} {
			w.addPod(p.name, "n1", p.kind)
		}
		w.addPod("short", "n1", "ReplicaSet", &nodev1.Toleration{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: secs(60)})
		leader := &leadertest.Leader{}
		_, fence := w.campaign("a")
		leader.Lead(fence)
		reg := prometheus.NewRegistry()
		r := w.runner(leader, reg)
		synctest.Wait()

		w.setTaints("n1", unreachableTaint()) // t=0: the evictor processes it at once
		synctest.Wait()
		if s, ok := r.Lookup("default", "web-rs"); !ok || !s.FireAt.Equal(w.start.Add(300*time.Second)) {
			t.Fatalf("web-rs schedule = %+v %v, want at +300s", s, ok)
		}
		if _, ok := r.Lookup("default", "agent-ds"); ok {
			t.Fatal("DaemonSet pod scheduled for deletion")
		}

		all := map[string]bool{"web-rs": true, "db-sts": true, "agent-ds": true, "static": true, "edited": true, "short": true}
		w.at(60*time.Second - time.Millisecond)
		w.expect("t=60s-1ms", all)
		w.at(60 * time.Second)
		all["short"] = false
		w.expect("t=60s", all)

		// t=100s: the toleration of "edited" drops to 30s; the deletion stays at 300s.
		w.at(100 * time.Second)
		o, err := w.store.Get(ctx, nodestore.Pods, "default/edited")
		if err != nil {
			t.Fatal(err)
		}
		p := o.Value.(*podv1.Pod)
		for _, tol := range p.Spec.Tolerations {
			if tol.GetKey() == nodemodel.TaintUnreachable {
				tol.TolerationSeconds = secs(30)
			}
		}
		if _, err := w.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: "default/edited", Value: p, IfModRevision: o.ModRevision}); err != nil {
			t.Fatal(err)
		}

		w.at(131 * time.Second)
		w.expect("t=131s (edited toleration of 30s must not advance)", all)
		w.at(300*time.Second - time.Millisecond)
		w.expect("t=300s-1ms", all)
		w.at(300 * time.Second)
		all["web-rs"], all["db-sts"], all["edited"] = false, false, false
		w.expect("t=300s", all)
		// Each deletion was announced by an event (they expire after an hour).
		evs := 0
		for _, e := range w.cache.Events() {
			if e.GetReason() == EventReason && e.GetInvolvedObject().GetKind() == "Pod" {
				evs++
			}
		}
		if evs != 4 {
			t.Errorf("TaintManagerEviction events = %d, want 4", evs)
		}
		w.at(3 * time.Hour)
		w.expect("t=3h", all)

		if got := testutil.ToFloat64(r.m.executed.WithLabelValues("")); got != 4 {
			t.Errorf("executed = %v, want 4", got)
		}
		if got := testutil.ToFloat64(r.m.depth); got != 0 {
			t.Errorf("queue depth = %v, want 0", got)
		}
		cancel()
		synctest.Wait()
	})
}

// TestDisruptionTargetBeforeDelete: the last state of an evicted pod, as a
// watcher sees it, carries DisruptionTarget=True/DeletionByTaintManager.
func TestDisruptionTargetBeforeDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.addNode("n1")
		w.addPod("web", "n1", "ReplicaSet")
		leader := &leadertest.Leader{}
		_, fence := w.campaign("a")
		leader.Lead(fence)
		w.runner(leader, nil)
		synctest.Wait()
		_, from := w.cache.Pods()
		w.setTaints("n1", &nodev1.Taint{Key: "example.com/maintenance", Effect: nodemodel.NoExecute}) // not tolerated
		w.at(time.Second)
		changes, _, err := w.cache.PodChangesAfter(from, 100)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ch := range changes {
			types = append(types, ch.Type)
		}
		if len(changes) != 2 || changes[0].Type != cache.Modified || changes[1].Type != cache.Deleted {
			t.Fatalf("changes = %v, want MODIFIED then DELETED", types)
		}
		c := podutil.FindCondition(changes[1].Pod.GetStatus(), podutil.DisruptionTarget)
		if c.GetStatus() != nodemodel.True || c.GetReason() != podutil.ReasonTaintManager || c.GetMessage() != podutil.MessageTaintManager {
			t.Errorf("DisruptionTarget = %v", c)
		}
		cancel()
		synctest.Wait()
	})
}

// TestTaintRemovedCancels: the taint goes at 200s; nothing is deleted.
func TestTaintRemovedCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.addNode("n1")
		w.addPod("web-rs", "n1", "ReplicaSet")
		w.addPod("db-sts", "n1", "StatefulSet")
		leader := &leadertest.Leader{}
		_, fence := w.campaign("a")
		leader.Lead(fence)
		reg := prometheus.NewRegistry()
		r := w.runner(leader, reg)
		synctest.Wait()
		w.setTaints("n1", unreachableTaint())
		synctest.Wait()
		w.at(200 * time.Second)
		w.setTaints("n1")
		synctest.Wait()
		if n := len(r.OnNode("n1")); n != 0 {
			t.Errorf("%d deletions still pending after the taint went", n)
		}
		w.at(time.Hour)
		w.expect("t=1h", map[string]bool{"web-rs": true, "db-sts": true})
		if got := testutil.ToFloat64(r.m.cancelled); got != 2 {
			t.Errorf("cancelled = %v, want 2", got)
		}
		cancel()
		synctest.Wait()
	})
}

// TestFailoverNeverEarlyNeverTwice: leader A processes the taint at 0 and
// is deposed at 100s; B takes over at 110s. The pod is deleted once, by B,
// at 110s+300s — never before 300s, and A's late attempts are fenced.
func TestFailoverNeverEarlyNeverTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.addNode("n1")
		w.addPod("web", "n1", "ReplicaSet")
		la, lb := &leadertest.Leader{}, &leadertest.Leader{}
		sa, fa := w.campaign("a")
		la.Lead(fa)
		ra := w.runner(la, nil)
		rb := w.runner(lb, nil)
		synctest.Wait()
		w.setTaints("n1", unreachableTaint())
		synctest.Wait()
		if s, ok := ra.Lookup("default", "web"); !ok || !s.FireAt.Equal(w.start.Add(300*time.Second)) {
			t.Fatalf("A's schedule = %+v %v", s, ok)
		}
		w.at(100 * time.Second)
		_ = sa.Close() // A's election key goes: its fence no longer holds
		w.at(110 * time.Second)
		_, fb := w.campaign("b")
		lb.Lead(fb)
		synctest.Wait()
		if s, ok := rb.Lookup("default", "web"); !ok || !s.FireAt.Equal(w.start.Add(410*time.Second)) {
			t.Fatalf("B's schedule = %+v %v, want from B's own processing at 110s", s, ok)
		}
		// A still believes it leads (it has not noticed): its firing at 300s
		// is fenced and deletes nothing.
		w.at(300 * time.Second)
		w.expect("t=300s (A deposed, B waits from 110s)", map[string]bool{"web": true})
		w.at(410*time.Second - time.Millisecond)
		w.expect("t=410s-1ms", map[string]bool{"web": true})
		w.at(410 * time.Second)
		w.expect("t=410s", map[string]bool{"web": false})
		if got := testutil.ToFloat64(ra.m.executed.WithLabelValues("")); got != 0 {
			t.Errorf("deposed leader executed %v evictions", got)
		}
		if got := testutil.ToFloat64(rb.m.executed.WithLabelValues("")); got != 1 {
			t.Errorf("new leader executed %v evictions, want 1", got)
		}
		cancel()
		synctest.Wait()
	})
}

// TestFailoverFinishesStartedDeletion: A marked the pod (DisruptionTarget)
// and died before deleting it; B deletes it at once instead of waiting
// another full toleration.
func TestFailoverFinishesStartedDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.addNode("n1")
		w.addPod("web", "n1", "ReplicaSet")
		w.setTaints("n1", unreachableTaint())
		w.at(300 * time.Second)
		// What A wrote at its firing before it crashed.
		o, _ := w.store.Get(ctx, nodestore.Pods, "default/web")
		p := podutil.Stored(o.Value.(*podv1.Pod))
		podutil.SetCondition(p.Status, &podv1.PodCondition{Type: podutil.DisruptionTarget, Status: nodemodel.True,
			Reason: podutil.ReasonTaintManager, Message: podutil.MessageTaintManager}, time.Now())
		if _, err := w.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: "default/web", Value: p, IfModRevision: o.ModRevision}); err != nil {
			t.Fatal(err)
		}
		w.at(310 * time.Second)
		lb := &leadertest.Leader{}
		_, fb := w.campaign("b")
		lb.Lead(fb)
		w.runner(lb, nil)
		w.at(310*time.Second + time.Millisecond)
		w.expect("right after B took over", map[string]bool{"web": false})
		cancel()
		synctest.Wait()
	})
}

// TestPausedDefersFiring: while judgement is paused nothing is deleted;
// the deletion happens once it resumes (later is never early).
func TestPausedDefersFiring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.addNode("n1")
		w.addPod("web", "n1", "ReplicaSet", &nodev1.Toleration{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: secs(60)})
		leader := &leadertest.Leader{}
		_, fence := w.campaign("a")
		leader.Lead(fence)
		w.runner(leader, nil)
		synctest.Wait()
		w.setTaints("n1", unreachableTaint())
		w.at(30 * time.Second)
		leader.SetPaused("etcd watch silent")
		w.at(120 * time.Second)
		w.expect("paused", map[string]bool{"web": true})
		leader.SetPaused("")
		w.at(122 * time.Second)
		w.expect("resumed", map[string]bool{"web": false})
		cancel()
		synctest.Wait()
	})
}
