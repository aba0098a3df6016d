// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestMonitorFailover: two monitors on one etcd; the leader dies (cut from
// etcd, then stopped, so it cannot resign); the other leads after the
// election TTL; no node changes state because of the failover; the old
// leader's fence no longer lets anything be written.
func TestMonitorFailover(t *testing.T) {
	c := etcdtest.Start(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	f.add("alive-1", true)
	f.add("alive-2", true)
	f.add("dead", false)

	a := startMonitor(t, c, store.Prefix(), "monitor-a")
	waitFor(t, 30*time.Second, "monitor-a to lead", a.app.Leading)
	b := startMonitor(t, c, store.Prefix(), "monitor-b")
	waitFor(t, 30*time.Second, "the dead node to be Unknown and tainted NoExecute", func() bool {
		n := getNode(t, b, "dead")
		return readyOf(n).GetStatus() == nodemodel.Unknown && nodemodel.HasTaint(n.GetSpec().GetTaints(), nodemodel.TaintUnreachable, nodemodel.NoExecute)
	})
	if b.app.Leading() {
		t.Fatal("two leaders")
	}
	deadBefore := readyOf(getNode(t, b, "dead"))
	oldFence, ok := a.app.Fence()
	if !ok {
		t.Fatal("leader has no fence")
	}

	// Record every change b serves from now on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, err := b.client.WatchNodes(ctx, &nodev1.WatchNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []*nodev1.WatchNodesResponse
	go func() {
		for {
			ev, err := ws.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}()

	// Crash a: cut it off from etcd first so it cannot resign, then stop it.
	a.proxy.Cut()
	a.stop()
	waitFor(t, 30*time.Second, "monitor-b to take over", b.app.Leading)
	// Let b judge for more than two grace periods.
	start := b.passes(t)
	waitFor(t, time.Minute, "monitor-b to run two grace periods of passes", func() bool {
		return b.passes(t)-start > float64(2*monGrace/monPeriod)
	})

	for _, name := range []string{"alive-1", "alive-2"} {
		if r := readyOf(getNode(t, b, name)); r.GetStatus() != nodemodel.True {
			t.Fatalf("%s is %s after the failover", name, r.GetStatus())
		}
	}
	deadAfter := getNode(t, b, "dead")
	if r := readyOf(deadAfter); r.GetStatus() != nodemodel.Unknown || !r.GetLastTransitionTime().AsTime().Equal(deadBefore.GetLastTransitionTime().AsTime()) {
		t.Fatalf("dead node changed in the failover: before %v after %v", deadBefore, r)
	}
	if !nodemodel.HasTaint(deadAfter.GetSpec().GetTaints(), nodemodel.TaintUnreachable, nodemodel.NoExecute) {
		t.Fatal("NoExecute taint lost in the failover")
	}
	mu.Lock()
	for _, ev := range events {
		if n := ev.GetNode(); n.GetMetadata().GetName() != "dead" && readyOf(n).GetStatus() != nodemodel.True {
			t.Errorf("watch saw %s %s with Ready=%s", ev.GetType(), n.GetMetadata().GetName(), readyOf(n).GetStatus())
		}
	}
	mu.Unlock()

	// The deposed leader's late write is rejected.
	_, err = store.Apply(context.Background(), &oldFence, nodestore.Put(nodestore.Health, "alive-1", &nodev1.NodeHealth{NodeName: "alive-1", Leader: "monitor-a"}))
	if !errors.Is(err, nodestore.ErrFenced) {
		t.Fatalf("write with the old leader's fence: %v, want ErrFenced", err)
	}
	h, err := store.Get(context.Background(), nodestore.Health, "dead")
	if err != nil {
		t.Fatal(err)
	}
	if w := h.Value.(*nodev1.NodeHealth).GetLeader(); w != "monitor-a" && w != "monitor-b" {
		t.Errorf("health written by %q", w)
	}
}

// TestMonitorWatchCutLongerThanGrace: the monitor loses etcd for several
// grace periods while the nodes keep renewing; it must pause judgement and
// mark nobody Unknown, before or after it reconnects.
func TestMonitorWatchCutLongerThanGrace(t *testing.T) {
	c := etcdtest.Start(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	f.add("n1", true)
	f.add("n2", true)
	m := startMonitor(t, c, store.Prefix(), "monitor-m")
	waitFor(t, 30*time.Second, "monitor to lead and serve Ready nodes", func() bool {
		return m.app.Leading() && readyOf(getNode(t, m, "n1")).GetStatus() == nodemodel.True
	})

	m.proxy.Cut()
	waitFor(t, 30*time.Second, "judgement to pause (readiness false)", func() bool { return m.app.Ready() != nil })
	cutAt := time.Now()
	waitFor(t, time.Minute, "three grace periods of blindness", func() bool { return time.Since(cutAt) > 3*monGrace })
	m.proxy.Heal()
	waitFor(t, time.Minute, "the monitor to lead and judge again", func() bool { return m.app.Leading() && m.app.Ready() == nil })
	start := m.passes(t)
	waitFor(t, time.Minute, "two grace periods of passes after the cut", func() bool {
		return m.passes(t)-start > float64(2*monGrace/monPeriod)
	})
	for _, name := range []string{"n1", "n2"} {
		if r := readyOf(getNode(t, m, name)); r.GetStatus() != nodemodel.True {
			t.Fatalf("%s marked %s because the monitor's own watch was cut", name, r.GetStatus())
		}
	}
	evs, err := m.client.ListEvents(context.Background(), &nodev1.ListEventsRequest{Kind: "Node"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.GetEvents() {
		if e.GetReason() == "NodeNotReady" {
			t.Fatalf("event %s: %s", e.GetReason(), e.GetMessage())
		}
	}
}

// TestMonitorQuietEtcdIsNotStale: with nothing written to etcd, progress
// notifications alone must keep the watch fresh, or an idle fleet would
// pause judgement for no reason.
func TestMonitorQuietEtcdIsNotStale(t *testing.T) {
	c := etcdtest.Start(t)
	store := etcdtest.NewStore(t, c)
	m := startMonitor(t, c, store.Prefix(), "monitor-q")
	waitFor(t, 30*time.Second, "the monitor to lead", m.app.Leading)
	start := m.passes(t)
	// Several watch-staleness bounds (2s) of passes without a single write.
	waitFor(t, time.Minute, "passes over 3 staleness bounds", func() bool {
		return m.passes(t)-start > float64(3*2*time.Second/monPeriod)
	})
	if err := m.app.Ready(); err != nil {
		t.Fatalf("quiet etcd made the monitor pause: %v", err)
	}
	if p := m.metric(t, "nodepulse_monitor_judgement_paused"); p != 0 {
		t.Fatalf("judgement_paused = %v", p)
	}
}
