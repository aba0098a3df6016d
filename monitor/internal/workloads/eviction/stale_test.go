// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// frozenMember is the cache's view of the store through an etcd member
// that can be frozen (SIGSTOP): while frozen its watch delivers nothing,
// not even progress notifications, and what it holds back arrives at the
// thaw. Reads and writes by others go to the store itself, as the
// monitor's unary calls reach the quorum through the other members.
type frozenMember struct {
	*memstore.Store
	mu     sync.Mutex
	frozen bool
	thawed chan struct{}
}

func (f *frozenMember) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen, f.thawed = true, make(chan struct{})
}

func (f *frozenMember) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.frozen = false
		close(f.thawed)
	}
}

// gate returns a channel closed at the thaw (nil when not frozen).
func (f *frozenMember) gate() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		return nil
	}
	return f.thawed
}

func (f *frozenMember) Watch(ctx context.Context, afterRev int64) <-chan nodestore.WatchBatch {
	in := f.Store.Watch(ctx, afterRev)
	out := make(chan nodestore.WatchBatch)
	go func() {
		defer close(out)
		for b := range in {
			if g := f.gate(); g != nil {
				select {
				case <-g:
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// staleWorld is a world whose cache watches through a frozenMember.
func newStaleWorld(t *testing.T, ctx context.Context) (*world, *frozenMember) {
	ms := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = ms.Close() })
	fm := &frozenMember{Store: ms}
	c := cache.New(fm, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	go func() { _ = c.Run(ctx) }()
	synctest.Wait()
	return &world{t: t, ctx: ctx, store: ms, cache: c, start: time.Now()}, fm
}

// suiteTolerations are the monitor's default not-ready and unreachable
// tolerations as the robustness suite sets them (5 s).
func suiteTolerations() []*nodev1.Toleration {
	return []*nodev1.Toleration{
		{Key: nodemodel.TaintNotReady, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: secs(5)},
		{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: secs(5)},
	}
}

// staleTimeline is the robustness suite's finding (docs/robustness.md,
// seed 20264587) replayed on the fake clock, up to the lift of the taint:
// node r-1 carries unreachable:NoExecute (its reporter was killed); at 1 s
// two pods are bound to it as it comes back, tolerating the taint for 5 s;
// at 2 s the etcd member the leader's watch is on freezes, for less than
// the stale-watch pause; at 3 s the leader changes health/r-1 (after
// which change, in the finding, the taint was gone). The pods' deletions
// are due at 6 s on the leader's lagging view.
func staleTimeline(t *testing.T, w *world, fm *frozenMember, change func()) *Runner {
	t.Helper()
	w.addNode("r-1")
	w.setTaints("r-1", unreachableTaint())
	leader := &leadertest.Leader{}
	_, fence := w.campaign("monitor-1")
	leader.Lead(fence)
	r := w.runner(leader, prometheus.NewRegistry())
	w.at(time.Second)
	w.addPod("web-1", "r-1", "ReplicaSet", suiteTolerations()...)
	w.addPod("web-2", "r-1", "ReplicaSet", suiteTolerations()...)
	synctest.Wait()
	if s, ok := r.Lookup("default", "web-1"); !ok || !s.FireAt.Equal(w.start.Add(6*time.Second)) {
		t.Fatalf("web-1 schedule = %+v %v, want at 6s", s, ok)
	}
	w.at(2 * time.Second)
	fm.freeze()
	w.at(3 * time.Second)
	change()
	synctest.Wait()
	if n, ok := w.cache.Node("r-1"); !ok || len(NoExecuteTaints(n.GetSpec().GetTaints())) == 0 {
		t.Fatal("the cache saw the change through a frozen member: the test replays nothing")
	}
	return r
}

// TestStaleViewNeverEvictsFromHealedNode: the leader lifts the taint while
// its watch is frozen; at 6 s, 10 s and after the thaw both pods are still
// there: the delete was checked on health/r-1's revision, refused, and the
// node read again from the store, where the taint is gone.
func TestStaleViewNeverEvictsFromHealedNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w, fm := newStaleWorld(t, ctx)
		r := staleTimeline(t, w, fm, func() { w.setTaints("r-1") })
		both := map[string]bool{"web-1": true, "web-2": true}
		w.at(6 * time.Second)
		w.expect("t=6s (toleration out on the stale view; taint lifted at 3s)", both)
		w.at(13 * time.Second)
		w.expect("t=13s (10 s after the lift, as in the finding)", both)
		if n := len(r.OnNode("r-1")); n != 0 {
			t.Errorf("%d deletions still pending on a healed node", n)
		}
		fm.thaw()
		w.at(time.Hour)
		w.expect("t=1h (after the thaw)", both)
		if got := testutil.ToFloat64(r.m.stale); got != 2 {
			t.Errorf("stale decisions = %v, want 2", got)
		}
		if got := testutil.ToFloat64(r.m.executed.WithLabelValues("")); got != 0 {
			t.Errorf("executed = %v, want 0", got)
		}
		cancel()
		synctest.Wait()
	})
}

// TestStaleViewRestartsToleration: the taint is lifted at 3 s and added
// again at 4 s, unseen by the frozen watch. At 6 s the delete is refused;
// the store shows a new taint (a new time added), so the 5 s restart from
// when the runner read it: deleted at 11 s, not at 6 s.
func TestStaleViewRestartsToleration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w, fm := newStaleWorld(t, ctx)
		staleTimeline(t, w, fm, func() {
			w.setTaints("r-1")
			w.at(4 * time.Second)
			w.setTaints("r-1", unreachableTaint())
		})
		both := map[string]bool{"web-1": true, "web-2": true}
		w.at(11*time.Second - time.Millisecond)
		w.expect("t=11s-1ms (the taint of 4 s, read at 6 s, is tolerated for 5 s)", both)
		w.at(11 * time.Second)
		w.expect("t=11s", map[string]bool{"web-1": false, "web-2": false})
		fm.thaw()
		cancel()
		synctest.Wait()
	})
}

// TestStaleViewSameTaintEvictsOnTime: health/r-1 is rewritten at 3 s with
// the same taint (another field changed). The delete at 6 s is refused on
// the revision, the store shows the taint it was decided on, and the pods
// go at 6 s: a lagging view costs a read, not the deadline.
func TestStaleViewSameTaintEvictsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w, fm := newStaleWorld(t, ctx)
		r := staleTimeline(t, w, fm, func() {
			o, err := w.store.Get(ctx, nodestore.Health, "r-1")
			if err != nil {
				t.Fatal(err)
			}
			h := o.Value.(*nodev1.NodeHealth)
			h.Leader = "monitor-1.1"
			if _, err := w.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Health, Name: "r-1", Value: h, IfModRevision: o.ModRevision}); err != nil {
				t.Fatal(err)
			}
		})
		w.at(6*time.Second - time.Millisecond)
		w.expect("t=6s-1ms", map[string]bool{"web-1": true, "web-2": true})
		w.at(6 * time.Second)
		w.expect("t=6s", map[string]bool{"web-1": false, "web-2": false})
		if got := testutil.ToFloat64(r.m.stale); got != 2 {
			t.Errorf("stale decisions = %v, want 2", got)
		}
		fm.thaw()
		cancel()
		synctest.Wait()
	})
}
