// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podlife

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

func i64(v int64) *int64 { return &v }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func pod(node, phase string, tgps *int64) *podv1.Pod {
	return &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "ns", Name: "p", Uid: "u1"},
		Spec:     &podv1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: tgps},
		Status:   &podv1.PodStatus{Phase: phase},
	}
}

func TestGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *podv1.Pod
		req  *int64
		want int64
	}{
		{"request wins", pod("n", PhaseRunning, i64(30)), i64(5), 5},
		{"pod's own", pod("n", PhaseRunning, i64(30)), nil, 30},
		{"nil spec value is 0", pod("n", PhaseRunning, nil), nil, 0},
		{"unscheduled", pod("", PhaseRunning, i64(30)), i64(10), 0},
		{"succeeded", pod("n", PhaseSucceeded, i64(30)), nil, 0},
		{"failed", pod("n", PhaseFailed, i64(30)), i64(7), 0},
		{"negative request", pod("n", PhaseRunning, i64(30)), i64(-3), 1},
		{"negative stored", pod("n", PhaseRunning, i64(-3)), nil, 1},
	} {
		if got := GracePeriod(tc.pod, tc.req); got != tc.want {
			t.Errorf("%s: GracePeriod = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestDelete replays spec §12.2 (upstream BeforeDelete) step by step: each
// case starts from a stored pod, applies requests at given times, and
// checks what is stored after each.
func TestDelete(t *testing.T) {
	type step struct {
		at      time.Duration // after t0
		opts    DeleteOptions
		wantErr error
		gone    bool
		// what is stored afterwards (ignored when gone)
		deleteAt time.Duration
		grace    int64
		gen      int64
	}
	for _, tc := range []struct {
		name  string
		pod   *podv1.Pod
		gen   int64
		steps []step
	}{
		{name: "graceful with the pod's 30 s keeps the record", pod: pod("n", PhaseRunning, i64(30)), gen: 1, steps: []step{
			{at: 0, deleteAt: 30 * time.Second, grace: 30, gen: 2},
		}},
		{name: "generation 0 is not bumped", pod: pod("n", PhaseRunning, i64(30)), steps: []step{
			{at: 0, deleteAt: 30 * time.Second, grace: 30},
		}},
		{name: "grace 0 removes", pod: pod("n", PhaseRunning, i64(30)), steps: []step{
			{opts: DeleteOptions{GracePeriodSeconds: i64(0)}, gone: true},
		}},
		{name: "unscheduled pod is removed", pod: pod("", PhasePending, i64(30)), steps: []step{
			{gone: true},
		}},
		{name: "terminal pod is removed", pod: pod("n", PhaseSucceeded, i64(30)), steps: []step{
			{gone: true},
		}},
		{name: "shorter grace moves the timestamp, longer does not", pod: pod("n", PhaseRunning, i64(30)), steps: []step{
			{at: 0, deleteAt: 30 * time.Second, grace: 30},
			{at: 5 * time.Second, opts: DeleteOptions{GracePeriodSeconds: i64(60)}, deleteAt: 30 * time.Second, grace: 30},
			{at: 5 * time.Second, deleteAt: 30 * time.Second, grace: 30},
			{at: 5 * time.Second, opts: DeleteOptions{GracePeriodSeconds: i64(10)}, deleteAt: 10 * time.Second, grace: 10},
			// 10 - 10 + 2 = 2 s after t0 is before now (8 s): clamped to now, grace 1
			{at: 8 * time.Second, opts: DeleteOptions{GracePeriodSeconds: i64(2)}, deleteAt: 8 * time.Second, grace: 1},
			{at: 9 * time.Second, opts: DeleteOptions{GracePeriodSeconds: i64(0), UID: "u1"}, gone: true},
		}},
		{name: "uid precondition", pod: pod("n", PhaseRunning, i64(30)), steps: []step{
			{opts: DeleteOptions{GracePeriodSeconds: i64(0), UID: "other"}, wantErr: ErrPrecondition},
			{opts: DeleteOptions{GracePeriodSeconds: i64(0), UID: "u1"}, gone: true},
		}},
		{name: "resource version precondition", pod: pod("n", PhaseRunning, i64(30)), steps: []step{
			{opts: DeleteOptions{ResourceVersion: "999"}, wantErr: ErrPrecondition},
		}},
		{name: "missing pod", pod: nil, steps: []step{
			{wantErr: nodestore.ErrNotFound},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ms := memstore.New(memstore.Config{})
			defer ms.Close()
			if tc.pod != nil {
				tc.pod.Metadata.Generation = tc.gen
				if _, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "ns/p", tc.pod)); err != nil {
					t.Fatal(err)
				}
			}
			for i, s := range tc.steps {
				p, gone, err := Delete(ctx, ms, "ns", "p", s.opts, t0.Add(s.at))
				if s.wantErr != nil {
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("step %d: err = %v, want %v", i, err, s.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if gone != s.gone {
					t.Fatalf("step %d: gone = %v, want %v", i, gone, s.gone)
				}
				o, gerr := ms.Get(ctx, nodestore.Pods, "ns/p")
				if s.gone {
					if !errors.Is(gerr, nodestore.ErrNotFound) {
						t.Fatalf("step %d: pod still stored (%v)", i, gerr)
					}
					continue
				}
				if gerr != nil {
					t.Fatal(gerr)
				}
				sp := o.Value.(*podv1.Pod)
				if got := sp.GetMetadata().GetDeletionTimestamp().AsTime(); !got.Equal(t0.Add(s.deleteAt)) {
					t.Errorf("step %d: deletion timestamp %s, want %s", i, got, t0.Add(s.deleteAt))
				}
				if got := sp.GetMetadata().GetDeletionGracePeriodSeconds(); got != s.grace {
					t.Errorf("step %d: deletion grace %d, want %d", i, got, s.grace)
				}
				if got := sp.GetMetadata().GetGeneration(); got != s.gen {
					t.Errorf("step %d: generation %d, want %d", i, got, s.gen)
				}
				if p.GetMetadata().GetResourceVersion() != strconv.FormatInt(o.ModRevision, 10) {
					t.Errorf("step %d: returned resource version %s, stored at %d", i, p.GetMetadata().GetResourceVersion(), o.ModRevision)
				}
			}
		})
	}
}

func TestForceDeleteMarksFailedFirst(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Config{History: -1})
	defer ms.Close()
	rev0, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "ns/p", pod("gone-node", PhaseRunning, i64(30))))
	if err != nil {
		t.Fatal(err)
	}
	cond := &podv1.PodCondition{Type: DisruptionTarget, Status: nodemodel.True, Reason: ReasonPodGC, Message: MessagePodGCOrphan}
	p, err := ForceDelete(ctx, ms, "ns", "p", "u1", cond, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetStatus().GetPhase() != PhaseFailed || p.GetStatus().GetConditions()[0].GetReason() != ReasonPodGC {
		t.Fatalf("last state %v: want Failed with DeletionByPodGC", p.GetStatus())
	}
	// Two writes, as upstream: the Failed status, then the removal.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var types []nodestore.EventType
	for b := range ms.Watch(wctx, rev0) {
		for _, ev := range b.Events {
			types = append(types, ev.Type)
		}
		if len(types) >= 2 {
			break
		}
	}
	if len(types) != 2 || types[0] != nodestore.PutEvent || types[1] != nodestore.DeleteEvent {
		t.Fatalf("watch saw %v, want put then delete", types)
	}
	// A terminal pod is not marked again, just removed.
	if _, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "ns/q", pod("n", PhaseSucceeded, nil))); err != nil {
		t.Fatal(err)
	}
	q, err := ForceDelete(ctx, ms, "ns", "q", "", nil, nil, t0)
	if err != nil || q.GetStatus().GetPhase() != PhaseSucceeded {
		t.Fatalf("terminal pod: %v, %v", q.GetStatus(), err)
	}
}

// TestDeleteUnchanged: with checks, neither write (the condition, then the
// deletion) lands once a checked object changed, and the error says so
// (ErrStale), not that the pod changed.
func TestDeleteUnchanged(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Config{History: -1})
	defer ms.Close()
	h1, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Health, "n", &nodev1.NodeHealth{NodeName: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "ns/p", pod("n", PhaseRunning, i64(30))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Health, "n", &nodev1.NodeHealth{NodeName: "n", Leader: "b"})); err != nil {
		t.Fatal(err)
	}
	cond := &podv1.PodCondition{Type: DisruptionTarget, Status: nodemodel.True, Reason: "DeletionByTaintManager"}
	opts := DeleteOptions{UID: "u1", ResourceVersion: strconv.FormatInt(prev, 10), Condition: cond,
		Unchanged: []nodestore.Op{nodestore.Unchanged(nodestore.Health, "n", h1)}}
	if _, _, err := Delete(ctx, ms, "ns", "p", opts, t0); !errors.Is(err, ErrStale) || errors.Is(err, ErrPrecondition) {
		t.Fatalf("delete checked on a stale health revision: %v, want ErrStale", err)
	}
	o, err := ms.Get(ctx, nodestore.Pods, "ns/p")
	if err != nil || o.ModRevision != prev {
		t.Fatalf("pod written although a check failed: %v at %d (was %d)", err, o.ModRevision, prev)
	}
	// Decided again on the current revision: both writes land.
	h, err := ms.Get(ctx, nodestore.Health, "n")
	if err != nil {
		t.Fatal(err)
	}
	opts.Unchanged = []nodestore.Op{nodestore.Unchanged(nodestore.Health, "n", h.ModRevision)}
	p, gone, err := Delete(ctx, ms, "ns", "p", opts, t0)
	if err != nil || gone || !IsTerminating(p) {
		t.Fatalf("delete checked on the current revision: terminating=%v gone=%v %v", IsTerminating(p), gone, err)
	}
	if cs := p.GetStatus().GetConditions(); len(cs) != 1 || cs[0].GetType() != DisruptionTarget {
		t.Fatalf("conditions %v: want DisruptionTarget", cs)
	}
}
