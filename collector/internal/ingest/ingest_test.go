// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodepulse/nodepulse/collector/internal/feed"
	"github.com/nodepulse/nodepulse/collector/internal/live"
	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// countingStore counts Apply calls: the cost in etcd transactions. While
// hold is set, reads wait for it to close: etcd round trips that take a
// while.
type countingStore struct {
	nodestore.Store
	applies atomic.Int64
	hold    atomic.Pointer[chan struct{}]
	held    atomic.Int32 // reads waiting on hold now

	holdWrites atomic.Pointer[chan struct{}]
	heldWrites atomic.Int32
}

func (c *countingStore) Get(ctx context.Context, k nodestore.Kind, name string) (nodestore.Object, error) {
	if h := c.hold.Load(); h != nil {
		c.held.Add(1)
		defer c.held.Add(-1)
		select {
		case <-*h:
		case <-ctx.Done():
			return nodestore.Object{}, ctx.Err()
		}
	}
	return c.Store.Get(ctx, k, name)
}

func (c *countingStore) Apply(ctx context.Context, f *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	c.applies.Add(1)
	return c.Store.Apply(ctx, f, ops...)
}

// ApplyEach (the status writes) counts as an Apply; while holdWrites is
// set, it waits for it to close first: a write that reached etcd but is
// not committed yet (a frozen member holds it).
func (c *countingStore) ApplyEach(ctx context.Context, ops []nodestore.Op) ([]nodestore.EachResult, int64, error) {
	c.applies.Add(1)
	if h := c.holdWrites.Load(); h != nil {
		c.heldWrites.Add(1)
		<-*h // even when ctx ends: what etcd was sent, it commits
		c.heldWrites.Add(-1)
	}
	return c.Store.ApplyEach(ctx, ops)
}

type harness struct {
	mem    *memstore.Store
	store  *countingStore
	table  *live.Table
	p      *persist.Persister
	srv    *Server
	feed   *feed.Server
	client collectorv1.CollectorServiceClient
	fc     collectorv1.FeedServiceClient
	addr   string // the server's address, for more connections
}

func newHarness(t testing.TB, mod func(*Config, *persist.Config)) *harness {
	t.Helper()
	h := &harness{mem: memstore.New(memstore.Config{})}
	h.store = &countingStore{Store: h.mem}
	h.table = live.New(1 << 16)
	lg := zap.NewNop()
	pc := persist.DefaultConfig()
	pc.CollectorID = "c-test"
	pc.PingInterval = 20 * time.Millisecond
	pc.RetryInterval = 50 * time.Millisecond
	ic := DefaultConfig()
	ic.CollectorID = "c-test"
	ic.Insecure = true
	// Tests send fast; TestRateLimit sets its own bucket.
	ic.MessagesPerSecond, ic.MessageBurst = 10000, 10000
	if mod != nil {
		mod(&ic, &pc)
	}
	var err error
	if h.p, err = persist.New(pc, h.store, h.table, lg, nil); err != nil {
		t.Fatal(err)
	}
	if h.srv, err = New(ic, h.p, h.table, lg, nil); err != nil {
		t.Fatal(err)
	}
	fcfg := feed.DefaultConfig()
	fcfg.CollectorID = "c-test"
	fcfg.BatchInterval = 20 * time.Millisecond
	fcfg.HeartbeatInterval = 100 * time.Millisecond
	if h.feed, err = feed.New(fcfg, h.table, h.srv, lg, nil); err != nil {
		t.Fatal(err)
	}
	// The production codec (hand-coded renewals and acks), as app wires it.
	gs := grpc.NewServer(grpc.ForceServerCodecV2(Codec()))
	collectorv1.RegisterCollectorServiceServer(gs, h.srv)
	collectorv1.RegisterFeedServiceServer(gs, h.feed)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range []func(context.Context) error{h.p.Run, h.feed.Run, h.srv.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = gs.Serve(ln) }()
	h.addr = ln.Addr().String()
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.client = collectorv1.NewCollectorServiceClient(conn)
	h.fc = collectorv1.NewFeedServiceClient(conn)
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		cancel()
		wg.Wait()
		_ = h.mem.Close()
	})
	return h
}

func register(name string) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Seq: 1, Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{
		NodeName: name, Labels: map[string]string{"kubernetes.io/hostname": name},
		RegisterWithTaints: []*nodev1.Taint{{Key: "dedicated", Value: "infra", Effect: "NoExecute"}}}}}
}

func lease(seq uint64, t time.Time) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Seq: seq, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
		RenewTime: timestamppb.New(t), LeaseDurationSeconds: 40}}}
}

func statusMsg(seq uint64, hb time.Time, ready string) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Seq: seq, Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: &nodev1.NodeStatus{
		Capacity:    map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
		Allocatable: map[string]string{"cpu": "4", "memory": "7Gi", "pods": "110"},
		Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: ready, Reason: "KubeletReady",
			LastHeartbeatTime: timestamppb.New(hb), LastTransitionTime: timestamppb.New(time.Unix(1700000000, 0))}},
		Addresses: []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.7"}},
	}}}}
}

type client struct {
	t testing.TB
	s collectorv1.CollectorService_ReportClient
}

func (h *harness) open(t *testing.T, ctx context.Context, name string) (*client, *collectorv1.Ack) {
	t.Helper()
	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, s: s}
	a := c.do(register(name))
	if a.GetError() != nil {
		t.Fatalf("register refused: %v", a.GetError())
	}
	return c, a
}

// do sends m and returns its ack, skipping commands.
func (c *client) do(m *collectorv1.ReportRequest) *collectorv1.Ack {
	c.t.Helper()
	if err := c.s.Send(m); err != nil {
		c.t.Fatalf("send: %v", err)
	}
	return c.ack()
}

func (c *client) ack() *collectorv1.Ack {
	c.t.Helper()
	for {
		r, err := c.s.Recv()
		if err != nil {
			c.t.Fatalf("recv: %v", err)
		}
		if a := r.GetAck(); a != nil {
			return a
		}
	}
}

func TestMalformedRegisterWritesNothing(t *testing.T) {
	h := newHarness(t, nil)
	s, err := h.client.Report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(register("")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !hasPrefix(st.Message(), "register.nodeName: ") {
		t.Fatalf("got %v %q, want InvalidArgument naming register.nodeName", st.Code(), st.Message())
	}
	if n := h.store.applies.Load(); n != 0 {
		t.Fatalf("%d Applies after a refused Register, want 0", n)
	}
	objs, _, _ := h.mem.List(context.Background(), nodestore.Nodes, nodestore.ListOptions{})
	if len(objs) != 0 {
		t.Fatalf("nodes stored: %v", objs)
	}
}

func TestFirstMessageMustBeRegister(t *testing.T) {
	h := newHarness(t, nil)
	s, _ := h.client.Report(context.Background())
	_ = s.Send(lease(1, time.Now()))
	_, err := s.Recv()
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("got %v, want FailedPrecondition", err)
	}
}

func TestRegisterLeaseStatus(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, a := h.open(t, ctx, "node-a")
	if !a.GetDurable() || a.GetNode().GetMetadata().GetUid() == "" || a.GetCollectorId() != "c-test" {
		t.Fatalf("register ack %v", a)
	}
	// The register taint, with the time it was added, and not-ready,
	// which a node without a status yet is served with (not stored).
	if tt := a.GetNode().GetSpec().GetTaints(); len(tt) != 2 || tt[0].GetTimeAdded() == nil ||
		tt[1].GetKey() != nodemodel.TaintNotReady || tt[1].GetEffect() != nodemodel.NoSchedule {
		t.Fatalf("want the NoExecute register taint with timeAdded, then not-ready:NoSchedule: %v", tt)
	}
	stored, err := h.mem.Get(ctx, nodestore.Nodes, "node-a")
	if err != nil || stored.Value.(*nodev1.Node).GetMetadata().GetUid() != a.GetNode().GetMetadata().GetUid() {
		t.Fatalf("stored node %v, %v", stored.Value, err)
	}

	now := time.Now()
	if a := c.do(lease(2, now)); a.GetError() != nil || a.GetDurable() || a.GetSeq() != 2 {
		t.Fatalf("lease ack %v", a)
	}
	if a := c.do(statusMsg(3, now, "True")); a.GetError() != nil || !a.GetDurable() {
		t.Fatalf("status ack %v", a)
	}
	if _, err := h.mem.Get(ctx, nodestore.Statuses, "node-a"); err != nil {
		t.Fatalf("status not stored after durable ack: %v", err)
	}
	// The checkpointer may write the attach checkpoint meanwhile, so
	// compare the stored revision of status/ rather than counting Applies.
	st1, _ := h.mem.Get(ctx, nodestore.Statuses, "node-a")

	// Same status, later heartbeat: no write.
	if a := c.do(statusMsg(4, now.Add(10*time.Second), "True")); a.GetError() != nil || !a.GetDurable() {
		t.Fatalf("unchanged status ack %v", a)
	}
	st2, _ := h.mem.Get(ctx, nodestore.Statuses, "node-a")
	if st2.ModRevision != st1.ModRevision {
		t.Fatalf("unchanged status was written (rev %d -> %d)", st1.ModRevision, st2.ModRevision)
	}
	// A real change is written.
	if a := c.do(statusMsg(5, now.Add(20*time.Second), "False")); !a.GetDurable() {
		t.Fatalf("changed status ack %v", a)
	}
	st3, _ := h.mem.Get(ctx, nodestore.Statuses, "node-a")
	if st3.ModRevision == st2.ModRevision {
		t.Fatal("changed status not written")
	}

	// The attach checkpoint reaches leases/ without further renewals.
	waitFor(t, func() bool {
		o, err := h.mem.Get(ctx, nodestore.Leases, "node-a")
		return err == nil && o.Value.(*nodev1.Lease).GetPersistence().GetCollector() == "c-test"
	})
}

func TestUnchangedStatusCostsNoApply(t *testing.T) {
	h := newHarness(t, func(_ *Config, pc *persist.Config) { pc.CheckpointInterval = time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-b")
	now := time.Now()
	c.do(statusMsg(2, now, "True"))
	base := h.store.applies.Load()
	for i := range 20 {
		if a := c.do(statusMsg(uint64(3+i), now.Add(time.Duration(i)*time.Second), "True")); !a.GetDurable() {
			t.Fatalf("ack %v", a)
		}
	}
	if n := h.store.applies.Load() - base; n != 0 {
		t.Fatalf("20 unchanged statuses cost %d Applies, want 0", n)
	}
	// After a reconnect the first report is written once, unchanged or
	// not (it fences off a late write of the old stream: see
	// TestLateWriteOfAnOldStreamCannotHideANewerStatus); the ones after it
	// are free again.
	cancel()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	c2, _ := h.open(t, ctx2, "node-b")
	base = h.store.applies.Load()
	for i := range 5 {
		if a := c2.do(statusMsg(uint64(2+i), now.Add(time.Minute+time.Duration(i)*time.Second), "True")); !a.GetDurable() {
			t.Fatalf("ack after reconnect %v", a)
		}
	}
	if n := h.store.applies.Load() - base; n != 1 {
		t.Fatalf("5 unchanged statuses after a reconnect cost %d Applies, want 1", n)
	}
}

// A status write of a node's old stream that reaches etcd after its new
// stream registered (held in the group committer, or by a frozen etcd
// member, past the stream's end) must not leave etcd holding that older
// status while the new stream acks a newer one as durable. Before status
// writes were conditional, the new stream took the status it read at
// registration for what etcd holds, acked a report equal to it without a
// write, and etcd kept the old stream's late write (docs/robustness.md,
// Findings: acked-status-durable).
func TestLateWriteOfAnOldStreamCannotHideANewerStatus(t *testing.T) {
	h := newHarness(t, func(_ *Config, pc *persist.Config) { pc.CheckpointInterval = time.Hour })
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	c1, _ := h.open(t, ctx1, "node-l")
	now := time.Now()
	if a := c1.do(statusMsg(2, now, "True")); !a.GetDurable() {
		t.Fatalf("first status: %v", a)
	}

	// The old stream's next status reaches the store and is held there.
	gate := make(chan struct{})
	h.store.holdWrites.Store(&gate)
	if err := c1.s.Send(statusMsg(3, now.Add(time.Second), "False")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return h.store.heldWrites.Load() == 1 })
	h.store.holdWrites.Store(nil)

	// The reporter gives up on it and registers again: the new stream
	// reads Ready=True as stored.
	cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	c2, _ := h.open(t, ctx2, "node-l")

	// Now the old write commits.
	close(gate)
	waitFor(t, func() bool {
		o, err := h.mem.Get(ctx2, nodestore.Statuses, "node-l")
		return err == nil && nodemodel.ConditionStatus(o.Value.(*nodev1.NodeStatus).GetConditions(), "Ready") == "False"
	})

	// The new stream's report equals what it read at registration, not
	// what etcd holds now. Acked durable, it must be what etcd holds.
	a := c2.do(statusMsg(2, now.Add(2*time.Second), "True"))
	if !a.GetDurable() || a.GetError() != nil {
		t.Fatalf("new stream's status: %v", a)
	}
	o, err := h.mem.Get(ctx2, nodestore.Statuses, "node-l")
	if err != nil {
		t.Fatal(err)
	}
	if got := nodemodel.ConditionStatus(o.Value.(*nodev1.NodeStatus).GetConditions(), "Ready"); got != "True" {
		t.Fatalf("acked durable Ready=True, etcd holds Ready=%s (the old stream's late write)", got)
	}
}

func TestInvalidMessagesKeepStream(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-c")
	now := time.Now()
	bad := statusMsg(2, now, "True")
	bad.GetStatus().Status.Capacity["cpu"] = "-3"
	a := c.do(bad)
	if a.GetError().GetCode() != uint32(codes.InvalidArgument) || a.GetError().GetField() != "status.capacity[cpu]" {
		t.Fatalf("ack %v, want InvalidArgument on status.capacity[cpu]", a)
	}
	if _, err := h.mem.Get(ctx, nodestore.Statuses, "node-c"); !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatalf("refused status stored: %v", err)
	}
	a = c.do(lease(3, time.Unix(-1, 0)))
	if a.GetError().GetField() != "lease.renewTime" {
		t.Fatalf("renewTime before 1970: %v", a)
	}
	c.do(lease(4, now))
	if a := c.do(lease(5, now.Add(-2*time.Minute))); a.GetError() != nil {
		t.Fatalf("renewTime behind by two minutes (a node's clock, measured, not refused): %v", a)
	}
	if a := c.do(lease(5, now)); a.GetError().GetField() != "seq" {
		t.Fatalf("repeated seq: %v", a)
	}
	again := register("node-c")
	again.Seq = 6
	if a := c.do(again); a.GetError().GetCode() != uint32(codes.FailedPrecondition) {
		t.Fatalf("second register: %v", a)
	}
	if a := c.do(lease(20, now.Add(time.Second))); a.GetError() != nil {
		t.Fatalf("stream no longer works: %v", a)
	}
}

func TestEtcdOutage(t *testing.T) {
	// A short checkpoint interval, so checkpoints fall due during the
	// outage and must be retried after it.
	h := newHarness(t, func(_ *Config, pc *persist.Config) { pc.CheckpointInterval = 100 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-d")
	now := time.Now()
	c.do(lease(2, now))
	h.mem.Fail(errors.New("injected outage"))
	waitFor(t, func() bool { return !h.p.Available() })
	a := c.do(statusMsg(3, now, "True"))
	if a.GetError().GetCode() != uint32(codes.Unavailable) || a.GetRetryAfter() == nil || a.GetDurable() {
		t.Fatalf("status during outage: %v", a)
	}
	if a := c.do(lease(4, now.Add(time.Second))); a.GetError() != nil {
		t.Fatalf("lease during outage: %v", a)
	}
	if h.p.ReadyCheck() == nil {
		t.Fatal("ready during outage")
	}
	h.mem.Fail(nil)
	waitFor(t, func() bool { return h.p.Available() })
	if a := c.do(statusMsg(5, now, "True")); !a.GetDurable() {
		t.Fatalf("status after outage: %v", a)
	}
	// The renewal acked during the outage reaches etcd once it is back.
	waitFor(t, func() bool {
		o, err := h.mem.Get(ctx, nodestore.Leases, "node-d")
		return err == nil && o.Value.(*nodev1.Lease).GetSpec().GetRenewTime().AsTime().Equal(now.Add(time.Second))
	})
}

func TestReconnectAfterLongOutage(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.UnavailableReconnectAfter = 50 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-e")
	h.mem.Fail(errors.New("injected outage"))
	for {
		r, err := c.s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if rc := r.GetCommand().GetReconnect(); rc != nil {
			if rc.GetWithin().AsDuration() <= 0 {
				t.Fatalf("reconnect without window: %v", rc)
			}
			return
		}
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.MessagesPerSecond = 0.001; c.MessageBurst = 3 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-f")
	now := time.Now()
	var limited *collectorv1.Ack
	for i := range 5 {
		if a := c.do(lease(uint64(2+i), now)); a.GetError() != nil {
			limited = a
			break
		}
	}
	if limited.GetError().GetCode() != uint32(codes.ResourceExhausted) || limited.GetRetryAfter() == nil {
		t.Fatalf("no ResourceExhausted with retry_after: %v", limited)
	}
	// And the reporter is told to slow down.
	for {
		r, err := c.s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCommand().GetSlowDown() != nil {
			return
		}
	}
}

func TestMaxStreams(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.MaxStreams = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.open(t, ctx, "node-g")
	s, _ := h.client.Report(ctx)
	_ = s.Send(register("node-h"))
	if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
}

func TestNewerStreamSupersedes(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old, _ := h.open(t, ctx, "node-i")
	cur, _ := h.open(t, ctx, "node-i")
	for {
		_, err := old.s.Recv()
		if err != nil {
			if status.Code(err) != codes.Aborted {
				t.Fatalf("old stream ended with %v, want Aborted", err)
			}
			break
		}
	}
	if a := cur.do(lease(2, time.Now())); a.GetError() != nil {
		t.Fatalf("new stream: %v", a)
	}
}

func TestFeedAndCommands(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-j")
	w, err := h.fc.WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || !first.GetSnapshot() || len(first.GetEvents()) != 1 || first.GetEvents()[0].GetNodeName() != "node-j" {
		t.Fatalf("snapshot %v %v", first, err)
	}
	renew := time.Now()
	c.do(lease(2, renew))
	for found := false; !found; {
		b, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range b.GetEvents() {
			if e.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED && e.GetRenewTime().AsTime().Equal(renew) {
				found = true
			}
		}
	}
	resp, err := h.fc.SendNodeCommand(ctx, &collectorv1.SendNodeCommandRequest{NodeName: "node-j",
		Command: &collectorv1.SendNodeCommandRequest_ReportStatusReason{ReportStatusReason: "test"}})
	if err != nil || !resp.GetDelivered() {
		t.Fatalf("SendNodeCommand: %v %v", resp, err)
	}
	for {
		r, err := c.s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCommand().GetReportStatus().GetReason() == "test" {
			break
		}
	}
	_, err = h.fc.SendNodeCommand(ctx, &collectorv1.SendNodeCommandRequest{NodeName: "absent",
		Command: &collectorv1.SendNodeCommandRequest_ReportStatusReason{ReportStatusReason: "x"}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("command to absent node: %v", err)
	}
	_, err = h.fc.SendNodeCommand(ctx, &collectorv1.SendNodeCommandRequest{NodeName: "Bad_Name"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad name: %v", err)
	}
	// Leaving then close: the feed reports LEAVING and DETACHED.
	c.do(&collectorv1.ReportRequest{Seq: 3, Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "bye"}}})
	_ = c.s.CloseSend()
	kinds := map[collectorv1.LivenessEventKind]bool{}
	for !kinds[collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED] {
		b, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range b.GetEvents() {
			kinds[e.GetKind()] = true
		}
	}
	if !kinds[collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_LEAVING] {
		t.Fatal("no LEAVING event before DETACHED")
	}
}

func TestDrainSendsReconnect(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-k")
	h.srv.Drain(50 * time.Millisecond)
	gotReconnect := false
	for {
		r, err := c.s.Recv()
		if err != nil {
			if !gotReconnect || status.Code(err) != codes.Unavailable {
				t.Fatalf("stream ended with %v (reconnect seen: %v)", err, gotReconnect)
			}
			break
		}
		if r.GetCommand().GetReconnect() != nil {
			gotReconnect = true
		}
	}
	s, _ := h.client.Report(ctx)
	_ = s.Send(register("node-l"))
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("new stream while draining: %v", err)
	}
	if err := h.srv.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
