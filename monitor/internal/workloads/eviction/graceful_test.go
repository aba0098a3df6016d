// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// pod reads a stored pod (nil when gone).
func (w *world) pod(name string) *podv1.Pod {
	o, err := w.store.Get(w.ctx, nodestore.Pods, "default/"+name)
	if err != nil {
		return nil
	}
	return o.Value.(*podv1.Pod)
}

// graceful sets the pod's terminationGracePeriodSeconds as CreatePod's
// admission does (30 s).
func (w *world) graceful(name string) {
	o, err := w.store.Get(w.ctx, nodestore.Pods, "default/"+name)
	if err != nil {
		w.t.Fatal(err)
	}
	p := o.Value.(*podv1.Pod)
	g := podlife.DefaultTerminationGracePeriodSeconds
	p.Spec.TerminationGracePeriodSeconds = &g
	if _, err := w.store.Apply(w.ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: "default/" + name, Value: p, IfModRevision: o.ModRevision}); err != nil {
		w.t.Fatal(err)
	}
}

// userTaints writes the node's own (operator) taints.
func (w *world) userTaints(node string, taints ...*nodev1.Taint) {
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: node, Uid: node + "-uid"}, Spec: &nodev1.NodeSpec{Taints: taints}}
	if _, err := w.store.Apply(w.ctx, nil, nodestore.Put(nodestore.Nodes, node, meta)); err != nil {
		w.t.Fatal(err)
	}
}

// fate is what a step expects of a pod.
type fate int

const (
	live        fate = iota // stored, not terminating
	terminating             // stored with a deletion timestamp
	gone                    // removed
)

func (f fate) String() string { return [...]string{"live", "terminating", "gone"}[f] }

// TestGracefulEviction replays each path of spec §12.3/§12.5 under the fake
// clock: what each pod is at each step.
func TestGracefulEviction(t *testing.T) {
	type step struct {
		at   time.Duration
		do   func(w *world)
		want map[string]fate
	}
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		steps []step
		// marked: pods whose eviction is announced, exactly once each.
		marked int
	}{
		{
			name: "toleration expires: Terminating and kept until a grace-0 delete with its UID",
			setup: func(w *world) {
				w.addPod("web", "n1", "ReplicaSet")
				w.graceful("web")
				w.setTaints("n1", unreachableTaint())
			},
			steps: []step{
				{at: 300*time.Second - time.Millisecond, want: map[string]fate{"web": live}},
				{at: 300 * time.Second, want: map[string]fate{"web": terminating}},
				// Resyncs every 30 s must not evict it again; time passing
				// its deletion timestamp removes nothing.
				{at: time.Hour, want: map[string]fate{"web": terminating}},
				{at: time.Hour, do: func(w *world) {
					zero := int64(0)
					if _, gone, err := podlife.Delete(w.ctx, w.store, "default", "web", podlife.DeleteOptions{GracePeriodSeconds: &zero, UID: "web-uid"}, time.Now()); err != nil || !gone {
						w.t.Fatalf("grace-0 delete with the UID: gone=%v %v", gone, err)
					}
				}, want: map[string]fate{"web": gone}},
			},
			marked: 1,
		},
		{
			name: "node returns before expiry: nothing deleted",
			setup: func(w *world) {
				w.addPod("web", "n1", "ReplicaSet")
				w.graceful("web")
				w.setTaints("n1", unreachableTaint())
			},
			steps: []step{
				{at: 200 * time.Second, do: func(w *world) { w.setTaints("n1") }, want: map[string]fate{"web": live}},
				{at: time.Hour, want: map[string]fate{"web": live}},
			},
		},
		{
			name: "out-of-service NoExecute: untolerating pods at once, static pods stay",
			setup: func(w *world) {
				w.addPod("web", "n1", "ReplicaSet")
				w.graceful("web")
				w.addPod("agent", "n1", "DaemonSet")
				w.graceful("agent")
				w.addPod("static", "n1", "Node")
				w.graceful("static")
			},
			steps: []step{
				{at: time.Second, do: func(w *world) {
					w.userTaints("n1", &nodev1.Taint{Key: nodemodel.TaintOutOfService, Value: "nodeshutdown", Effect: nodemodel.NoExecute})
				}, want: map[string]fate{"web": terminating, "agent": terminating, "static": live}},
				{at: time.Hour, want: map[string]fate{"web": terminating, "agent": terminating, "static": live}},
			},
			marked: 2,
		},
		{
			name: "a pod without a grace period is removed at once",
			setup: func(w *world) {
				w.addPod("web", "n1", "ReplicaSet") // terminationGracePeriodSeconds unset: 0
				w.setTaints("n1", &nodev1.Taint{Key: "example.com/maint", Effect: nodemodel.NoExecute})
			},
			steps:  []step{{at: time.Millisecond, want: map[string]fate{"web": gone}}},
			marked: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				w := newWorld(t, ctx)
				w.addNode("n1")
				leader := &leadertest.Leader{}
				_, fence := w.campaign("a")
				leader.Lead(fence)
				w.runner(leader, nil)
				synctest.Wait()
				start := time.Now()
				tc.setup(w)
				synctest.Wait()
				for i, st := range tc.steps {
					time.Sleep(time.Until(start.Add(st.at)))
					synctest.Wait()
					if st.do != nil {
						st.do(w)
						synctest.Wait()
					}
					for name, want := range st.want {
						p := w.pod(name)
						got := gone
						if p != nil {
							got = live
							if podlife.IsTerminating(p) {
								got = terminating
							}
						}
						if got != want {
							t.Fatalf("step %d (t=%s): pod %s is %s, want %s", i, st.at, name, got, want)
						}
						if got != terminating {
							continue
						}
						// Terminating as upstream: DisruptionTarget, then a
						// deletion timestamp 30 s after it.
						c := podutil.FindCondition(p.GetStatus(), podutil.DisruptionTarget)
						if c.GetStatus() != nodemodel.True || c.GetReason() != podutil.ReasonTaintManager || c.GetMessage() != podutil.MessageTaintManager {
							t.Errorf("pod %s: DisruptionTarget = %v", name, c)
						}
						md := p.GetMetadata()
						if md.GetDeletionGracePeriodSeconds() != 30 || !md.GetDeletionTimestamp().AsTime().Equal(c.GetLastTransitionTime().AsTime().Add(30*time.Second)) {
							t.Errorf("pod %s: deletion at %s grace %d, want 30 s after %s", name, md.GetDeletionTimestamp().AsTime(), md.GetDeletionGracePeriodSeconds(), c.GetLastTransitionTime().AsTime())
						}
						if p.GetStatus().GetPhase() != podutil.PhaseRunning {
							t.Errorf("pod %s: phase %s, want Running (the evictor does not touch it)", name, p.GetStatus().GetPhase())
						}
					}
				}
				marked := 0
				for _, e := range w.cache.Events() {
					if e.GetReason() == EventReason && len(e.GetMessage()) > 7 && e.GetMessage()[:7] == "Marking" {
						marked++
					}
				}
				if marked != tc.marked {
					t.Errorf("%d \"Marking for deletion\" events, want %d", marked, tc.marked)
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}
