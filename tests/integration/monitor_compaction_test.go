package integration

import (
	"context"
	"errors"
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
