// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package persist

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// TestAttachCheckpointWaitsWhileStoredLeaseIsFresh replays a failover on a
// fake clock: three nodes arrive from another collector. The one whose
// stored lease was checkpointed at its last phase is not rewritten at
// attach but at its next phase; the one whose previous holder missed a
// phase, and the one with no stored lease, are written at once. At every
// step, every stored lease stays within the staleness bound it declares.
func TestAttachCheckpointWaitsWhileStoredLeaseIsFresh(t *testing.T) {
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { mem.Close() })
	m := &meter{Store: mem}
	table := live.New(1 << 10)
	cfg := DefaultConfig()
	cfg.CollectorID = "collector-b"
	p, err := New(cfg, m, table, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	ctx := context.Background()
	iv := cfg.CheckpointInterval

	// What collector-a stored: "fresh" at its phase just before now,
	// "stale" one phase earlier (collector-a stopped writing it).
	stored := func(name string, persisted time.Time) nodestore.Op {
		return nodestore.Put(nodestore.Leases, name, &nodev1.Lease{
			Metadata: &nodev1.ObjectMeta{Name: name},
			Spec:     &nodev1.LeaseSpec{HolderIdentity: name, LeaseDurationSeconds: 40, RenewTime: nodemodel.Timestamp(persisted.Add(-3 * time.Second))},
			Persistence: &nodev1.LeasePersistence{Collector: "collector-a", PersistTime: nodemodel.Timestamp(persisted),
				MaxStaleness: durationpb.New(iv + checkpointTick)},
		})
	}
	lastPhase := func(name string) time.Time { return p.nextPhase(name, clock).Add(-iv).Add(100 * time.Millisecond) }
	if _, err := mem.Apply(ctx, nil, stored("fresh", lastPhase("fresh")), stored("stale", lastPhase("stale").Add(-iv))); err != nil {
		t.Fatal(err)
	}
	names := []string{"fresh", "stale", "new"}
	want := map[string]*nodev1.Node{}
	for _, n := range names {
		want[n] = testNode(n, "uid-"+n)
	}
	regs, err := p.registerNames(ctx, names, want)
	if err != nil {
		t.Fatal(err)
	}
	if regs["new"].LeaseFresh != (time.Time{}) || regs["fresh"].LeaseFresh.IsZero() {
		t.Fatalf("LeaseFresh: new %v, fresh %v", regs["new"].LeaseFresh, regs["fresh"].LeaseFresh)
	}
	gens := map[string]uint64{}
	for _, n := range names {
		gens[n] = table.Attach(n, "uid-"+n, clock)
		table.Renew(n, gens[n], clock, 40)
		p.Attach(n, gens[n], regs[n].LeaseFresh)
	}

	holder := func(n string) (*nodev1.Lease, bool) {
		o, err := mem.Get(ctx, nodestore.Leases, n)
		if err != nil {
			return nil, false
		}
		return o.Value.(*nodev1.Lease), true
	}
	writtenAt := map[string]time.Time{}
	end := clock.Add(iv + time.Second)
	for ; clock.Before(end); clock = clock.Add(checkpointTick) {
		for _, n := range names {
			table.Renew(n, gens[n], clock, 40) // a renewal every tick: every checkpoint has news
		}
		for {
			items := p.popDue(clock, m.MaxOps())
			if len(items) == 0 {
				break
			}
			p.checkpointBatch(ctx, items)
		}
		for _, n := range names {
			l, ok := holder(n)
			if !ok {
				t.Fatalf("%s: no stored lease at %s", n, clock)
			}
			if _, seen := writtenAt[n]; !seen && l.GetPersistence().GetCollector() == "collector-b" {
				writtenAt[n] = clock
			}
			if bound := leaseFresh(l); clock.After(bound) {
				t.Fatalf("%s: stored lease outlived its bound %s at %s", n, bound, clock)
			}
		}
	}
	start := end.Add(-iv - time.Second)
	for _, n := range []string{"stale", "new"} {
		if at, ok := writtenAt[n]; !ok || at.After(start.Add(checkpointTick)) {
			t.Errorf("%s: first checkpoint at %v (attached %s), want at once", n, at, start)
		}
	}
	phase := p.nextPhase("fresh", start)
	if at, ok := writtenAt["fresh"]; !ok || at.Before(phase) || at.After(phase.Add(checkpointTick)) {
		t.Errorf("fresh: first checkpoint at %v, want at its phase %s", at, phase)
	}
}
