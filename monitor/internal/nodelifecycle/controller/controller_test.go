// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// fakeLive is a feed tracker with no feeds: liveness comes from leases/.
type fakeLive struct {
	mu    sync.Mutex
	nodes map[string]liveness.Node
	stale bool
}

func (f *fakeLive) Node(name string) liveness.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[name]
}

func (f *fakeLive) AllStale() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stale
}

// sessionStore records the sessions it hands out, so a test can kill the
// process that owns one.
type sessionStore struct {
	*memstore.Store
	mu       sync.Mutex
	sessions []nodestore.Session
}

func (s *sessionStore) NewSession(ctx context.Context, ttl time.Duration) (nodestore.Session, error) {
	ss, err := s.Store.NewSession(ctx, ttl)
	if err == nil {
		s.mu.Lock()
		s.sessions = append(s.sessions, ss)
		s.mu.Unlock()
	}
	return ss, err
}

type fleet struct {
	t     testing.TB
	ctx   context.Context
	store *sessionStore
	cache *cache.Cache
	live  *fakeLive
	mu    sync.Mutex
	alive map[string]bool
}

func testConfig(id string) Config {
	return Config{Lifecycle: lifecycle.DefaultConfig(), MonitorPeriod: 5 * time.Second, TaintPeriod: 100 * time.Millisecond,
		ElectionTTL: 10 * time.Second, WatchStaleAfter: 15 * time.Second, Identity: id}
}

// newFleet starts a store, a cache and a lease renewer (every 10s, the
// reporters' default) for the nodes marked alive. Call inside a bubble.
func newFleet(t testing.TB, ctx context.Context) *fleet {
	ms := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = ms.Close() })
	f := &fleet{t: t, ctx: ctx, store: &sessionStore{Store: ms}, live: &fakeLive{}, alive: map[string]bool{}}
	f.cache = cache.New(f.store, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	go func() { _ = f.cache.Run(ctx) }()
	go f.renew()
	return f
}

func (f *fleet) controller(id string) *Controller {
	c, err := New(testConfig(id), f.store, f.cache, f.live, zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// takeOver makes ctl lead by hand, without Run: it wins the election in
// a session of the given TTL (returned, so a test can end it) and begins
// its leadership, so a test drives passes itself.
func takeOver(tb testing.TB, ctx context.Context, s nodestore.Store, ctl *Controller, ttl time.Duration) nodestore.Session {
	tb.Helper()
	sess, err := s.NewSession(ctx, ttl)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := s.Campaign(ctx, sess, ElectionName, ctl.cfg.Identity)
	if err != nil {
		tb.Fatal(err)
	}
	ctl.begin(l.Fence(), time.Now())
	return sess
}

// fleetTest runs fn in a synctest bubble with a fleet whose goroutines
// (and every controller started with f.start) end with the test.
func fleetTest(t *testing.T, fn func(t *testing.T, ctx context.Context, f *fleet)) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fn(t, ctx, newFleet(t, ctx))
		cancel()
		synctest.Wait()
	})
}

// start runs a controller with identity id until the test ends.
func (f *fleet) start(id string) *Controller {
	c := f.controller(id)
	go func() { _ = c.Run(f.ctx) }()
	return c
}

func (f *fleet) addNode(name, zone string, userTaints ...*nodev1.Taint) {
	now := time.Now()
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid", CreationTimestamp: nodemodel.Timestamp(now),
		Labels: map[string]string{nodemodel.LabelZone: zone}}, Spec: &nodev1.NodeSpec{Taints: userTaints}}
	var conds []*nodev1.NodeCondition
	for _, typ := range nodemodel.ReporterConditions {
		st := nodemodel.False
		if typ == nodemodel.Ready {
			st = nodemodel.True
		}
		conds = append(conds, &nodev1.NodeCondition{Type: typ, Status: st, Reason: "Kubelet", LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)})
	}
	if _, err := f.store.Apply(f.ctx, nil, nodestore.Put(nodestore.Nodes, name, meta),
		nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{Conditions: conds})); err != nil {
		f.t.Fatal(err)
	}
	f.setAlive(name, true)
}

func (f *fleet) setAlive(name string, alive bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive[name] = alive
}

// renew writes leases/<node> for every alive node every 10s, as the
// Kubernetes-style heartbeat path; write errors (store failing) are ignored
// like a collector retrying later.
func (f *fleet) renew() {
	for {
		f.mu.Lock()
		var ops []nodestore.Op
		for n, ok := range f.alive {
			if ok {
				ops = append(ops, nodestore.Put(nodestore.Leases, n, &nodev1.Lease{Spec: &nodev1.LeaseSpec{HolderIdentity: n, RenewTime: nodemodel.Timestamp(time.Now())}}))
			}
		}
		f.mu.Unlock()
		if len(ops) > 0 {
			_, _ = f.store.Apply(f.ctx, nil, ops...)
		}
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

func (f *fleet) node(name string) *nodev1.Node {
	n, ok := f.cache.Node(name)
	if !ok {
		f.t.Fatalf("node %s not in cache", name)
	}
	return n
}

func (f *fleet) ready(name string) *nodev1.NodeCondition {
	return nodemodel.FindCondition(f.node(name).GetStatus().GetConditions(), nodemodel.Ready)
}

func (f *fleet) hasTaint(name, key, effect string) bool {
	return nodemodel.HasTaint(f.node(name).GetSpec().GetTaints(), key, effect)
}

// settle lets every goroutine of the bubble run after a fake-clock jump.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestNodeLifecycleScenario(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		dedicated := &nodev1.Taint{Key: "dedicated", Value: "gpu", Effect: nodemodel.NoSchedule}
		f.addNode("n1", "z1")
		f.addNode("n2", "z1", dedicated)
		f.addNode("n3", "z1")
		ctl := f.start("a")

		settle(2 * time.Minute)
		for _, n := range []string{"n1", "n2", "n3"} {
			if r := f.ready(n); r.GetStatus() != nodemodel.True {
				t.Fatalf("%s not Ready after 2m of renewals: %v", n, r)
			}
		}
		if !ctl.Leading() {
			t.Fatal("single controller is not leading")
		}

		// n1's reporter dies: Unknown after the grace period, then the
		// NoSchedule taint at once and the NoExecute taint a pass later.
		f.setAlive("n1", false)
		settle(70 * time.Second)
		r := f.ready("n1")
		if r.GetStatus() != nodemodel.Unknown || r.GetReason() != nodemodel.ReasonNodeStatusUnknown {
			t.Fatalf("n1 Ready = %v, want Unknown/NodeStatusUnknown", r)
		}
		if !f.hasTaint("n1", nodemodel.TaintUnreachable, nodemodel.NoSchedule) || !f.hasTaint("n1", nodemodel.TaintUnreachable, nodemodel.NoExecute) {
			t.Fatalf("n1 taints = %v", f.node("n1").GetSpec().GetTaints())
		}
		if f.ready("n2").GetStatus() != nodemodel.True || f.ready("n3").GetStatus() != nodemodel.True {
			t.Fatal("healthy nodes changed")
		}
		// User taints are never touched or duplicated.
		if got := f.node("n2").GetSpec().GetTaints(); len(got) != 1 || got[0].GetKey() != "dedicated" {
			t.Fatalf("n2 taints = %v", got)
		}
		if d := testutil.ToFloat64(ctl.m.transitions.WithLabelValues(nodemodel.True, nodemodel.Unknown)); d != 1 {
			t.Errorf("True→Unknown transitions = %v", d)
		}

		// It comes back: Ready again, controller taints gone.
		f.setAlive("n1", true)
		settle(30 * time.Second)
		if r := f.ready("n1"); r.GetStatus() != nodemodel.True {
			t.Fatalf("n1 not Ready after renewing again: %v", r)
		}
		if ts := f.node("n1").GetSpec().GetTaints(); len(ts) != 0 {
			t.Fatalf("n1 keeps taints after recovery: %v", ts)
		}
	})
}

func TestWatchOutageLongerThanGraceMarksNobody(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("n1", "z1")
		f.addNode("n2", "z1")
		ctl := f.start("a")
		settle(time.Minute)

		// etcd unreachable for 3 minutes (> 40s grace): renewals cannot be
		// stored and the watch is silent. The leader must stop judging.
		f.store.Fail(errors.New("etcd unreachable"))
		settle(30 * time.Second)
		if ctl.Paused() == "" {
			t.Fatal("judgement not paused while the watch is silent")
		}
		if testutil.ToFloat64(ctl.m.paused) != 1 {
			t.Error("paused metric not set")
		}
		settle(150 * time.Second)
		f.store.Fail(nil)
		settle(2 * time.Minute)
		if ctl.Paused() != "" {
			t.Fatalf("still paused: %s", ctl.Paused())
		}
		for _, n := range []string{"n1", "n2"} {
			if r := f.ready(n); r.GetStatus() != nodemodel.True {
				t.Fatalf("%s marked because of the monitor's own outage: %v", n, r)
			}
		}
		if u := testutil.ToFloat64(ctl.m.transitions.WithLabelValues(nodemodel.True, nodemodel.Unknown)); u != 0 {
			t.Fatalf("%v nodes went Unknown", u)
		}
	})
}

func TestAllFeedsStaleWithoutLeaseProgressPauses(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("n1", "z1")
		ctl := f.start("a")
		settle(time.Minute)
		// The node renews only over a feed that goes silent: no lease in etcd
		// advances either.
		f.setAlive("n1", false)
		f.live.mu.Lock()
		f.live.stale = true
		f.live.mu.Unlock()
		settle(2 * time.Minute)
		if ctl.Paused() == "" {
			t.Fatal("not paused with every feed stale and no lease progress")
		}
		if r := f.ready("n1"); r.GetStatus() != nodemodel.True {
			t.Fatalf("n1 marked while the monitor was blind: %v", r)
		}
	})
}

func TestFailoverChangesNoNodeAndFencesTheOldLeader(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("alive", "z1")
		f.addNode("alive2", "z1")
		f.addNode("dead", "z1")
		a := f.start("a")
		settle(time.Second)
		f.setAlive("dead", false)
		settle(2 * time.Minute)
		if !a.Leading() || f.ready("dead").GetStatus() != nodemodel.Unknown {
			t.Fatalf("setup: leading=%v dead=%v", a.Leading(), f.ready("dead"))
		}
		before := f.node("dead")
		oldFence, _ := a.Fence()

		b := f.start("b")
		settle(time.Second)
		if b.Leading() {
			t.Fatal("b leads while a is alive")
		}
		// a's process dies: its keep-alive stops, b takes over one TTL later.
		f.store.mu.Lock()
		aSess := f.store.sessions[0]
		f.store.mu.Unlock()
		if err := f.store.KillSession(aSess); err != nil {
			t.Fatal(err)
		}
		settle(testConfig("b").ElectionTTL + time.Second)
		if !b.Leading() {
			t.Fatal("b did not take over within the election TTL")
		}
		settle(2 * time.Minute)
		if r := f.ready("alive"); r.GetStatus() != nodemodel.True {
			t.Fatalf("failover made a live node %s", r.GetStatus())
		}
		after := f.node("dead")
		ra, rb := nodemodel.FindCondition(before.GetStatus().GetConditions(), nodemodel.Ready), nodemodel.FindCondition(after.GetStatus().GetConditions(), nodemodel.Ready)
		if rb.GetStatus() != nodemodel.Unknown || !ra.GetLastTransitionTime().AsTime().Equal(rb.GetLastTransitionTime().AsTime()) {
			t.Fatalf("failover changed the dead node: before %v after %v", ra, rb)
		}
		if !nodemodel.HasTaint(after.GetSpec().GetTaints(), nodemodel.TaintUnreachable, nodemodel.NoExecute) {
			t.Fatalf("NoExecute taint lost in failover: %v", after.GetSpec().GetTaints())
		}
		// The old leader's late write is rejected.
		_, err := f.store.Apply(ctx, &oldFence, nodestore.Put(nodestore.Health, "alive", &nodev1.NodeHealth{NodeName: "alive", Leader: "a"}))
		if !errors.Is(err, nodestore.ErrFenced) {
			t.Fatalf("late write with the old fence: %v, want ErrFenced", err)
		}
	})
}

// TestDeposedLeaderStepsDownOnFencedWrite drives a controller by hand so
// its pass runs after its leadership is gone but before it noticed.
func TestDeposedLeaderStepsDownOnFencedWrite(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("n1", "z1")
		f.addNode("n2", "z1")
		settle(time.Second)
		a := f.controller("a")
		sess := takeOver(t, ctx, f.store, a, 10*time.Second)
		if err := a.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		f.setAlive("n1", false)
		settle(time.Minute) // n1 is now past its grace period in a's records
		if err := f.store.ExpireSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		err := a.Pass(ctx)
		if !errors.Is(err, errLost) {
			t.Fatalf("pass after losing leadership: %v, want errLost", err)
		}
		if testutil.ToFloat64(a.m.fenced) != 1 {
			t.Error("fenced write not counted")
		}
		if r := f.ready("n1"); r.GetStatus() != nodemodel.True {
			t.Fatalf("the deposed leader's write landed: %v", r)
		}
	})
}

func TestMasterDisruptionStopsTainting(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("a1", "za")
		f.addNode("b1", "zb")
		ctl := f.start("a")
		settle(time.Minute)
		f.setAlive("a1", false)
		f.setAlive("b1", false)
		settle(2 * time.Minute)
		for _, n := range []string{"a1", "b1"} {
			if f.ready(n).GetStatus() != nodemodel.Unknown {
				t.Fatalf("%s not Unknown", n)
			}
			if f.hasTaint(n, nodemodel.TaintUnreachable, nodemodel.NoExecute) {
				t.Fatalf("%s tainted NoExecute although every zone is down", n)
			}
		}
		ctl.mu.Lock()
		masters := ctl.disruption.MasterDisruption
		ctl.mu.Unlock()
		if !masters {
			t.Fatal("not in master disruption mode")
		}
	})
}

// TestZoneWithoutNodesIsDropped: a pass reuses the last pass's zone lists;
// a zone whose last node is deleted must still leave the disruption states,
// as it did when every pass built its zones afresh.
func TestZoneWithoutNodesIsDropped(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("a1", "za")
		f.addNode("a2", "za")
		f.addNode("b1", "zb")
		ctl := f.start("a")
		settle(time.Minute)
		zones := func() []string {
			ctl.mu.Lock()
			defer ctl.mu.Unlock()
			var names []string
			for k := range ctl.disruption.States {
				names = append(names, nodemodel.ZoneName(k))
			}
			slices.Sort(names)
			return names
		}
		if got := zones(); !slices.Equal(got, []string{"za", "zb"}) {
			t.Fatalf("zones %v, want [za zb]", got)
		}
		f.setAlive("b1", false)
		if _, err := f.store.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, "b1"), nodestore.Delete(nodestore.Statuses, "b1")); err != nil {
			t.Fatal(err)
		}
		settle(time.Minute)
		if got := zones(); !slices.Equal(got, []string{"za"}) {
			t.Fatalf("zones after zb's only node was deleted: %v, want [za]", got)
		}
		ctl.mu.Lock()
		za := len(ctl.passZones[nodemodel.ZoneKey(map[string]string{nodemodel.LabelZone: "za"})])
		ctl.mu.Unlock()
		if za != 2 {
			t.Fatalf("za holds %d statuses, want 2 (emptied between passes)", za)
		}
	})
}

func TestConditionTaintsFollowNodeUpdatesAtOnce(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("n1", "z1")
		f.start("a")
		settle(time.Minute)

		// Cordon and report memory pressure; let no time pass, so no health
		// pass runs: only the update path can add the taints.
		o, err := f.store.Get(ctx, nodestore.Nodes, "n1")
		if err != nil {
			t.Fatal(err)
		}
		meta := o.Value.(*nodev1.Node)
		meta.Spec = &nodev1.NodeSpec{Unschedulable: true}
		st, err := f.store.Get(ctx, nodestore.Statuses, "n1")
		if err != nil {
			t.Fatal(err)
		}
		status := st.Value.(*nodev1.NodeStatus)
		nodemodel.FindCondition(status.Conditions, nodemodel.MemoryPressure).Status = nodemodel.True
		if _, err := f.store.Apply(ctx, nil, nodestore.Put(nodestore.Nodes, "n1", meta), nodestore.Put(nodestore.Statuses, "n1", status)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, k := range []string{nodemodel.TaintUnschedulable, nodemodel.TaintMemoryPressure} {
			if !f.hasTaint("n1", k, nodemodel.NoSchedule) {
				t.Errorf("%s:NoSchedule missing right after the update: %v", k, f.node("n1").GetSpec().GetTaints())
			}
		}
	})
}

// A record that ends up saying nothing (the taints are gone, nothing is
// overridden) is deleted, not kept empty: at fleet scale the key costs more
// than its value. The node is served the same either way.
func TestEmptyHealthRecordIsDeleted(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		f.addNode("n1", "z1")
		f.start("a")
		settle(time.Minute)

		setPressure := func(s string) {
			t.Helper()
			st, err := f.store.Get(ctx, nodestore.Statuses, "n1")
			if err != nil {
				t.Fatal(err)
			}
			status := st.Value.(*nodev1.NodeStatus)
			nodemodel.FindCondition(status.Conditions, nodemodel.MemoryPressure).Status = s
			if _, err := f.store.Apply(ctx, nil, nodestore.Put(nodestore.Statuses, "n1", status)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		setPressure(nodemodel.True)
		if !f.hasTaint("n1", nodemodel.TaintMemoryPressure, nodemodel.NoSchedule) {
			t.Fatalf("memory-pressure taint missing: %v", f.node("n1").GetSpec().GetTaints())
		}
		if _, err := f.store.Get(ctx, nodestore.Health, "n1"); err != nil {
			t.Fatalf("health record with the taint: %v", err)
		}
		setPressure(nodemodel.False)
		settle(10 * time.Second) // a pass or two
		if f.hasTaint("n1", nodemodel.TaintMemoryPressure, nodemodel.NoSchedule) {
			t.Fatal("memory-pressure taint still there after the pressure ended")
		}
		if o, err := f.store.Get(ctx, nodestore.Health, "n1"); !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("health record after the last taint went: %v (err %v), want none", o.Value, err)
		}
		// And it comes back when there is something to say again.
		setPressure(nodemodel.True)
		settle(time.Second)
		if !f.hasTaint("n1", nodemodel.TaintMemoryPressure, nodemodel.NoSchedule) {
			t.Fatalf("memory-pressure taint not added again: %v", f.node("n1").GetSpec().GetTaints())
		}
		if _, err := f.store.Get(ctx, nodestore.Health, "n1"); err != nil {
			t.Fatalf("health record with the taint again: %v", err)
		}
	})
}

// A node that registered but has not reported yet is served
// not-ready:NoSchedule without a health record: a joining fleet costs the
// monitor no write and no delete per node. Its first status clears the
// taint, and a record an older monitor stored for it is removed.
func TestUnreportedNodeIsServedNotReadyWithoutAWrite(t *testing.T) {
	fleetTest(t, func(t *testing.T, ctx context.Context, f *fleet) {
		meta := func(name string) *nodev1.Node {
			return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name + "-uid", CreationTimestamp: nodemodel.Timestamp(time.Now())}}
		}
		old := &nodev1.NodeHealth{NodeName: "n2", Taints: []*nodev1.Taint{{Key: nodemodel.TaintNotReady, Effect: nodemodel.NoSchedule}}}
		if _, err := f.store.Apply(ctx, nil, nodestore.Put(nodestore.Nodes, "n1", meta("n1")), nodestore.Put(nodestore.Nodes, "n2", meta("n2")),
			nodestore.Put(nodestore.Health, "n2", old)); err != nil {
			t.Fatal(err)
		}
		f.start("a")
		settle(10 * time.Second) // two passes, well within the startup grace
		for _, n := range []string{"n1", "n2"} {
			if !f.hasTaint(n, nodemodel.TaintNotReady, nodemodel.NoSchedule) {
				t.Errorf("%s served without not-ready:NoSchedule: %v", n, f.node(n).GetSpec().GetTaints())
			}
			if o, err := f.store.Get(ctx, nodestore.Health, n); !errors.Is(err, nodestore.ErrNotFound) {
				t.Errorf("%s: health record %v (err %v), want none", n, o.Value, err)
			}
		}
		if _, err := f.store.Apply(ctx, nil, nodestore.Put(nodestore.Statuses, "n1", &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
			{Type: nodemodel.Ready, Status: nodemodel.True, Reason: "KubeletReady", LastHeartbeatTime: nodemodel.Timestamp(time.Now()), LastTransitionTime: nodemodel.Timestamp(time.Now())}}})); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if ts := f.node("n1").GetSpec().GetTaints(); len(ts) != 0 {
			t.Errorf("n1 reported Ready and is served with taints %v", ts)
		}
	})
}
