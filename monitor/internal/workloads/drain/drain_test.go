// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/disruption"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

type world struct {
	t       *testing.T
	ctx     context.Context
	store   *memstore.Store
	cluster StoreCluster

	wg       sync.WaitGroup
	sessions []nodestore.Session

	mu      sync.Mutex
	evicted map[string]int // pod → budget disruptions spent on it
	lines   []string
}

func newWorld(t *testing.T, ctx context.Context) *world {
	ms := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = ms.Close() })
	w := &world{t: t, ctx: ctx, store: ms, evicted: map[string]int{}}
	w.cluster = StoreCluster{Store: ms, Now: time.Now, Evicted: func(ns, name, _ string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.evicted[ns+"/"+name]++
	}}
	return w
}

func (w *world) apply(ops ...nodestore.Op) {
	w.t.Helper()
	if _, err := w.store.Apply(w.ctx, nil, ops...); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) node(name string) {
	w.apply(nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid"}, Spec: &nodev1.NodeSpec{}}))
}

type podOpt func(p *podv1.Pod)

func owned(kind, name string) podOpt {
	return func(p *podv1.Pod) {
		p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{ApiVersion: "apps/v1", Kind: kind, Name: name, Uid: name + "-uid", Controller: true}}
	}
}

func mirror(p *podv1.Pod) {
	p.Metadata.Annotations = map[string]string{validation.MirrorPodAnnotation: "hash"}
	p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{ApiVersion: "v1", Kind: "Node", Name: "n1", Uid: "n1-uid", Controller: true}}
}

func emptyDir(p *podv1.Pod) {
	p.Spec.Volumes = []*podv1.Volume{{Name: "scratch", EmptyDir: &podv1.EmptyDirVolumeSource{}}}
}

func phase(ph string) podOpt { return func(p *podv1.Pod) { p.Status.Phase = ph } }

// pod stores a Running, Ready pod of app=web on node.
func (w *world) pod(name, node string, opts ...podOpt) {
	g := int64(30)
	p := &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid-" + fmt.Sprint(time.Now().UnixNano()), Labels: map[string]string{"app": "web"}},
		Spec:     &podv1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &g},
		Status:   &podv1.PodStatus{Phase: podlife.PhaseRunning, Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}},
	}
	for _, o := range opts {
		o(p)
	}
	w.apply(nodestore.Put(nodestore.Pods, "default/"+name, p))
}

func (w *world) replicaSet(name string, replicas int32) {
	w.apply(nodestore.Put(nodestore.ReplicaSets, "default/"+name, &appsv1.ReplicaSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"}, Spec: &appsv1.ReplicaSetSpec{Replicas: &replicas}}))
}

func (w *world) pdb(minAvailable int32) {
	w.apply(nodestore.Put(nodestore.PodDisruptionBudgets, "default/web", &policyv1.PodDisruptionBudget{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web", Uid: "web-uid", Generation: 1},
		Spec: &policyv1.PodDisruptionBudgetSpec{Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MinAvailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: minAvailable}}},
	}))
}

// lead wins the store's election for id and hands its fence to leader,
// so the controller's fenced writes behave as on a real leader.
func (w *world) lead(leader *leadertest.Leader, id string) nodestore.Leadership {
	w.t.Helper()
	s, err := w.store.NewSession(w.ctx, time.Minute)
	if err != nil {
		w.t.Fatal(err)
	}
	l, err := w.store.Campaign(w.ctx, s, "monitor", id)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, s)
	w.mu.Unlock()
	leader.Lead(l.Fence())
	return l
}

// controller runs a disruption controller following leader.
func (w *world) controller(leader *leadertest.Leader) {
	c := disruption.New(disruption.Config{}, w.store, disruption.StorePods(w.store), leader, zap.NewNop())
	w.wg.Go(func() { _ = c.Run(w.ctx) })
}

// owner plays the ReplicaSet controller and the nodes' reporters: a
// Terminating pod is confirmed gone after 3 s, and its replacement
// <name>-r is created on n2 at once and turns Ready 2 s later.
func (w *world) owner() {
	w.wg.Go(func() {
		seen := map[string]bool{}
		for w.ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			pods, _ := w.cluster.Pods(w.ctx, "n1")
			for _, p := range pods {
				name := p.GetMetadata().GetName()
				if !podlife.IsTerminating(p) || seen[name] {
					continue
				}
				seen[name] = true
				w.pod(name+"-r", "n2", owned("ReplicaSet", "web"), func(p *podv1.Pod) { p.Status.Conditions[0].Status = nodemodel.False })
				w.wg.Go(func() {
					time.Sleep(2 * time.Second)
					w.pod(name+"-r", "n2", owned("ReplicaSet", "web"))
					time.Sleep(time.Second)
					zero := int64(0)
					_, _, _ = podlife.Delete(w.ctx, w.store, "default", name, podlife.DeleteOptions{GracePeriodSeconds: &zero}, time.Now())
				})
			}
		}
	})
}

// stop ends every goroutine of the world (the bubble must end empty).
func (w *world) stop(cancel context.CancelFunc) {
	cancel()
	w.mu.Lock()
	for _, s := range w.sessions {
		_ = s.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

func (w *world) drain(opts Options) Event {
	return Drain(w.ctx, w.cluster, "n1", opts, func(e Event) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.lines = append(w.lines, e.Line())
	})
}

func (w *world) has(line string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.lines, line)
}

func (w *world) cordoned() bool {
	o, err := w.store.Get(w.ctx, nodestore.Nodes, "n1")
	if err != nil {
		w.t.Fatal(err)
	}
	return o.Value.(*nodev1.Node).GetSpec().GetUnschedulable()
}

// TestDrainThroughBudget: minAvailable=2 over 3 Ready replicas on n1. The
// drain evicts one pod at a time (the others are refused with kubectl's
// retry line), each only after the previous replacement is Ready on n2,
// and finishes; every pod spends the budget exactly once.
func TestDrainThroughBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		w := newWorld(t, ctx)
		defer w.stop(cancel)
		w.node("n1")
		w.node("n2")
		w.replicaSet("web", 3)
		for _, n := range []string{"web-a", "web-b", "web-c"} {
			w.pod(n, "n1", owned("ReplicaSet", "web"))
		}
		w.pdb(2)
		leader := &leadertest.Leader{}
		w.lead(leader, "a")
		w.controller(leader)
		w.owner()
		start := time.Now()
		done := w.drain(Options{})
		if !done.Drained || done.Line() != "node/n1 drained" {
			t.Fatalf("done = %+v; lines:\n%s", done, strings.Join(w.lines, "\n"))
		}
		refused := slices.ContainsFunc(w.lines, func(l string) bool {
			return strings.HasPrefix(l, `error when evicting pods/"web-`) && strings.Contains(l, `-n "default" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has `)
		})
		if !refused {
			t.Errorf("no refusal in:\n%s", strings.Join(w.lines, "\n"))
		}
		for _, l := range []string{"node/n1 cordoned", "evicting pod default/web-a", "pod/web-a evicted", "pod/web-b evicted", "pod/web-c evicted"} {
			if !w.has(l) {
				t.Errorf("missing line %q in:\n%s", l, strings.Join(w.lines, "\n"))
			}
		}
		if len(w.evicted) != 3 || w.evicted["default/web-a"] != 1 || w.evicted["default/web-b"] != 1 || w.evicted["default/web-c"] != 1 {
			t.Fatalf("budget spent per pod = %v", w.evicted)
		}
		// One at a time: each eviction waits ≥ 2 s for a replacement to be
		// Ready and for the controller, and a refusal waits 5 s.
		if d := time.Since(start); d < 10*time.Second || d > 40*time.Second {
			t.Fatalf("drain took %v", d)
		}
		// Again: already cordoned, nothing left, drained.
		w.lines = nil
		if done := w.drain(Options{}); !done.Drained || !w.has("node/n1 already cordoned") || len(w.lines) != 2 {
			t.Fatalf("second drain: %+v %q", done, w.lines)
		}
	})
}

// TestDrainTimeout: a budget that never allows (minAvailable=3 over 3)
// and --timeout 5s: the drain stops at 5 s with kubectl's message, the node
// stays cordoned and no pod is evicted.
func TestDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		w := newWorld(t, ctx)
		defer w.stop(cancel)
		w.node("n1")
		w.replicaSet("web", 3)
		for _, n := range []string{"web-a", "web-b", "web-c"} {
			w.pod(n, "n1", owned("ReplicaSet", "web"))
		}
		w.pdb(3)
		leader := &leadertest.Leader{}
		w.lead(leader, "a")
		w.controller(leader)
		time.Sleep(time.Second)
		start := time.Now()
		done := w.drain(Options{Timeout: 5 * time.Second})
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("stopped after %v", d)
		}
		if done.Drained || !strings.Contains(done.Message, "global timeout reached: 5s") ||
			!strings.HasPrefix(done.Message, `error: unable to drain node "n1" due to error: `) {
			t.Fatalf("done = %q", done.Message)
		}
		if !w.cordoned() {
			t.Fatal("node uncordoned")
		}
		if len(w.evicted) != 0 {
			t.Fatalf("evicted %v", w.evicted)
		}
		pods, _ := w.cluster.Pods(ctx, "n1")
		for _, p := range pods {
			if podlife.IsTerminating(p) {
				t.Fatalf("pod %s terminating", p.GetMetadata().GetName())
			}
		}
	})
}

// TestDrainFailover: two monitors' disruption controllers, the leadership
// moving from one to the other during the drain: the drain finishes and no
// pod spends the budget twice (the evictions are recorded in the stored
// status, which the new leader reads).
func TestDrainFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		w := newWorld(t, ctx)
		defer w.stop(cancel)
		w.node("n1")
		w.node("n2")
		w.replicaSet("web", 3)
		for _, n := range []string{"web-a", "web-b", "web-c"} {
			w.pod(n, "n1", owned("ReplicaSet", "web"))
		}
		w.pdb(2)
		a, b := &leadertest.Leader{}, &leadertest.Leader{}
		la := w.lead(a, "a")
		w.controller(a)
		w.controller(b)
		w.owner()
		go func() {
			time.Sleep(7 * time.Second)
			_ = la.Resign(ctx)
			a.Set(false)
			time.Sleep(3 * time.Second) // nobody leads for a while
			w.lead(b, "b")
		}()
		done := w.drain(Options{})
		if !done.Drained {
			t.Fatalf("done = %+v; lines:\n%s", done, strings.Join(w.lines, "\n"))
		}
		for _, n := range []string{"default/web-a", "default/web-b", "default/web-c"} {
			if w.evicted[n] != 1 {
				t.Fatalf("budget spent per pod = %v", w.evicted)
			}
		}
	})
}

// TestFilters: kubectl's filters, in its order, on a node with one pod of
// each kind.
func TestFilters(t *testing.T) {
	ds := "default/ds-pod"
	for _, tc := range []struct {
		name     string
		opts     Options
		errs     []string
		warnings string
		deleted  []string
	}{
		{
			name: "defaults refuse DaemonSet, emptyDir and bare pods",
			errs: []string{"cannot delete Pods that declare no controller (use --force to override): default/bare",
				"cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): " + ds,
				`cannot delete daemonsets.apps "gone" not found: default/orphan-ds`,
				"cannot delete Pods with local storage (use --delete-emptydir-data to override): default/scratch"},
			deleted: []string{"default/done", "default/rs-pod"},
		},
		{
			name:     "--ignore-daemonsets --delete-emptydir-data: bare pod still refused; orphaned DaemonSet pod refused",
			opts:     Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true},
			errs:     []string{"cannot delete Pods that declare no controller (use --force to override): default/bare", `cannot delete daemonsets.apps "gone" not found: default/orphan-ds`},
			warnings: "ignoring DaemonSet-managed Pods: " + ds,
			deleted:  []string{"default/done", "default/rs-pod", "default/scratch"},
		},
		{
			name: "all three flags: everything but the DaemonSet and mirror pods goes",
			opts: Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true},
			// As kubectl, the verdict is the last filter's: the orphaned
			// DaemonSet pod's warning is overwritten by the later "okay".
			warnings: "deleting Pods that declare no controller: default/bare; ignoring DaemonSet-managed Pods: " + ds,
			deleted:  []string{"default/bare", "default/done", "default/orphan-ds", "default/rs-pod", "default/scratch"},
		},
		{
			name:    "--pod-selector limits the pods",
			opts:    Options{Match: func(l map[string]string) bool { return l["tier"] == "front" }},
			deleted: []string{"default/rs-pod"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, t.Context())
			w.apply(nodestore.Put(nodestore.DaemonSets, "default/agent", &appsv1.DaemonSet{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "agent"}}))
			w.pod("ds-pod", "n1", owned("DaemonSet", "agent"))
			w.pod("orphan-ds", "n1", owned("DaemonSet", "gone"))
			w.pod("mirror-n1", "n1", mirror)
			w.pod("scratch", "n1", owned("ReplicaSet", "web"), emptyDir)
			w.pod("bare", "n1")
			w.pod("done", "n1", phase(podlife.PhaseSucceeded))
			w.pod("rs-pod", "n1", owned("ReplicaSet", "web"), func(p *podv1.Pod) { p.Metadata.Labels["tier"] = "front" })
			w.pod("elsewhere", "n2", owned("ReplicaSet", "web"))
			pods, err := w.cluster.Pods(w.ctx, "n1")
			if err != nil {
				t.Fatal(err)
			}
			l, err := Filter(w.ctx, w.cluster, pods, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var errs []string
			for _, e := range l.Errors() {
				errs = append(errs, e.Error())
			}
			if !slices.Equal(errs, tc.errs) {
				t.Errorf("errors:\n%q\nwant\n%q", errs, tc.errs)
			}
			if l.Warnings() != tc.warnings {
				t.Errorf("warnings %q, want %q", l.Warnings(), tc.warnings)
			}
			var del []string
			for _, p := range l.Delete() {
				del = append(del, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
			}
			if !slices.Equal(del, tc.deleted) {
				t.Errorf("deleted %q, want %q", del, tc.deleted)
			}
		})
	}
}

// TestRefusalAbortsBeforeEviction: a pod the filters refuse stops the
// drain before anything is evicted; the node stays cordoned.
func TestRefusalAbortsBeforeEviction(t *testing.T) {
	w := newWorld(t, t.Context())
	w.node("n1")
	w.pod("rs-pod", "n1", owned("ReplicaSet", "web"))
	w.pod("bare", "n1")
	done := w.drain(Options{})
	want := `error: unable to drain node "n1" due to error: cannot delete Pods that declare no controller (use --force to override): default/bare, continuing command...`
	if done.Drained || done.Message != want {
		t.Fatalf("done = %q", done.Message)
	}
	if !w.cordoned() || len(w.lines) != 2 {
		t.Fatalf("cordoned %v, lines %q", w.cordoned(), w.lines)
	}
	p, _ := w.cluster.Pod(w.ctx, "default", "rs-pod")
	if podlife.IsTerminating(p) {
		t.Fatal("rs-pod evicted")
	}
	// --disable-eviction with --force deletes both directly.
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.Context())
		w.node("n1")
		zero := int64(0)
		w.pod("bare", "n1")
		done := w.drain(Options{Force: true, DisableEviction: true, GracePeriodSeconds: &zero})
		if !done.Drained || !w.has("deleting pod default/bare") || !w.has("pod/bare deleted") ||
			!w.has("Warning: deleting Pods that declare no controller: default/bare") {
			t.Fatalf("%+v %q", done, w.lines)
		}
	})
}
