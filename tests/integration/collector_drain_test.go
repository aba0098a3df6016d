// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/collector/app"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestCollectorDrain runs two collectors on one etcd and stops one: its
// reporters are told to reconnect and move to the other collector, which
// takes over their lease checkpoints, and the stopped one leaves discovery.
func TestCollectorDrain(t *testing.T) {
	cl := etcdtest.Start(t)
	store := etcdtest.NewStore(t, cl)
	a := startCollector(t, store, "", nil)
	// B checkpoints every 3 s: a node that arrives with a fresh stored
	// lease (A's drain flushed them all) is first written at its phase.
	b := startCollector(t, store, "", func(c *app.Config) { c.Persist.CheckpointInterval = 3 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eventually(t, "both collectors in discovery", func() bool {
		objs, _, err := store.List(ctx, nodestore.Collectors, nodestore.ListOptions{})
		return err == nil && len(objs) == 2
	})

	// Each sees the other as a peer to send refused registrations to.
	for _, c := range []*runningCollector{a, b} {
		eventually(t, c.ID()+" counts one peer", func() bool { return scrape(t, c.AdminAddr(), "nodepulse_collector_peers") == 1 })
	}

	names := []string{"node-d1", "node-d2", "node-d3"}
	reps := map[string]*testReporter{}
	for _, n := range names {
		r, ack, err := openReport(t, ctx, dial(t, a.GRPCAddr(), "", ""), n)
		if err != nil || ack.GetCollectorId() != a.ID() {
			t.Fatalf("register %s on A: %v %v", n, ack, err)
		}
		if _, err := r.lease(time.Now()); err != nil {
			t.Fatal(err)
		}
		reps[n] = r
	}

	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()

	// Each reporter renews until A tells it to reconnect (or ends the
	// stream), then moves to B, as a real reporter's failover does.
	for _, n := range names {
		r := reps[n]
		for r.reconnect == nil {
			if _, err := r.lease(time.Now()); err != nil {
				break // A ended the stream: move now
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r.reconnect != nil && r.reconnect.GetWithin().AsDuration() <= 0 {
			t.Fatalf("reconnect without a window: %v", r.reconnect)
		}
		_ = r.s.CloseSend()
		nr, ack, err := openReport(t, ctx, dial(t, b.GRPCAddr(), "", ""), n)
		if err != nil || ack.GetCollectorId() != b.ID() || ack.GetNode().GetMetadata().GetUid() == "" {
			t.Fatalf("%s moving to B: %v %v", n, ack, err)
		}
		if a, err := nr.lease(time.Now()); err != nil || a.GetError() != nil {
			t.Fatalf("%s renewing on B: %v %v", n, a, err)
		}
		reps[n] = nr
	}
	if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("collector A stopped with %v", err)
	}
	if n := b.Streams(); n != len(names) {
		t.Fatalf("B holds %d streams, want %d", n, len(names))
	}
	eventually(t, "A gone from discovery", func() bool {
		_, err := store.Get(ctx, nodestore.Collectors, a.ID())
		return errors.Is(err, nodestore.ErrNotFound)
	})
	if _, err := store.Get(ctx, nodestore.Collectors, b.ID()); err != nil {
		t.Fatalf("B not in discovery: %v", err)
	}
	// Alone now: B no longer refuses registrations for the wait.
	eventually(t, "B counts no peer", func() bool { return scrape(t, b.AdminAddr(), "nodepulse_collector_peers") == 0 })
	// B checkpoints the nodes it took over, at their phase of its interval.
	for _, n := range names {
		eventually(t, n+" lease checkpointed by B", func() bool {
			o, err := store.Get(ctx, nodestore.Leases, n)
			return err == nil && o.Value.(*nodev1.Lease).GetPersistence().GetCollector() == b.ID()
		})
	}
}
