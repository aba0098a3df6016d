// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package disruption

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/podlife"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type world struct {
	t     *testing.T
	ctx   context.Context
	store *memstore.Store
	now   time.Time
	ctl   *Controller
}

func newWorld(t *testing.T) *world {
	ms := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = ms.Close() })
	w := &world{t: t, ctx: context.Background(), store: ms, now: t0}
	w.ctl = New(Config{Now: func() time.Time { return w.now }}, ms, StorePods(ms), &leadertest.Leader{}, zap.NewNop())
	return w
}

func (w *world) apply(ops ...nodestore.Op) {
	w.t.Helper()
	if _, err := w.store.Apply(w.ctx, nil, ops...); err != nil {
		w.t.Fatal(err)
	}
}

func ownerRef(kind, name string) *nodev1.OwnerReference {
	return &nodev1.OwnerReference{ApiVersion: "apps/v1", Kind: kind, Name: name, Uid: name + "-uid", Controller: true}
}

// pod stores a Running pod of app=web on node n1, Ready or not.
func (w *world) pod(name string, ready bool, owner *nodev1.OwnerReference) {
	st := nodemodel.False
	if ready {
		st = nodemodel.True
	}
	g := int64(30)
	p := &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid", Labels: map[string]string{"app": "web"}},
		Spec:     &podv1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: &g},
		Status:   &podv1.PodStatus{Phase: podlife.PhaseRunning, Conditions: []*podv1.PodCondition{{Type: "Ready", Status: st}}},
	}
	if owner != nil {
		p.Metadata.OwnerReferences = []*nodev1.OwnerReference{owner}
	}
	w.apply(nodestore.Put(nodestore.Pods, "default/"+name, p))
}

func (w *world) replicaSet(name string, replicas int32) {
	w.apply(nodestore.Put(nodestore.ReplicaSets, "default/"+name, &appsv1.ReplicaSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"},
		Spec:     &appsv1.ReplicaSetSpec{Replicas: &replicas},
	}))
}

func (w *world) pdb(name string, spec *policyv1.PodDisruptionBudgetSpec) {
	if spec.Selector == nil {
		spec.Selector = &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	w.apply(nodestore.Put(nodestore.PodDisruptionBudgets, "default/"+name, &policyv1.PodDisruptionBudget{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid", Generation: 1},
		Spec:     spec,
	}))
}

func (w *world) status(name string) *policyv1.PodDisruptionBudgetStatus {
	w.t.Helper()
	o, err := w.store.Get(w.ctx, nodestore.PodDisruptionBudgets, "default/"+name)
	if err != nil {
		w.t.Fatal(err)
	}
	return o.Value.(*policyv1.PodDisruptionBudget).GetStatus()
}

func (w *world) pass() {
	w.t.Helper()
	if err := w.ctl.Pass(w.ctx, nodestore.Fence{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) evict(name string) (EvictResult, error) {
	return Evict(w.ctx, w.store, "default", name, EvictOptions{}, w.now)
}

func intv(n int32) *policyv1.IntOrString {
	return &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: n}}
}

func pct(s string) *policyv1.IntOrString {
	return &policyv1.IntOrString{Value: &policyv1.IntOrString_StrValue{StrValue: s}}
}

func refusal(t *testing.T, err error, kind RefusalKind) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) || r.Kind != kind {
		t.Fatalf("err = %v, want a refusal of kind %d", err, kind)
	}
	return r
}

// TestMinAvailableOneAtATime: minAvailable=2 over 3 Ready replicas allows
// one eviction; the second is refused (429) until a replacement is Ready.
func TestMinAvailableOneAtATime(t *testing.T) {
	w := newWorld(t)
	w.replicaSet("web", 3)
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		w.pod(n, true, ownerRef("ReplicaSet", "web"))
	}
	w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(2)})

	// Before the controller has seen the budget: still being processed.
	_, err := w.evict("web-a")
	r := refusal(t, err, TooManyRequests)
	if r.RetryAfter != RetryProcessing || r.Message != MessageRefused || r.Cause != "The disruption budget web is still being processed by the server." {
		t.Fatalf("refusal = %+v", r)
	}

	w.pass()
	st := w.status("web")
	if st.GetExpectedPods() != 3 || st.GetDesiredHealthy() != 2 || st.GetCurrentHealthy() != 3 || st.GetDisruptionsAllowed() != 1 || st.GetObservedGeneration() != 1 {
		t.Fatalf("status = %v", st)
	}
	if c := st.GetConditions()[0]; c.GetStatus() != nodemodel.True || c.GetReason() != ReasonSufficientPods {
		t.Fatalf("condition = %v", c)
	}

	res, err := w.evict("web-a")
	if err != nil || res.Budget != "web" || res.Gone || !podlife.IsTerminating(res.Pod) {
		t.Fatalf("evict web-a = %+v, %v", res, err)
	}
	if c := findCond(res.Pod, podlife.DisruptionTarget); c == nil || c.GetReason() != ReasonEvictionAPI || c.GetMessage() != MessageEvictionAPI {
		t.Fatalf("DisruptionTarget = %v", c)
	}
	st = w.status("web")
	if st.GetDisruptionsAllowed() != 0 || st.GetDisruptedPods()["web-a"] == nil {
		t.Fatalf("after the eviction status = %v", st)
	}

	w.now = w.now.Add(time.Second)
	_, err = w.evict("web-b")
	r = refusal(t, err, TooManyRequests)
	if r.Error() != "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 3 currently" || r.RetryAfter != 0 {
		t.Fatalf("refusal = %q", r.Error())
	}
	// The controller sees web-a Terminating: 2 healthy, still none allowed,
	// and web-a leaves disruptedPods (it is confirmed).
	w.pass()
	st = w.status("web")
	if st.GetCurrentHealthy() != 2 || st.GetDisruptionsAllowed() != 0 || len(st.GetDisruptedPods()) != 0 {
		t.Fatalf("status = %v", st)
	}
	_, err = w.evict("web-b")
	r = refusal(t, err, TooManyRequests)
	if r.Cause != "The disruption budget web needs 2 healthy pods and has 2 currently" {
		t.Fatalf("cause = %q", r.Cause)
	}
	// The replacement turns up, not Ready yet: still refused.
	w.pod("web-d", false, ownerRef("ReplicaSet", "web"))
	w.pass()
	if _, err := w.evict("web-b"); err == nil {
		t.Fatal("evicted before the replacement is Ready")
	}
	w.pod("web-d", true, ownerRef("ReplicaSet", "web"))
	w.pass()
	if res, err := w.evict("web-b"); err != nil || res.Budget != "web" {
		t.Fatalf("evict web-b after the replacement = %+v, %v", res, err)
	}
}

func findCond(p *podv1.Pod, typ string) *podv1.PodCondition {
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// TestEvictPaths: the steps of EvictionREST.Create before the budget.
func TestEvictPaths(t *testing.T) {
	t.Run("no budget: deleted gracefully with DisruptionTarget", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, nil)
		res, err := w.evict("a")
		if err != nil || res.Budget != "" || !podlife.IsTerminating(res.Pod) || findCond(res.Pod, podlife.DisruptionTarget) == nil {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("pending pod skips a budget that allows nothing", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, nil)
		o, _ := w.store.Get(w.ctx, nodestore.Pods, "default/a")
		p := o.Value.(*podv1.Pod)
		p.Status.Phase = podlife.PhasePending
		w.apply(nodestore.Put(nodestore.Pods, "default/a", p))
		w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(5)})
		w.pass()
		if res, err := w.evict("a"); err != nil || res.Budget != "" {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("two budgets", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, nil)
		w.pdb("one", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(0)})
		w.pdb("two", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(0)})
		_, err := w.evict("a")
		if r := refusal(t, err, MultipleBudgets); r.Message != MessageMultiple {
			t.Fatal(r)
		}
	})
	t.Run("unhealthy pod under a met budget goes without spending it", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, nil)
		w.pod("b", true, nil)
		w.pod("sick", false, nil)
		w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(2)})
		w.pass()
		res, err := w.evict("sick")
		if err != nil || res.Budget != "" {
			t.Fatalf("%+v %v", res, err)
		}
		if st := w.status("web"); len(st.GetDisruptedPods()) != 0 {
			t.Fatalf("budget spent: %v", st)
		}
	})
	t.Run("unhealthy pod under an unmet budget: IfHealthyBudget refuses, AlwaysAllow lets go", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, nil)
		w.pod("sick", false, nil)
		w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(2)})
		w.pass()
		_, err := w.evict("sick")
		refusal(t, err, TooManyRequests)
		w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(2), UnhealthyPodEvictionPolicy: PolicyAlwaysAllow})
		w.pass()
		if res, err := w.evict("sick"); err != nil || res.Budget != "" {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("uid precondition", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, nil)
		_, err := Evict(w.ctx, w.store, "default", "a", EvictOptions{UID: "other"}, w.now)
		if !errors.Is(err, podlife.ErrPrecondition) {
			t.Fatal(err)
		}
		_, err = w.evict("missing")
		if !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatal(err)
		}
	})
}

// TestComputeExpected: expectedPods and desiredHealthy per kind of budget
// (upstream getExpectedPodCount).
func TestComputeExpected(t *testing.T) {
	for _, tc := range []struct {
		name                                string
		spec                                *policyv1.PodDisruptionBudgetSpec
		expected, desired, healthy, allowed int32
		syncErr                             bool
	}{
		{name: "minAvailable int counts matched pods", spec: &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(1)}, expected: 3, desired: 1, healthy: 2, allowed: 1},
		{name: "maxUnavailable uses the owner's replicas", spec: &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: intv(1)}, expected: 4, desired: 3, healthy: 2, allowed: 0},
		{name: "minAvailable percent rounds up", spec: &policyv1.PodDisruptionBudgetSpec{MinAvailable: pct("30%")}, expected: 4, desired: 2, healthy: 2, allowed: 0},
		{name: "maxUnavailable percent rounds up", spec: &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: pct("30%")}, expected: 4, desired: 2, healthy: 2, allowed: 0},
		{name: "maxUnavailable above the scale floors at 0", spec: &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: intv(9)}, expected: 4, desired: 0, healthy: 2, allowed: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.replicaSet("web", 4)
			w.pod("a", true, ownerRef("ReplicaSet", "web"))
			w.pod("b", true, ownerRef("ReplicaSet", "web"))
			w.pod("c", false, ownerRef("ReplicaSet", "web"))
			w.pdb("web", tc.spec)
			w.pass()
			st := w.status("web")
			if st.GetExpectedPods() != tc.expected || st.GetDesiredHealthy() != tc.desired || st.GetCurrentHealthy() != tc.healthy || st.GetDisruptionsAllowed() != tc.allowed {
				t.Fatalf("status = %v", st)
			}
		})
	}
	t.Run("DaemonSet pods under maxUnavailable fail the sync as upstream", func(t *testing.T) {
		w := newWorld(t)
		w.pod("a", true, ownerRef("DaemonSet", "agent"))
		w.pod("b", true, ownerRef("DaemonSet", "agent"))
		w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: intv(1)})
		w.pass()
		st := w.status("web")
		c := st.GetConditions()[0]
		if st.GetDisruptionsAllowed() != 0 || c.GetReason() != ReasonSyncFailed || c.GetMessage() != `found no controllers for pod "a"` {
			t.Fatalf("status = %v", st)
		}
	})
}

// TestDisruptedPodsExpire: an evicted pod that is neither Terminating nor
// gone two minutes later counts as healthy again (DeletionTimeout).
func TestDisruptedPodsExpire(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"a", "b", "c"} {
		w.pod(n, true, nil)
	}
	w.pdb("web", &policyv1.PodDisruptionBudgetSpec{MinAvailable: intv(1)})
	w.pass()
	o, _ := w.store.Get(w.ctx, nodestore.PodDisruptionBudgets, "default/web")
	pdb := o.Value.(*policyv1.PodDisruptionBudget)
	pdb.Status.DisruptedPods = map[string]*timestamppb.Timestamp{"a": nodemodel.Timestamp(w.now)}
	w.apply(nodestore.Put(nodestore.PodDisruptionBudgets, "default/web", pdb))
	for _, step := range []struct {
		at      time.Duration
		healthy int32
		pending int
	}{{0, 2, 1}, {119 * time.Second, 2, 1}, {121 * time.Second, 3, 0}} {
		w.now = t0.Add(step.at)
		w.pass()
		if st := w.status("web"); st.GetCurrentHealthy() != step.healthy || len(st.GetDisruptedPods()) != step.pending {
			t.Fatalf("at %v: status = %v", step.at, st)
		}
	}
}
