// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package persist

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// TestCheckpointCarriesStatusHeartbeat: unchanged statuses are never
// written to status/, so the lease checkpoint carries the latest report's
// heartbeat (whole seconds) for monitors that did not follow the feed. A
// status report alone (the lease stuck) is worth the next checkpoint; a
// checkpoint with nothing new is still skipped.
func TestCheckpointCarriesStatusHeartbeat(t *testing.T) {
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { mem.Close() })
	table := live.New(1 << 10)
	cfg := DefaultConfig()
	cfg.CollectorID = "collector-a"
	p, err := New(cfg, mem, table, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	ctx := context.Background()
	g := table.Attach("n", "uid", clock)
	ref, _ := table.Ref("n", g)
	ref.Renew(clock, 40)
	hb := clock.Add(1500 * time.Millisecond)
	ref.StatusReported(hb, clock)

	read := func() (*nodev1.Lease, int64) {
		t.Helper()
		o, err := mem.Get(ctx, nodestore.Leases, "n")
		if err != nil {
			t.Fatal(err)
		}
		return o.Value.(*nodev1.Lease), o.ModRevision
	}
	p.checkpointBatch(ctx, []dueItem{{name: "n", gen: g}})
	l, rev := read()
	if got := l.GetPersistence().GetStatusHeartbeatTime().AsTime(); !got.Equal(hb.Truncate(time.Second)) {
		t.Fatalf("checkpoint status heartbeat %v, want %v", got, hb.Truncate(time.Second))
	}

	// The lease is stuck; the status is reported again, unchanged.
	ref.StatusReported(hb.Add(5*time.Minute), clock)
	clock = clock.Add(cfg.CheckpointInterval)
	p.checkpointBatch(ctx, []dueItem{{name: "n", gen: g}})
	l, rev2 := read()
	if rev2 == rev || !l.GetPersistence().GetStatusHeartbeatTime().AsTime().Equal(hb.Add(5*time.Minute).Truncate(time.Second)) {
		t.Fatalf("after a status report alone: rev %d -> %d, heartbeat %v", rev, rev2, l.GetPersistence().GetStatusHeartbeatTime().AsTime())
	}
	if !l.GetSpec().GetRenewTime().AsTime().Equal(clock.Add(-cfg.CheckpointInterval)) {
		t.Fatalf("renewTime %v moved without a renewal", l.GetSpec().GetRenewTime().AsTime())
	}

	// Nothing new since: not rewritten.
	clock = clock.Add(cfg.CheckpointInterval)
	p.checkpointBatch(ctx, []dueItem{{name: "n", gen: g}})
	if _, rev3 := read(); rev3 != rev2 {
		t.Fatalf("checkpoint with nothing new rewritten (rev %d -> %d)", rev2, rev3)
	}
}
