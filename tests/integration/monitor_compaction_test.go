// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

const (
	compacted     = `nodepulse_monitor_etcd_compactions_total{result="compacted"}`
	compactedRev  = "nodepulse_monitor_etcd_compacted_revision"
	compactionsIv = time.Second
)

// The leading monitor compacts etcd's history every interval to the revision
// of one interval ago; the follower does not. A watch that falls behind the
// compaction (here: the follower cut off from etcd while the fleet changes
// and the leader compacts past those changes) lists again and serves the
// current fleet, and the leader keeps judging nodes across compactions.
func TestMonitorCompactsEtcdHistory(t *testing.T) {
	c := etcdtest.Start(t) // compaction is member-wide: a member of its own
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	f.add("n1", true)
	f.add("n2", true)
	withCompaction := func(cfg *app.Config) { cfg.CompactionInterval = compactionsIv }

	a := startMonitor(t, c, store.Prefix(), "monitor-a", withCompaction)
	waitFor(t, time.Minute, "monitor-a to lead", func() bool { return a.app.Leading() })
	b := startMonitor(t, c, store.Prefix(), "monitor-b", withCompaction)
	waitFor(t, time.Minute, "monitor-b to serve n1", func() bool { return readyOf(getNode(t, b, "n1")).GetStatus() == nodemodel.True })

	// The leader compacts, round after round (the fleet's lease renewals
	// write every second, so every round has new history to discard).
	waitFor(t, time.Minute, "two compactions by the leader", func() bool { return a.metric(t, compacted) >= 2 })
	if _, err := c.Client.Get(context.Background(), store.Prefix(), clientv3.WithRev(1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("read at revision 1 after compactions: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if n := b.metric(t, compacted); n != 0 {
		t.Fatalf("the follower compacted %v times; only the leader compacts", n)
	}

	// The follower loses etcd; meanwhile n3 registers and the leader
	// compacts past it, so the follower's watch cannot resume where it was.
	b.proxy.Cut()
	f.add("n3", true)
	o, err := store.Get(context.Background(), nodestore.Nodes, "n3")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the leader to compact past n3's registration", func() bool {
		return a.metric(t, compactedRev) >= float64(o.ModRevision)
	})
	b.proxy.Heal()
	waitFor(t, time.Minute, "monitor-b, its watch compacted, to list again and serve n3", func() bool {
		return getNode(t, b, "n3") != nil && b.app.Ready() == nil
	})

	// The leader keeps judging across compactions: a node that stops
	// renewing turns Unknown, and both replicas see it.
	f.mu.Lock()
	f.alive["n2"] = false
	f.mu.Unlock()
	before := a.metric(t, compacted)
	waitFor(t, time.Minute, "n2 to turn Unknown on both replicas", func() bool {
		return readyOf(getNode(t, a, "n2")).GetStatus() == nodemodel.Unknown && readyOf(getNode(t, b, "n2")).GetStatus() == nodemodel.Unknown
	})
	if after := a.metric(t, compacted); after <= before {
		t.Fatalf("no compaction while n2 went Unknown (%v then %v compactions)", before, after)
	}
	if readyOf(getNode(t, a, "n1")).GetStatus() != nodemodel.True || readyOf(getNode(t, b, "n3")).GetStatus() != nodemodel.True {
		t.Fatal("n1 and n3 keep renewing and must stay Ready")
	}
}

// After its compactions the leading monitor defragments an etcd member whose
// file holds much more than it uses: here 8 MiB written, rewritten and
// deleted under another prefix, which compaction turns into free pages and
// only a defragmentation returns. The file shrinks and nothing stored is
// lost: the fleet's nodes read back as they were, and the monitor keeps
// serving them.
func TestMonitorDefragmentsEtcd(t *testing.T) {
	c := etcdtest.Start(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	f.add("n1", true)
	f.add("n2", true)

	ctx := context.Background()
	// Three rounds of 4 MiB: bbolt grows its file in steps, and two rounds
	// (8 MiB of values) left it a little under 8 MiB once on a loaded host.
	value := strings.Repeat("x", 4096)
	for round := 0; round < 3; round++ {
		for i := 0; i < 1000; i++ {
			if _, err := c.Client.Put(ctx, fmt.Sprintf("/bloat/%04d", i), value); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.Client.Delete(ctx, "/bloat/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	sizeOf := func() (size, inUse int64) {
		st, err := c.Client.Status(ctx, c.Endpoints[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.DbSize, st.DbSizeInUse
	}
	before, _ := sizeOf()
	if before < 8<<20 {
		t.Fatalf("etcd's file is %d bytes after writing 12 MiB", before)
	}

	a := startMonitor(t, c, store.Prefix(), "monitor-a", func(cfg *app.Config) {
		cfg.CompactionInterval = compactionsIv
		cfg.Defrag.MinSize = 1 << 20
		cfg.Defrag.Settle = 200 * time.Millisecond
	})
	waitFor(t, time.Minute, "a defragmentation by the leader", func() bool {
		return a.metric(t, `nodepulse_monitor_etcd_defrags_total{result="defragmented"}`) >= 1
	})
	after, inUse := sizeOf()
	t.Logf("etcd file %d bytes before, %d after (%d in use)", before, after, inUse)
	if after > before/2 {
		t.Fatalf("etcd's file is %d bytes after the defragmentation, %d before: want it at most half", after, before)
	}
	if got := a.metric(t, "nodepulse_monitor_etcd_defrag_reclaimed_bytes_total"); got <= 0 {
		t.Fatalf("reclaimed bytes metric = %v after a defragmentation", got)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := store.Get(ctx, nodestore.Nodes, n); err != nil {
			t.Fatalf("%s after the defragmentation: %v", n, err)
		}
		waitFor(t, time.Minute, n+" served Ready", func() bool { return readyOf(getNode(t, a, n)).GetStatus() == nodemodel.True })
	}
}
