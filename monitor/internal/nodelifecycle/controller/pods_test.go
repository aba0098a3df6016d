// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// podFailStore fails the next n pod writes, as an etcd hiccup would.
type podFailStore struct {
	*sessionStore
	mu    sync.Mutex
	fails int
}

func (s *podFailStore) Apply(ctx context.Context, f *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	s.mu.Lock()
	if s.fails > 0 && len(ops) > 0 && ops[0].Kind == nodestore.Pods {
		s.fails--
		s.mu.Unlock()
		return 0, errors.New("injected: etcd unavailable")
	}
	s.mu.Unlock()
	return s.sessionStore.Apply(ctx, f, ops...)
}

func (f *fleet) addPod(name, node string, ready string) {
	p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"},
		Spec: &podv1.PodSpec{NodeName: node}, Status: &podv1.PodStatus{Phase: podutil.PhaseRunning}}
	if ready != "" {
		p.Status.Conditions = []*podv1.PodCondition{{Type: podutil.Ready, Status: ready, LastTransitionTime: nodemodel.Timestamp(time.Now())}}
	}
	if _, err := f.store.Apply(f.ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: "default/" + name, Value: p, IfAbsent: true}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) podReady(name string) string {
	pe, ok := f.cache.Pod("default", name)
	if !ok {
		f.t.Fatalf("pod %s not in cache", name)
	}
	return podutil.FindCondition(pe.Pod.GetStatus(), podutil.Ready).GetStatus()
}

// TestPodsMarkedNotReady: spec §6.3. At the flip every pod of the node with
// a Ready condition turns Ready=False (a failed marking is retried on later
// passes), pods elsewhere are untouched, and a pod bound later to the
// not-ready node is marked at once.
func TestPodsMarkedNotReady(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("n1", "z1")
		f.addNode("n2", "z1")
		f.addPod("a", "n1", nodemodel.True)
		f.addPod("b", "n1", nodemodel.True)
		f.addPod("no-ready-condition", "n1", "")
		f.addPod("elsewhere", "n2", nodemodel.True)
		fs := &podFailStore{sessionStore: f.store}
		ctl, err := New(testConfig("a"), fs, f.cache, f.live, zap.NewNop(), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = ctl.Run(ctx) }()
		settle(time.Minute)

		// The first two pod writes fail: the flip marks nothing, later
		// passes retry until every pod is marked.
		fs.mu.Lock()
		fs.fails = 2
		fs.mu.Unlock()
		f.setAlive("n1", false)
		deadline := time.Now().Add(2 * time.Minute)
		for f.ready("n1").GetStatus() == nodemodel.True && time.Now().Before(deadline) {
			settle(time.Second)
		}
		flip := time.Now()
		if f.ready("n1").GetStatus() != nodemodel.Unknown {
			t.Fatalf("n1 Ready = %v", f.ready("n1"))
		}
		settle(3 * 5 * time.Second) // a few passes
		for _, p := range []string{"a", "b"} {
			if got := f.podReady(p); got != nodemodel.False {
				t.Errorf("pod %s Ready = %q %s after the flip, want False", p, got, time.Since(flip))
			}
		}
		if f.podReady("elsewhere") != nodemodel.True {
			t.Error("pod on a healthy node was marked")
		}
		if pe, _ := f.cache.Pod("default", "no-ready-condition"); len(pe.Pod.GetStatus().GetConditions()) != 0 {
			t.Error("a Ready condition was invented for a pod without one")
		}
		if got := testutil.ToFloat64(ctl.m.podsNotReady); got != 2 {
			t.Errorf("pods marked = %v, want 2", got)
		}

		// Newly bound to the not-ready node: marked at once, not at a pass.
		f.addPod("late", "n1", nodemodel.True)
		synctest.Wait()
		if got := f.podReady("late"); got != nodemodel.False {
			t.Errorf("newly bound pod Ready = %q, want False at once", got)
		}
		// Bound to the healthy node: untouched.
		f.addPod("late-ok", "n2", nodemodel.True)
		synctest.Wait()
		if f.podReady("late-ok") != nodemodel.True {
			t.Error("pod newly bound to a Ready node was marked")
		}
	})
}

// TestMarkPodsNotReadyAsUpstream states upstream MarkPodsNotReady (spec
// §6.3) rule by rule: only pods with a Ready condition are written; Ready
// turns False keeping reason, message and probe time, with the transition
// time moved only when the status changes; phase and status.reason stay;
// each written pod gets the event Warning NodeNotReady "Node is not ready";
// and the pods of a node whose reporter itself says Ready=False (observed
// False, no flip by the controller) are not touched at all.
func TestMarkPodsNotReadyAsUpstream(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("lost", "z1")
		f.addNode("self-false", "z1")
		t0 := time.Now()
		probe := nodemodel.Timestamp(t0.Add(-time.Minute))
		put := func(name, node string, ready *podv1.PodCondition) {
			p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"},
				Spec: &podv1.PodSpec{NodeName: node}, Status: &podv1.PodStatus{Phase: podutil.PhaseRunning}}
			if ready != nil {
				p.Status.Conditions = []*podv1.PodCondition{ready}
			}
			if _, err := f.store.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "default/"+name, p)); err != nil {
				t.Fatal(err)
			}
		}
		put("ready", "lost", &podv1.PodCondition{Type: podutil.Ready, Status: nodemodel.True, Reason: "PodReady", Message: "all containers ready",
			LastProbeTime: probe, LastTransitionTime: nodemodel.Timestamp(t0)})
		put("already-false", "lost", &podv1.PodCondition{Type: podutil.Ready, Status: nodemodel.False, Reason: "ContainersNotReady",
			LastTransitionTime: nodemodel.Timestamp(t0)})
		put("no-ready", "lost", nil)
		put("on-self-false", "self-false", &podv1.PodCondition{Type: podutil.Ready, Status: nodemodel.True, LastTransitionTime: nodemodel.Timestamp(t0)})
		f.start("a")
		settle(time.Minute)

		// The reporter of self-false reports Ready=False itself (runtime
		// down) while its lease stays fresh.
		now := time.Now()
		var conds []*nodev1.NodeCondition
		for _, typ := range nodemodel.ReporterConditions {
			conds = append(conds, &nodev1.NodeCondition{Type: typ, Status: nodemodel.False, Reason: "KubeletNotReady",
				LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)})
		}
		if _, err := f.store.Apply(ctx, nil, nodestore.Put(nodestore.Statuses, "self-false", &nodev1.NodeStatus{Conditions: conds})); err != nil {
			t.Fatal(err)
		}
		f.setAlive("lost", false)
		deadline := time.Now().Add(2 * time.Minute)
		for f.ready("lost").GetStatus() == nodemodel.True && time.Now().Before(deadline) {
			settle(time.Second)
		}
		flip := time.Now()
		settle(10 * time.Second)
		if f.ready("self-false").GetStatus() != nodemodel.False {
			t.Fatalf("self-false Ready = %v, want the reporter's False", f.ready("self-false"))
		}

		pe, _ := f.cache.Pod("default", "ready")
		c := podutil.FindCondition(pe.Pod.GetStatus(), podutil.Ready)
		if c.GetStatus() != nodemodel.False || c.GetReason() != "PodReady" || c.GetMessage() != "all containers ready" ||
			!c.GetLastProbeTime().AsTime().Equal(probe.AsTime()) {
			t.Errorf("ready pod's condition = %v: want False with reason, message and probe time kept", c)
		}
		if ltt := c.GetLastTransitionTime().AsTime(); ltt.Before(flip.Add(-time.Second)) || ltt.After(flip.Add(time.Second)) {
			t.Errorf("transition time %s, want the flip at about %s", ltt, flip)
		}
		if pe.Pod.GetStatus().GetPhase() != podutil.PhaseRunning || pe.Pod.GetStatus().GetReason() != "" {
			t.Errorf("phase %q reason %q: want Running and no reason (no NodeLost)", pe.Pod.GetStatus().GetPhase(), pe.Pod.GetStatus().GetReason())
		}
		pe, _ = f.cache.Pod("default", "already-false")
		if c := podutil.FindCondition(pe.Pod.GetStatus(), podutil.Ready); !c.GetLastTransitionTime().AsTime().Equal(t0) {
			t.Errorf("already-false pod rewritten: %v", c)
		}
		if pe, _ := f.cache.Pod("default", "no-ready"); len(pe.Pod.GetStatus().GetConditions()) != 0 {
			t.Error("a Ready condition was invented")
		}
		if f.podReady("on-self-false") != nodemodel.True {
			t.Error("pods of a node reporting Ready=False itself were marked; upstream marks only at its own flip")
		}
		var evs []string
		for _, e := range f.cache.Events() {
			if e.GetInvolvedObject().GetKind() == "Pod" {
				evs = append(evs, e.GetInvolvedObject().GetName()+" "+e.GetType()+" "+e.GetReason()+" "+e.GetMessage()+" "+e.GetSource())
			}
		}
		if len(evs) != 1 || evs[0] != "ready Warning NodeNotReady Node is not ready node-controller" {
			t.Errorf("pod events = %q, want one Warning NodeNotReady for the written pod", evs)
		}
	})
}
