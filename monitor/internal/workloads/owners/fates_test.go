// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package owners

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/eviction"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/placement"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podgc"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// world is the monitor's workloads part on memstore under the fake clock:
// the real evictor, pod GC and owner controllers, one leadership. The
// lifecycle controller is played by hand (health records with its
// conditions and taints), the reporters by kubelet below.
type world struct {
	t     *testing.T
	ctx   context.Context
	store *memstore.Store
	cache *cache.Cache
	start time.Time

	mu    sync.Mutex
	alive map[string]bool
}

func newWorld(t *testing.T, ctx context.Context) *world {
	ms := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = ms.Close() })
	c := cache.New(ms, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	go func() { _ = c.Run(ctx) }()
	synctest.Wait()
	return &world{t: t, ctx: ctx, store: ms, cache: c, alive: map[string]bool{}}
}

func (w *world) apply(ops ...nodestore.Op) {
	w.t.Helper()
	if _, err := w.store.Apply(w.ctx, nil, ops...); err != nil {
		w.t.Fatal(err)
	}
	synctest.Wait()
}

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

// run starts the evictor, pod GC and the owner controllers on leader; the
// controllers without the monitor's 100 ms spacing of syncs, so every row
// shows the exact instant of its transition.
func (w *world) run(leader *leadertest.Leader) *Controller {
	ev, err := eviction.New(eviction.Config{}, w.store, w.cache, leader, zap.NewNop(), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	gc, err := podgc.New(podgc.Config{}, w.store, w.cache, leader, zap.NewNop(), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	oc := New(Config{Admission: admission.DefaultConfig()}, w.store, w.cache, CacheSource{Cache: w.cache, StoreSource: StoreSource{Store: w.store}}, leader, zap.NewNop())
	go func() { _ = ev.Run(w.ctx) }()
	go func() { _ = gc.Run(w.ctx) }()
	go func() { _ = oc.Run(w.ctx) }()
	return oc
}

// node stores a Ready node whose reporter (kubelet) runs.
func (w *world) node(name string) {
	w.mu.Lock()
	w.alive[name] = true
	w.mu.Unlock()
	w.apply(
		nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid"}}),
		nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True}}}))
}

// unreachable plays the lifecycle controller for a node whose reporter
// stopped: Ready Unknown, unreachable NoSchedule and NoExecute.
func (w *world) unreachable(name string) {
	w.mu.Lock()
	w.alive[name] = false
	w.mu.Unlock()
	now := nodemodel.Timestamp(time.Now())
	w.apply(nodestore.Put(nodestore.Health, name, &nodev1.NodeHealth{NodeName: name,
		ConditionOverrides: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.Unknown}},
		Taints: []*nodev1.Taint{
			{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoSchedule, TimeAdded: now},
			{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute, TimeAdded: now}}}))
}

// returns: the reporter is back; the lifecycle controller clears its record.
func (w *world) returns(name string) {
	w.mu.Lock()
	w.alive[name] = true
	w.mu.Unlock()
	w.apply(nodestore.Delete(nodestore.Health, name))
	w.kubelet()
}

func (w *world) deleteNode(name string) {
	w.apply(nodestore.Delete(nodestore.Nodes, name), nodestore.Delete(nodestore.Statuses, name), nodestore.Delete(nodestore.Health, name))
}

func (w *world) userTaint(name string, t *nodev1.Taint) {
	w.apply(nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid"}, Spec: &nodev1.NodeSpec{Taints: []*nodev1.Taint{t}}}))
}

// kubelet plays the reporters of the live nodes once (spec §13): a pod
// bound to a live node runs and turns Ready; a Terminating one is
// confirmed gone.
func (w *world) kubelet() {
	w.mu.Lock()
	alive := boolMap(w.alive)
	w.mu.Unlock()
	entries, _ := w.cache.Pods()
	for _, e := range entries {
		p := e.Pod
		nn := p.GetSpec().GetNodeName()
		if nn == "" || alive[nn] != "y" {
			continue
		}
		md := p.GetMetadata()
		switch {
		case podlife.IsTerminating(p):
			zero := int64(0)
			_, _, _ = podlife.Delete(w.ctx, w.store, md.GetNamespace(), md.GetName(), podlife.DeleteOptions{GracePeriodSeconds: &zero, UID: md.GetUid()}, time.Now())
		case p.GetStatus().GetPhase() == podlife.PhasePending:
			np := podutil.Stored(p)
			np.Status.Phase = podlife.PhaseRunning
			podutil.SetCondition(np.Status, &podv1.PodCondition{Type: podutil.Ready, Status: nodemodel.True}, time.Now())
			_, _ = w.store.Apply(w.ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: cache.PodKey(md.GetNamespace(), md.GetName()), Value: np, IfModRevision: e.ModRevision})
		}
	}
}

func boolMap(m map[string]bool) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v {
			out[k] = "y"
		}
	}
	return out
}

// runKubelets plays the reporters at every change of the cache.
func (w *world) runKubelets() {
	go func() {
		for w.ctx.Err() == nil {
			ch := w.cache.Changed()
			w.kubelet()
			select {
			case <-ch:
			case <-w.ctx.Done():
			}
		}
	}()
}

var selector = func(app string) *nodev1.LabelSelector {
	return &nodev1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func template(app string) *podv1.PodTemplateSpec {
	g := int64(30)
	return &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: &podv1.PodSpec{TerminationGracePeriodSeconds: &g}}
}

// workloads stores the seeds' set: a ReplicaSet of 3, a StatefulSet of 2,
// a DaemonSet; once they run, a static pod's mirror and a bare pod on n1.
func (w *world) workloads() {
	three, two := int32(3), int32(2)
	w.apply(
		nodestore.Put(nodestore.ReplicaSets, "default/web", &appsv1.ReplicaSet{Metadata: &nodev1.ObjectMeta{Name: "web", Namespace: "default", Uid: "web-uid", Generation: 1},
			Spec: &appsv1.ReplicaSetSpec{Replicas: &three, Selector: selector("web"), Template: template("web")}}),
		nodestore.Put(nodestore.StatefulSets, "default/db", &appsv1.StatefulSet{Metadata: &nodev1.ObjectMeta{Name: "db", Namespace: "default", Uid: "db-uid", Generation: 1},
			Spec: &appsv1.StatefulSetSpec{Replicas: &two, Selector: selector("db"), Template: template("db")}}),
		nodestore.Put(nodestore.DaemonSets, "default/agent", &appsv1.DaemonSet{Metadata: &nodev1.ObjectMeta{Name: "agent", Namespace: "default", Uid: "agent-uid", Generation: 1},
			Spec: &appsv1.DaemonSetSpec{Selector: selector("agent"), Template: template("agent")}}))
	time.Sleep(time.Second)
	synctest.Wait()
	adm := admission.DefaultConfig()
	for _, p := range []*podv1.Pod{
		{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "static-n1", Annotations: map[string]string{"kubernetes.io/config.mirror": "h"},
			OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "v1", Kind: "Node", Name: "n1", Uid: "n1-uid", Controller: true}}},
			Spec: &podv1.PodSpec{NodeName: "n1"}},
		{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "bare"}, Spec: &podv1.PodSpec{NodeName: "n1"}},
	} {
		s, errs := adm.Admit(p, time.Now(), validationLimits())
		if errs.Err() != nil {
			w.t.Fatal(errs.Err())
		}
		w.apply(nodestore.Op{Kind: nodestore.Pods, Name: "default/" + p.Metadata.Name, Value: s, IfAbsent: true})
	}
	time.Sleep(time.Second)
	synctest.Wait()
}

// podsOf returns the stored pods whose name starts with prefix, sorted.
func (w *world) podsOf(prefix string) []*podv1.Pod {
	objs, _, err := w.store.List(w.ctx, nodestore.Pods, nodestore.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []*podv1.Pod
	for _, o := range objs {
		_, name, _ := strings.Cut(o.Name, "/")
		if strings.HasPrefix(name, prefix) {
			p := o.Value.(*podv1.Pod)
			p.Metadata.Name = name
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

// describe is "name@node[:state]" per pod: T terminating, P pending.
func describe(ps []*podv1.Pod) string {
	var parts []string
	for _, p := range ps {
		s := p.GetSpec().GetNodeName()
		if podlife.IsTerminating(p) {
			s += ":T"
		} else if p.GetStatus().GetPhase() == podlife.PhasePending {
			s += ":P"
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// onNode returns where the prefix's pods are, "node[:T|:P]" each, sorted:
// the RS pods have random names, so a row speaks of nodes, not names.
func (w *world) on(prefix string) string { return describe(w.podsOf(prefix)) }

func (w *world) uid(name string) string {
	o, err := w.store.Get(w.ctx, nodestore.Pods, "default/"+name)
	if err != nil {
		return ""
	}
	return o.Value.(*podv1.Pod).GetMetadata().GetUid()
}

func (w *world) dsStatus() string {
	o, err := w.store.Get(w.ctx, nodestore.DaemonSets, "default/agent")
	if err != nil {
		w.t.Fatal(err)
	}
	st := o.Value.(*appsv1.DaemonSet).GetStatus()
	return fmt.Sprintf("desired=%d current=%d ready=%d misscheduled=%d", st.GetDesiredNumberScheduled(), st.GetCurrentNumberScheduled(), st.GetNumberReady(), st.GetNumberMisscheduled())
}

func (w *world) rsStatus() string {
	o, err := w.store.Get(w.ctx, nodestore.ReplicaSets, "default/web")
	if err != nil {
		w.t.Fatal(err)
	}
	st := o.Value.(*appsv1.ReplicaSet).GetStatus()
	return fmt.Sprintf("replicas=%d ready=%d terminating=%d", st.GetReplicas(), st.GetReadyReplicas(), st.GetTerminatingReplicas())
}

// want is one row's expectations: where each kind's pods are.
type want struct {
	web, db, agent, static, bare string
	rs, ds                       string
}

func (w *world) check(when string, wt want, alt ...want) {
	w.t.Helper()
	got := want{web: w.on("web-"), db: w.on("db-"), agent: w.on("agent-"), static: w.on("static-"), bare: w.on("bare"), rs: w.rsStatus(), ds: w.dsStatus()}
	if got != wt && !slices.Contains(alt, got) {
		w.t.Errorf("%s:\n got %+v\nwant %+v", when, got, wt)
	}
}

type step struct {
	at   time.Duration
	do   func(w *world)
	want want
	// alt: other acceptable outcomes (when two replacements race for the
	// emptier node).
	alt []want
	// extra checks of the step.
	also func(w *world, uids map[string]string)
}

// Start state: n1 holds web (one pod), db-0, agent, static-n1, bare; n2
// db-1; each node one web pod and one agent pod.
var healthy = want{web: "n1 n2 n3", db: "n1 n2", agent: "n1 n2 n3", static: "n1", bare: "n1",
	rs: "replicas=3 ready=3 terminating=0", ds: "desired=3 current=3 ready=3 misscheduled=0"}

// Placement is deterministic (fewest pods, then name), so rows name nodes:
// the replacement of n1's web pod goes to n3 (n2 holds db-1 too), and a
// recreated db-0 then to n2 (tie, name first).

// TestPerKindTable is workload-fates' per-kind table (spec §16.6) row by
// row, each event at t=0 on n1 after the workloads run, under the fake
// clock with the defaults: 300 s tolerations, 20 s pod GC period, 40 s
// quarantine.
func TestPerKindTable(t *testing.T) {
	unreachableRows := want{web: "n1 n2 n3", db: "n1 n2", agent: "n1 n2 n3", static: "n1", bare: "n1",
		rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=1"}
	expired := want{web: "n1:T n2 n3 n3", db: "n1:T n2", agent: "n1 n2 n3", static: "n1", bare: "n1:T",
		rs: "replicas=3 ready=3 terminating=1", ds: "desired=2 current=2 ready=2 misscheduled=1"}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{
			name: "node unreachable, toleration expires, node returns",
			steps: []step{
				{at: 0, do: func(w *world) { w.unreachable("n1") }, want: unreachableRows},
				{at: 300*time.Second - time.Millisecond, want: unreachableRows},
				// The ReplicaSet replaces at once, on a Ready node; the
				// StatefulSet's name stays taken; DaemonSet and static
				// pods tolerate for ever; the bare pod waits.
				{at: 300 * time.Second, want: expired},
				{at: time.Hour, want: expired},
				// The reporter returns: it confirms the deletions; the
				// StatefulSet recreates db-0 (a new pod, same name).
				{at: time.Hour, do: func(w *world) { w.returns("n1") }, want: want{web: "n2 n3 n3", db: "n1 n2", agent: "n1 n2 n3", static: "n1", bare: "",
					rs: "replicas=3 ready=3 terminating=0", ds: "desired=3 current=3 ready=3 misscheduled=0"},
					also: func(w *world, uids map[string]string) {
						if w.uid("db-0") == uids["db-0"] {
							w.t.Errorf("db-0 is the old pod, want a new one")
						}
					}},
			},
		},
		{
			name: "node returns before the toleration expires: nothing replaced",
			steps: []step{
				{at: 0, do: func(w *world) { w.unreachable("n1") }, want: unreachableRows},
				{at: 200 * time.Second, do: func(w *world) { w.returns("n1") }, want: healthy},
				{at: time.Hour, want: healthy},
			},
		},
		{
			name: "node object deleted: pod GC after its 40 s quarantine, then owners act",
			steps: []step{
				{at: 0, do: func(w *world) { w.unreachable("n1") }, want: unreachableRows},
				{at: 60 * time.Second, do: func(w *world) { w.deleteNode("n1") }, want: want{web: "n1 n2 n3", db: "n1 n2", agent: "n1 n2 n3", static: "n1", bare: "n1",
					rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=0"}},
				{at: 99 * time.Second, want: want{web: "n1 n2 n3", db: "n1 n2", agent: "n1 n2 n3", static: "n1", bare: "n1",
					rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=0"}},
				// Gone by 60+40+20 s at the latest (quarantine plus one pass);
				// the ReplicaSet and the StatefulSet (same name) replace on
				// n2/n3, the DaemonSet has no node to run on.
				{at: 121 * time.Second, want: want{web: "n2 n3 n3", db: "n2 n2", agent: "n2 n3", static: "", bare: "",
					rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=0"},
					// Pod GC removes web and db-0 in one pass; which of the
					// two the owners see first takes n3.
					alt: []want{{web: "n2 n2 n3", db: "n2 n3", agent: "n2 n3", static: "", bare: "",
						rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=0"}},
					also: func(w *world, uids map[string]string) {
						if u := w.uid("db-0"); u == "" || u == uids["db-0"] {
							w.t.Errorf("db-0 uid %q, want a new pod (old %q)", u, uids["db-0"])
						}
					}},
			},
		},
		{
			name: "out-of-service taint on the unreachable node",
			steps: []step{
				{at: 0, do: func(w *world) { w.unreachable("n1") }, want: unreachableRows},
				// Deleted at once (the evictor); the ReplicaSet replaces at
				// once; pod GC force-deletes the Terminating pods at its next
				// pass (≤ 20 s); the static pod's mirror stays.
				{at: 60 * time.Second, do: func(w *world) {
					w.userTaint("n1", &nodev1.Taint{Key: nodemodel.TaintOutOfService, Value: "nodeshutdown", Effect: nodemodel.NoExecute})
				}, want: want{web: "n1:T n2 n3 n3", db: "n1:T n2", agent: "n1:T n2 n3", static: "n1", bare: "n1:T",
					rs: "replicas=3 ready=3 terminating=1", ds: "desired=2 current=2 ready=2 misscheduled=1"}},
				{at: 81 * time.Second, want: want{web: "n2 n3 n3", db: "n2 n2", agent: "n2 n3", static: "n1", bare: "",
					rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=0"}},
				// Not recreated on n1 while the taint stays.
				{at: time.Hour, want: want{web: "n2 n3 n3", db: "n2 n2", agent: "n2 n3", static: "n1", bare: "",
					rs: "replicas=3 ready=3 terminating=0", ds: "desired=2 current=2 ready=2 misscheduled=0"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				w := newWorld(t, ctx)
				for _, n := range []string{"n1", "n2", "n3"} {
					w.node(n)
				}
				leader := &leadertest.Leader{}
				_, fence := w.campaign("a")
				leader.Lead(fence)
				w.run(leader)
				w.runKubelets()
				w.workloads()
				w.check("start", healthy)
				uids := map[string]string{"db-0": w.uid("db-0")}
				w.start = time.Now()
				for i, st := range tc.steps {
					time.Sleep(time.Until(w.start.Add(st.at)))
					synctest.Wait()
					if st.do != nil {
						st.do(w)
						synctest.Wait()
					}
					w.check(fmt.Sprintf("step %d (t=%s)", i, st.at), st.want, st.alt...)
					if st.also != nil {
						st.also(w, uids)
					}
				}
			})
		})
	}
}

// TestFailoverNoDuplicate: the replacement of an expired pod is created
// once across a leadership switch: the new leader decides from the stored
// state, and the deposed one's writes are fenced off.
func TestFailoverNoDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		for _, n := range []string{"n1", "n2", "n3"} {
			w.node(n)
		}
		la, lb := &leadertest.Leader{}, &leadertest.Leader{}
		sa, fa := w.campaign("a")
		la.Lead(fa)
		w.run(la)
		b := w.run(lb)
		w.runKubelets()
		w.workloads()
		w.check("start", healthy)
		w.start = time.Now()
		w.unreachable("n1")
		time.Sleep(300 * time.Second)
		synctest.Wait()
		if got := w.on("web-"); got != "n1:T n2 n3 n3" {
			t.Fatalf("t=300s: web pods %s", got)
		}
		// Switch: a's session ends, b wins and syncs at once.
		la.Set(false)
		if err := sa.Close(); err != nil {
			t.Fatal(err)
		}
		_, fb := w.campaign("b")
		lb.Lead(fb)
		synctest.Wait()
		if err := b.Sync(ctx, fb); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := w.on("web-"); got != "n1:T n2 n3 n3" {
			t.Fatalf("after the failover: web pods %s, want exactly one replacement", got)
		}
		// The deposed leader's controller cannot write any more.
		a := New(Config{Admission: admission.DefaultConfig()}, w.store, w.cache, CacheSource{Cache: w.cache, StoreSource: StoreSource{Store: w.store}}, la, zap.NewNop())
		lb.SetPaused("test: b holds still while a tries")
		w.apply(nodestore.Delete(nodestore.Pods, "default/"+w.podsOf("web-")[len(w.podsOf("web-"))-1].Metadata.Name))
		if err := a.Sync(ctx, fa); !errors.Is(err, nodestore.ErrFenced) {
			t.Fatalf("deposed leader's sync: %v, want ErrFenced", err)
		}
		lb.SetPaused("")
		time.Sleep(DefaultResync)
		synctest.Wait()
		active := 0
		for _, p := range w.podsOf("web-") {
			if !podlife.IsTerminating(p) {
				active++
			}
		}
		if active != 3 {
			t.Fatalf("%d active web pods, want 3 (b replaced the deleted one once): %s", active, w.on("web-"))
		}
	})
}

// TestPlacementWaitsForANode: a bare pod that fits nowhere stays Pending
// with the upstream reason, and is placed when a node fits.
func TestPlacementWaitsForANode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.node("n1")
		w.node("n2")
		w.node("n3")
		leader := &leadertest.Leader{}
		_, fence := w.campaign("a")
		leader.Lead(fence)
		w.run(leader)
		w.unreachable("n1")
		w.unreachable("n2")
		w.apply(nodestore.Put(nodestore.Nodes, "n3", &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n3", Uid: "n3-uid"}, Spec: &nodev1.NodeSpec{Unschedulable: true,
			Taints: []*nodev1.Taint{{Key: nodemodel.TaintUnschedulable, Effect: nodemodel.NoSchedule}}}}))
		s, _ := admission.DefaultConfig().Admit(&podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "lone"}}, time.Now(), validationLimits())
		w.apply(nodestore.Op{Kind: nodestore.Pods, Name: "default/lone", Value: s, IfAbsent: true})
		time.Sleep(time.Second)
		synctest.Wait()
		p := w.podsOf("lone")[0]
		c := podutil.FindCondition(p.GetStatus(), placement.ConditionPodScheduled)
		wantMsg := "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
		if p.GetSpec().GetNodeName() != "" || c.GetStatus() != nodemodel.False || c.GetReason() != "Unschedulable" || c.GetMessage() != wantMsg {
			t.Fatalf("unplaceable pod: node %q condition %v", p.GetSpec().GetNodeName(), c)
		}
		w.returns("n2")
		time.Sleep(time.Second)
		synctest.Wait()
		p = w.podsOf("lone")[0]
		c = podutil.FindCondition(p.GetStatus(), placement.ConditionPodScheduled)
		if p.GetSpec().GetNodeName() != "n2" || c.GetStatus() != nodemodel.True {
			t.Fatalf("after n2 returned: node %q condition %v", p.GetSpec().GetNodeName(), c)
		}
	})
}

func validationLimits() validation.Limits { return validation.DefaultLimits() }

// TestOwnerDeletedPodsGo: a deleted owner's pods are deleted gracefully
// (background cascading deletion), once.
func TestOwnerDeletedPodsGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		for _, n := range []string{"n1", "n2", "n3"} {
			w.node(n)
		}
		leader := &leadertest.Leader{}
		_, fence := w.campaign("a")
		leader.Lead(fence)
		oc := w.run(leader)
		w.workloads() // no kubelets: pods stay Pending, db-1 never comes
		if got := w.on("web-"); got != "n1:P n2:P n3:P" {
			t.Fatalf("web pods %s", got)
		}
		w.apply(nodestore.Delete(nodestore.ReplicaSets, "default/web"))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := w.on("web-"); got != "n1:T n2:T n3:T" {
			t.Fatalf("web pods after their owner's deletion: %s, want all Terminating", got)
		}
		if got := w.on("db-"); got != "n1:P" {
			t.Fatalf("db pods %s, want db-0 untouched", got)
		}
		if n := testutil.ToFloat64(oc.deleted.WithLabelValues("deleted")); n != 3 {
			t.Errorf("%s{kind=deleted} = %v, want 3", MetricDeleted, n)
		}
		// 3 web, db-0, 3 agent pods were created, and placed with the bare
		// and static pods already bound.
		if n := testutil.ToFloat64(oc.created.WithLabelValues(KindReplicaSet)); n != 3 {
			t.Errorf("%s{kind=ReplicaSet} = %v, want 3", MetricCreated, n)
		}
		if n := testutil.ToFloat64(oc.placed); n != 7 {
			t.Errorf("%s = %v, want 7", MetricPlaced, n)
		}
	})
}
