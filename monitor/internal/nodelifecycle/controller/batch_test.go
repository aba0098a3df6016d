// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// countingStore counts Applies by the kind of their first op and their size,
// can fail every Apply that writes health/<conflictOn> with ErrConflict (as
// if someone else had changed that record), and can hold health writes at a
// gate.
type countingStore struct {
	nodestore.Store
	mu         sync.Mutex
	applies    map[nodestore.Kind]int
	singles    map[nodestore.Kind]int
	conflictOn string
	gate       chan struct{}
}

func (s *countingStore) Apply(ctx context.Context, fence *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	s.mu.Lock()
	gate := s.gate
	conflict := false
	if len(ops) > 0 {
		s.applies[ops[0].Kind]++
		if len(ops) == 1 {
			s.singles[ops[0].Kind]++
		}
	}
	for _, op := range ops {
		if op.Kind == nodestore.Health && op.Name == s.conflictOn {
			conflict = true
		}
	}
	s.mu.Unlock()
	if gate != nil && len(ops) > 0 && ops[0].Kind == nodestore.Health {
		<-gate
	}
	if conflict {
		return 0, nodestore.ErrConflict
	}
	return s.Store.Apply(ctx, fence, ops...)
}

func (s *countingStore) count(k nodestore.Kind) (all, singles int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applies[k], s.singles[k]
}

func (s *countingStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applies, s.singles = map[nodestore.Kind]int{}, map[nodestore.Kind]int{}
}

// TestPassBatchesWritesOverManyNodes: a pass that changes 5,000 health
// records and registers 5,000 nodes costs O(nodes/MaxOps) Applies, one
// conflicting node costs only its own write, and the controller's lock is
// free while the writes wait for the store.
func TestPassBatchesWritesOverManyNodes(t *testing.T) {
	const nodes = 5000
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		cs := &countingStore{Store: f.store}
		cs.reset()
		ctl, err := New(testConfig("a"), cs, f.cache, f.live, zap.NewNop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		go ctl.runEvents(ctx)
		chunk := cs.MaxOps() - 1 // one compare is the fence
		maxTxns := (nodes + chunk - 1) / chunk

		takeOver(t, ctx, cs, ctl, 10*time.Second)

		// 5,000 nodes register after the takeover (no lease: nobody renews).
		now := time.Now()
		var ops []nodestore.Op
		for i := range nodes {
			name := fmt.Sprintf("n-%05d", i)
			ops = append(ops, nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name,
				CreationTimestamp: nodemodel.Timestamp(now), Labels: map[string]string{nodemodel.LabelZone: "z1"}}}),
				nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready,
					Status: nodemodel.True, LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)}}}))
		}
		if _, err := nodestore.ApplyChunked(ctx, f.store, nil, ops); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		if err := ctl.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		settle(2 * DefaultEventFlushInterval)
		batches, _, err := f.store.List(ctx, nodestore.EventBatches, nodestore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for _, o := range batches {
			for _, ev := range o.Value.(*nodev1.EventBatch).GetEvents() {
				if ev.GetReason() != "RegisteredNode" || stored[ev.GetInvolvedObject().GetName()] {
					t.Fatalf("unexpected or repeated event in batch %s: %v", o.Name, ev)
				}
				stored[ev.GetInvolvedObject().GetName()] = true
			}
		}
		if len(stored) != nodes {
			t.Fatalf("%d nodes have a stored event, want %d RegisteredNode", len(stored), nodes)
		}
		if got := len(f.cache.Events()); got != nodes {
			t.Errorf("cache serves %d events, want %d", got, nodes)
		}
		maxBatches := (nodes + MaxEventsPerBatch - 1) / MaxEventsPerBatch
		n, _ := cs.count(nodestore.EventBatches)
		t.Logf("%d RegisteredNode events: %d Applies, %d keys", nodes, n, len(batches))
		if n > maxBatches+1 || len(batches) != n {
			t.Errorf("%d event Applies and %d keys for %d events, want one key per Apply and at most %d", n, len(batches), nodes, maxBatches+1)
		}
		if n, _ := cs.count(nodestore.Events); n != 0 {
			t.Errorf("%d single-event Applies, want every node event in a batch", n)
		}
		if n, _ := cs.count(nodestore.Health); n != 0 {
			t.Errorf("%d health Applies in a pass that changed nothing", n)
		}

		// Nobody renews: every node misses its grace period in one pass.
		// health/n-02500 was changed by someone else meanwhile.
		cs.reset()
		cs.mu.Lock()
		cs.conflictOn = "n-02500"
		cs.gate = make(chan struct{})
		cs.mu.Unlock()
		settle(41 * time.Second)
		passDone := make(chan error, 1)
		go func() { passDone <- ctl.Pass(ctx) }()
		synctest.Wait() // the pass waits at the gate, in its first health Txn
		if !ctl.mu.TryLock() {
			t.Fatal("the controller's lock is held while the pass waits for the store")
		}
		ctl.mu.Unlock()
		if !ctl.Leading() || ctl.Paused() != "" {
			t.Fatal("readers blocked or wrong state during the write")
		}
		close(cs.gate)
		if err := <-passDone; err != nil {
			t.Fatal(err)
		}
		all, singles := cs.count(nodestore.Health)
		t.Logf("marking %d nodes: %d health Applies, %d of them single-node", nodes, all, singles)
		if batched := all - singles; batched > maxTxns {
			t.Errorf("%d batched health Applies for %d nodes, want at most %d", batched, nodes, maxTxns)
		}
		if singles > chunk {
			t.Errorf("%d single-node health Applies, want at most %d (the conflicting chunk, node by node)", singles, chunk)
		}
		hs, _, err := f.store.List(ctx, nodestore.Health, nodestore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		marked := map[string]bool{}
		for _, o := range hs {
			if nodemodel.FindCondition(o.Value.(*nodev1.NodeHealth).GetConditionOverrides(), nodemodel.Ready).GetStatus() == nodemodel.Unknown {
				marked[o.Name] = true
			}
		}
		if len(marked) != nodes-1 || marked["n-02500"] {
			t.Fatalf("%d nodes marked Unknown (conflicting one marked: %v), want %d", len(marked), marked["n-02500"], nodes-1)
		}
		if c := testutil.ToFloat64(ctl.m.writes.WithLabelValues("conflict")); c != 1 {
			t.Errorf("conflicts counted = %v, want 1", c)
		}

		// The conflicting node is decided again on the next pass.
		cs.reset()
		cs.mu.Lock()
		cs.conflictOn, cs.gate = "", nil
		cs.mu.Unlock()
		settle(5 * time.Second)
		if err := ctl.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if all, _ := cs.count(nodestore.Health); all != 1 {
			t.Errorf("%d health Applies on the next pass, want 1 (the node that conflicted)", all)
		}
		settle(time.Second)
		if r := f.ready("n-02500"); r.GetStatus() != nodemodel.Unknown {
			t.Fatalf("n-02500 after the next pass: %v", r)
		}
	})
}

func TestApplyIndependentConflictCostsOnlyItsOwnWrite(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Config{MaxOps: 8})
	defer func() { _ = ms.Close() }()
	cs := &countingStore{Store: ms}
	cs.reset()
	var ops []nodestore.Op
	for i := range 20 {
		name := fmt.Sprintf("n%02d", i)
		rev, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Health, name, &nodev1.NodeHealth{NodeName: name}))
		if err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			rev-- // someone else wrote n09 since this revision
		}
		ops = append(ops, nodestore.Op{Kind: nodestore.Health, Name: name, Value: &nodev1.NodeHealth{NodeName: name, Leader: "x"}, IfModRevision: rev})
	}
	res, err := applyIndependent(ctx, cs, nil, ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if (i == 9) != errors.Is(r.err, nodestore.ErrConflict) || (i != 9 && (r.err != nil || r.rev == 0)) {
			t.Errorf("op %d: %+v", i, r)
		}
	}
	// 3 chunks of 8, 8, 4; the one holding n09 again op by op.
	if all, singles := cs.count(nodestore.Health); all != 3+8 || singles != 8 {
		t.Errorf("%d Applies (%d single), want 11 (8 single)", all, singles)
	}
	o, err := ms.Get(ctx, nodestore.Health, "n19")
	if err != nil || o.Value.(*nodev1.NodeHealth).GetLeader() != "x" {
		t.Fatalf("n19 not written after the conflict: %v %v", o.Value, err)
	}

	// A fenced batch stops at once and says so for every op.
	cs.reset()
	res, err = applyIndependent(ctx, cs, &nodestore.Fence{Key: "no-such-leader", Revision: 1}, ops)
	if !errors.Is(err, nodestore.ErrFenced) || !errors.Is(res[19].err, nodestore.ErrFenced) {
		t.Fatalf("fenced: %v, last op %v", err, res[19].err)
	}
	if all, _ := cs.count(nodestore.Health); all != 1 {
		t.Errorf("%d Applies after the fence failed, want 1", all)
	}
}
