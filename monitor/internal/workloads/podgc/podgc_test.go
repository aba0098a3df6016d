// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podgc

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
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/podlife"
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

func (w *world) apply(ops ...nodestore.Op) {
	w.t.Helper()
	if _, err := w.store.Apply(w.ctx, nil, ops...); err != nil {
		w.t.Fatal(err)
	}
	synctest.Wait()
}

// node stores a node with a reported Ready status and taints in its spec.
func (w *world) node(name, ready string, taints ...*nodev1.Taint) {
	w.apply(
		nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid"}, Spec: &nodev1.NodeSpec{Taints: taints}}),
		nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: ready}}}))
}

func (w *world) deleteNode(name string) {
	w.apply(nodestore.Delete(nodestore.Nodes, name), nodestore.Delete(nodestore.Statuses, name))
}

// pod stores a running pod on node ("" unscheduled), Terminating when
// terminating (deletion requested at the start, grace 30 s).
func (w *world) pod(name, node string, terminating bool) {
	g := int64(30)
	p := &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"},
		Spec:     &podv1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &g},
		Status:   &podv1.PodStatus{Phase: podlife.PhaseRunning},
	}
	if terminating {
		p.Metadata.DeletionTimestamp = nodemodel.Timestamp(w.start.Add(30 * time.Second))
		p.Metadata.DeletionGracePeriodSeconds = &g
	}
	w.apply(nodestore.Put(nodestore.Pods, "default/"+name, p))
}

func (w *world) exists(name string) bool {
	_, err := w.store.Get(w.ctx, nodestore.Pods, "default/"+name)
	if err != nil && !errors.Is(err, nodestore.ErrNotFound) {
		w.t.Fatal(err)
	}
	return err == nil
}

func outOfServiceTaint() *nodev1.Taint {
	return &nodev1.Taint{Key: nodemodel.TaintOutOfService, Value: "nodeshutdown", Effect: nodemodel.NoExecute}
}

type step struct {
	at time.Duration
	// do runs before the pass at this time.
	do      func(w *world)
	present map[string]bool
}

// TestPaths replays each pod GC path (spec §12.4) pass by pass under the
// fake clock, with the defaults: 40 s quarantine.
func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		max   int
		steps []step
		// deleted: pods whose last state must be Failed, with the
		// DisruptionTarget reason given ("" for none).
		deleted map[string]string
	}{
		{
			name: "out-of-service and not Ready: terminating pods force-deleted, others kept",
			setup: func(w *world) {
				w.node("n1", nodemodel.Unknown, outOfServiceTaint())
				w.pod("term", "n1", true)
				w.pod("live", "n1", false)
			},
			steps:   []step{{at: 0, present: map[string]bool{"term": false, "live": true}}},
			deleted: map[string]string{"term": ""},
		},
		{
			name: "out-of-service with NoSchedule counts too",
			setup: func(w *world) {
				w.node("n1", nodemodel.False, &nodev1.Taint{Key: nodemodel.TaintOutOfService, Effect: nodemodel.NoSchedule})
				w.pod("term", "n1", true)
			},
			steps: []step{{at: 0, present: map[string]bool{"term": false}}},
		},
		{
			name: "out-of-service but Ready: nothing",
			setup: func(w *world) {
				w.node("n1", nodemodel.True, outOfServiceTaint())
				w.pod("term", "n1", true)
			},
			steps: []step{{at: 0, present: map[string]bool{"term": true}}, {at: time.Hour, present: map[string]bool{"term": true}}},
		},
		{
			name: "not Ready without the taint: terminating pods wait for the reporter",
			setup: func(w *world) {
				w.node("n1", nodemodel.Unknown)
				w.pod("term", "n1", true)
			},
			steps: []step{{at: time.Hour, present: map[string]bool{"term": true}}},
		},
		{
			name: "node deleted: pods removed after the quarantine",
			setup: func(w *world) {
				w.node("n1", nodemodel.Unknown)
				w.pod("web", "n1", false)
				w.pod("term", "n1", true)
				w.deleteNode("n1")
			},
			steps: []step{
				{at: 0, present: map[string]bool{"web": true, "term": true}},
				{at: 20 * time.Second, present: map[string]bool{"web": true, "term": true}},
				{at: 40*time.Second - time.Millisecond, present: map[string]bool{"web": true, "term": true}},
				{at: 40 * time.Second, present: map[string]bool{"web": false, "term": false}},
			},
			deleted: map[string]string{"web": podlife.ReasonPodGC, "term": podlife.ReasonPodGC},
		},
		{
			name: "node reappears within the quarantine: pods saved",
			setup: func(w *world) {
				w.pod("web", "n1", false)
			},
			steps: []step{
				{at: 0, present: map[string]bool{"web": true}},
				{at: 20 * time.Second, do: func(w *world) { w.node("n1", nodemodel.True) }, present: map[string]bool{"web": true}},
				{at: 40 * time.Second, present: map[string]bool{"web": true}},
				{at: time.Hour, present: map[string]bool{"web": true}},
			},
		},
		{
			name: "node gone and back and gone again: the quarantine starts over",
			setup: func(w *world) {
				w.pod("web", "n1", false)
			},
			steps: []step{
				{at: 0, present: map[string]bool{"web": true}},
				{at: 20 * time.Second, do: func(w *world) { w.node("n1", nodemodel.True) }, present: map[string]bool{"web": true}},
				{at: 30 * time.Second, do: func(w *world) { w.deleteNode("n1") }, present: map[string]bool{"web": true}},
				{at: 69 * time.Second, present: map[string]bool{"web": true}},
				{at: 70 * time.Second, present: map[string]bool{"web": false}},
			},
		},
		{
			name: "unscheduled terminating pods go, unscheduled live ones stay",
			setup: func(w *world) {
				w.pod("term", "", true)
				w.pod("pending", "", false)
			},
			steps:   []step{{at: 0, present: map[string]bool{"term": false, "pending": true}}},
			deleted: map[string]string{"term": ""},
		},
		{
			name: "deletions per pass are bounded",
			max:  1,
			setup: func(w *world) {
				w.pod("a", "gone", false)
				w.pod("b", "gone", false)
			},
			steps: []step{
				{at: 0, present: map[string]bool{"a": true, "b": true}},
				{at: 40 * time.Second, present: map[string]bool{"a": false, "b": true}},
				{at: 60 * time.Second, present: map[string]bool{"a": false, "b": false}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				w := newWorld(t, ctx)
				tc.setup(w)
				_, from := w.cache.Pods()
				s, err := w.store.NewSession(ctx, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				l, err := w.store.Campaign(ctx, s, "monitor", "a")
				if err != nil {
					t.Fatal(err)
				}
				leader := &leadertest.Leader{}
				leader.Lead(l.Fence())
				reg := prometheus.NewRegistry()
				g, err := New(Config{MaxPerPass: tc.max}, w.store, w.cache, leader, zap.NewNop(), reg)
				if err != nil {
					t.Fatal(err)
				}
				g.mu.Lock()
				g.leading, g.queued = true, map[string]time.Time{}
				g.mu.Unlock()
				for i, st := range tc.steps {
					time.Sleep(time.Until(w.start.Add(st.at)))
					if st.do != nil {
						st.do(w)
					}
					if err := g.Pass(ctx, l.Fence()); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					synctest.Wait()
					for name, want := range st.present {
						if got := w.exists(name); got != want {
							t.Errorf("step %d (t=%s): pod %s exists=%v, want %v", i, st.at, name, got, want)
						}
					}
				}
				changes, _, err := w.cache.PodChangesAfter(from, 1000)
				if err != nil {
					t.Fatal(err)
				}
				last := map[string]*podv1.Pod{}
				for _, ch := range changes {
					if ch.Type == cache.Deleted {
						last[ch.Pod.GetMetadata().GetName()] = ch.Pod
					}
				}
				for name, reason := range tc.deleted {
					p := last[name]
					if p.GetStatus().GetPhase() != podlife.PhaseFailed {
						t.Errorf("pod %s: last phase %q, want Failed", name, p.GetStatus().GetPhase())
					}
					var got string
					for _, c := range p.GetStatus().GetConditions() {
						if c.GetType() == podlife.DisruptionTarget && c.GetStatus() == nodemodel.True {
							got = c.GetReason()
							if c.GetMessage() != podlife.MessagePodGCOrphan {
								t.Errorf("pod %s: DisruptionTarget message %q", name, c.GetMessage())
							}
						}
					}
					if got != reason {
						t.Errorf("pod %s: DisruptionTarget reason %q, want %q", name, got, reason)
					}
				}
				evs := 0
				for _, e := range w.cache.Events() {
					if e.GetSource() == EventSource && e.GetInvolvedObject().GetKind() == "Pod" {
						evs++
					}
				}
				if want := len(last); evs != want {
					t.Errorf("pod GC events = %d, want %d (one per deleted pod)", evs, want)
				}
				if got := int(testutil.ToFloat64(g.failed)); got != 0 {
					t.Errorf("failures = %d", got)
				}
			})
		})
	}
}

// TestRunFollowsLeadership: passes run every Period while leading, the
// first one at once; a follower deletes nothing; a deposed leader's pass is
// fenced.
func TestRunFollowsLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.pod("term", "", true)
		leader := &leadertest.Leader{}
		g, err := New(Config{}, w.store, w.cache, leader, zap.NewNop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = g.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if !w.exists("term") {
			t.Fatal("a follower collected a pod")
		}
		s, err := w.store.NewSession(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l, err := w.store.Campaign(ctx, s, "monitor", "a")
		if err != nil {
			t.Fatal(err)
		}
		leader.Lead(l.Fence())
		synctest.Wait()
		if w.exists("term") {
			t.Fatal("the leader's first pass did not collect the pod at once")
		}
		// Deposed: the election key goes; the next pass is fenced.
		_ = s.Close()
		w.pod("term2", "", true)
		time.Sleep(DefaultPeriod)
		synctest.Wait()
		if !w.exists("term2") {
			t.Fatal("a deposed leader's pass deleted a pod")
		}
		cancel()
		synctest.Wait()
	})
}
