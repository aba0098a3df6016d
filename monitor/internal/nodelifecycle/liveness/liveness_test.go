// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package liveness

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// fakeFeed is a collector's FeedService: it sends what the test queues.
type fakeFeed struct {
	collectorv1.UnimplementedFeedServiceServer
	batches chan *collectorv1.WatchLivenessResponse
}

func (f *fakeFeed) WatchLiveness(_ *collectorv1.WatchLivenessRequest, s collectorv1.FeedService_WatchLivenessServer) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case b := <-f.batches:
			if err := s.Send(b); err != nil {
				return err
			}
		}
	}
}

func (f *fakeFeed) SendNodeCommand(_ context.Context, r *collectorv1.SendNodeCommandRequest) (*collectorv1.SendNodeCommandResponse, error) {
	if r.GetNodeName() != "n1" {
		return nil, status.Error(codes.NotFound, "not attached")
	}
	return &collectorv1.SendNodeCommandResponse{Delivered: true}, nil
}

type source struct {
	mu      sync.Mutex
	infos   map[string]*collectorv1.CollectorInfo
	changed chan struct{}
}

func (s *source) Collectors() map[string]*collectorv1.CollectorInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*collectorv1.CollectorInfo{}
	for k, v := range s.infos {
		out[k] = v
	}
	return out
}

func (s *source) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *source) set(infos map[string]*collectorv1.CollectorInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infos = infos
	close(s.changed)
	s.changed = make(chan struct{})
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// startFeed serves a fakeFeed on a real gRPC server on loopback.
func startFeed(t *testing.T) (*fakeFeed, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	feed := &fakeFeed{batches: make(chan *collectorv1.WatchLivenessResponse, 16)}
	collectorv1.RegisterFeedServiceServer(srv, feed)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return feed, ln.Addr().String()
}

// runTracker runs a tracker on src (clock now, nil: time.Now) until the
// test ends.
func runTracker(t *testing.T, src *source, now func() time.Time) *Tracker {
	t.Helper()
	tr, err := New(Config{Client: grpcclient.Config{TLS: tlsconfig.Config{Insecure: true}, KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute},
		Watcher: "test", Now: now}, src, zap.NewNop(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = tr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return tr
}

func TestTrackerFollowsFeed(t *testing.T) {
	feed, addr := startFeed(t)
	clk := &clock{t: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}
	src := &source{changed: make(chan struct{})}
	tr := runTracker(t, src, clk.now)
	ctx := t.Context()
	src.set(map[string]*collectorv1.CollectorInfo{"c1": {Id: "c1", FeedAddress: addr}})

	reporterClock := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // skewed: never compared with ours
	hb := durationpb.New(time.Second)
	ev := func(kind collectorv1.LivenessEventKind, rt time.Time) *collectorv1.LivenessEvent {
		return &collectorv1.LivenessEvent{NodeName: "n1", Kind: kind, RenewTime: nodemodel.Timestamp(rt), LeaseDurationSeconds: 40}
	}
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", Snapshot: true, HeartbeatInterval: hb,
		Events: []*collectorv1.LivenessEvent{ev(collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, reporterClock)}}
	poll(t, "snapshot", func() bool { return tr.Node("n1").Collector == "c1" })
	if n := tr.Node("n1"); n.Renewals != 0 || n.Paused {
		t.Fatalf("a snapshot is a baseline, not a heartbeat: %+v", n)
	}
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb,
		Events: []*collectorv1.LivenessEvent{ev(collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED, reporterClock.Add(10*time.Second))}}
	poll(t, "renewal", func() bool { return tr.Node("n1").Renewals == 1 })
	if n := tr.Node("n1"); !n.ObservedAt.Equal(clk.now()) || !n.RenewTime.Equal(reporterClock.Add(10*time.Second)) {
		t.Fatalf("%+v", n)
	}
	// A repeated renewTime is not a new heartbeat; an empty batch is not either.
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb,
		Events: []*collectorv1.LivenessEvent{ev(collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED, reporterClock.Add(10*time.Second))}}
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb}
	poll(t, "batches consumed", func() bool { return len(feed.batches) == 0 })

	if col, ok, err := tr.SendCommand(ctx, "n1", "test"); err != nil || !ok || col != "c1" {
		t.Fatalf("SendCommand: %s %v %v", col, ok, err)
	}
	if _, _, err := tr.SendCommand(ctx, "n9", "test"); err == nil {
		t.Fatal("command for an unattached node delivered")
	}

	// Silent for more than 3 heartbeat intervals: stale, the node paused.
	clk.add(3 * time.Second)
	if tr.Node("n1").Paused || tr.AllStale() {
		t.Fatal("stale at exactly 3 intervals")
	}
	clk.add(time.Millisecond)
	if !tr.Node("n1").Paused || !tr.AllStale() {
		t.Fatal("feed silent for 3 intervals not stale")
	}
	// The collector drains: it sends n2 and n4 away (DETACHED).
	clk.add(-3 * time.Second) // fresh again
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{
		{NodeName: "n2", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: nodemodel.Timestamp(reporterClock)},
		{NodeName: "n4", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: nodemodel.Timestamp(reporterClock)},
	}}
	poll(t, "n2 and n4 attached", func() bool { return tr.Node("n2").Collector == "c1" && tr.Node("n4").Collector == "c1" })
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{
		{NodeName: "n2", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED},
		{NodeName: "n4", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED},
	}}
	poll(t, "n2 and n4 detached", func() bool { return tr.Node("n2").Collector == "" && tr.Node("n4").Collector == "" })
	// n4 attaches to another collector before c1 is gone: it is not owed
	// anything (its renewals flow again).
	feed2, addr2 := startFeed(t)
	src.set(map[string]*collectorv1.CollectorInfo{"c1": {Id: "c1", FeedAddress: addr}, "c2": {Id: "c2", FeedAddress: addr2}})
	feed2.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c2", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{
		{NodeName: "n4", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: nodemodel.Timestamp(reporterClock.Add(time.Second))}}}
	poll(t, "n4 attached to c2", func() bool { return tr.Node("n4").Collector == "c2" })

	// The collector vanishes: its nodes get a fresh grace period, including
	// the ones it sent away that have not attached anywhere yet.
	src.set(map[string]*collectorv1.CollectorInfo{"c2": {Id: "c2", FeedAddress: addr2}})
	poll(t, "collector removal", func() bool { return tr.Node("n1").Epoch == 1 })
	if n := tr.Node("n1"); n.Collector != "" || n.Paused {
		t.Fatalf("after removal: %+v", n)
	}
	if n := tr.Node("n2"); n.Epoch != 1 {
		t.Fatalf("n2, sent away by the draining collector and not attached since, not owed a fresh grace period: %+v", n)
	}
	if n := tr.Node("n4"); n.Epoch != 0 || n.Collector != "c2" {
		t.Fatalf("n4, attached elsewhere, got a fresh grace period: %+v", n)
	}
	src.set(map[string]*collectorv1.CollectorInfo{})
	poll(t, "c2 removal", func() bool { return tr.Node("n4").Epoch == 1 })
	if tr.AllStale() {
		t.Fatal("no feeds followed must not count as all stale")
	}
}

// Blind time: a gap between two batches of a feed that made it stale
// counts in full (from the batch before it), a shorter one not at all, and
// a node keeps what it accrued when it moves to another collector's feed.
func TestBlindTimeCountsStaleGapsPerNode(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	tr, err := New(Config{StaleBatches: 3, DefaultHeartbeat: time.Second, Now: clk.now}, &source{changed: make(chan struct{})}, zap.NewNop(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := &feed{lastBatch: clk.now(), interval: time.Second}, &feed{lastBatch: clk.now(), interval: time.Second}
	tr.feeds["a"], tr.feeds["b"] = a, b
	renew := func(f *feed, id, node string) {
		tr.batch(id, f, &collectorv1.WatchLivenessResponse{Events: []*collectorv1.LivenessEvent{{
			NodeName: node, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED, RenewTime: nodemodel.Timestamp(clk.now())}}})
	}
	beat := func(f *feed, id string) { tr.batch(id, f, &collectorv1.WatchLivenessResponse{}) }
	blind := func(node string) time.Duration { return tr.Node(node).Blind }

	renew(a, "a", "n1")
	renew(b, "b", "n2")
	clk.add(2900 * time.Millisecond) // within the stale bound (3 s): not blind
	beat(a, "a")
	beat(b, "b")
	if blind("n1") != 0 || blind("n2") != 0 {
		t.Fatalf("a gap within the stale bound counted: %s %s", blind("n1"), blind("n2"))
	}
	// Feed a stalls for 5 s while b keeps sending.
	clk.add(2500 * time.Millisecond)
	beat(b, "b")
	clk.add(2500 * time.Millisecond)
	if !tr.Node("n1").Paused || tr.Node("n2").Paused {
		t.Fatal("only n1's feed is stale")
	}
	beat(b, "b")
	beat(a, "a")
	if got := blind("n1"); got != 5*time.Second {
		t.Fatalf("n1 blind %s after a 5 s stall of its feed, want 5s", got)
	}
	if tr.Node("n1").Paused || blind("n2") != 0 {
		t.Fatalf("n1 still paused or n2 blind (%s) after a stall of another feed", blind("n2"))
	}
	// n1 moves to feed b: it keeps its 5 s and does not inherit b's history.
	clk.add(time.Second)
	renew(b, "b", "n1")
	if got := blind("n1"); got != 5*time.Second {
		t.Fatalf("n1 blind %s after moving to feed b, want 5s", got)
	}
	clk.add(4 * time.Second) // b stalls 4 s
	beat(b, "b")
	if blind("n1") != 9*time.Second || blind("n2") != 4*time.Second {
		t.Fatalf("after b stalled 4 s: n1 %s (want 9s), n2 %s (want 4s)", blind("n1"), blind("n2"))
	}
}

// trackerWithFeed is a tracker on a fake clock that is not running, with
// one feed (collector id) whose last batch is now; tests hand it batches.
func trackerWithFeed(t *testing.T, id string) (*Tracker, *clock, *feed) {
	t.Helper()
	clk := &clock{t: time.Unix(1_000_000, 0)}
	tr, err := New(Config{Now: clk.now}, &source{changed: make(chan struct{})}, zap.NewNop(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &feed{lastBatch: clk.now(), interval: time.Second}
	tr.feeds[id] = f
	return tr, clk, f
}

// A WAITING event (the reporter waits for, or was refused, registration)
// is a heartbeat dated on arrival, and ties the node to the feed it came
// on: that feed going stale holds it.
func TestWaitingIsAHeartbeatOnItsFeed(t *testing.T) {
	tr, clk, f := trackerWithFeed(t, "c2")
	clk.add(500 * time.Millisecond)
	tr.batch("c2", f, &collectorv1.WatchLivenessResponse{Events: []*collectorv1.LivenessEvent{{
		NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING}}})
	n := tr.Node("n1")
	if n.Renewals != 1 || !n.ObservedAt.Equal(clk.now()) || n.Collector != "c2" || n.Paused {
		t.Fatalf("after WAITING: %+v, want one renewal observed now, heard on c2", n)
	}
	clk.add(4 * time.Second) // c2's feed stalls past the stale bound
	if !tr.Node("n1").Paused {
		t.Fatal("a waiting node is not held while the feed it waits on is stale")
	}
}

// A snapshot's WAITING events are dated by their age at the collector
// (sent_time − renew_time) before the batch arrived, and count only when
// newer than what the monitor heard already.
func TestSnapshotWaitingIsDatedByItsAge(t *testing.T) {
	tr, clk, f := trackerWithFeed(t, "c2")
	// The collector's clock is an hour off the monitor's: only the
	// difference of its two timestamps matters.
	sent := clk.now().Add(time.Hour)
	snap := func(age time.Duration) *collectorv1.WatchLivenessResponse {
		return &collectorv1.WatchLivenessResponse{Snapshot: true, SentTime: nodemodel.Timestamp(sent), Events: []*collectorv1.LivenessEvent{{
			NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING, RenewTime: nodemodel.Timestamp(sent.Add(-age))}}}
	}
	tr.batch("c2", f, snap(12*time.Second))
	n := tr.Node("n1")
	if want := clk.now().Add(-12 * time.Second); n.Renewals != 1 || !n.ObservedAt.Equal(want) || n.Collector != "c2" {
		t.Fatalf("after a snapshot WAITING 12 s old: %+v, want one renewal observed at %v on c2", n, want)
	}
	// The same wait repeated by a later snapshot is no news.
	clk.add(time.Second)
	sent = sent.Add(time.Second)
	tr.batch("c2", f, snap(13*time.Second))
	if n := tr.Node("n1"); n.Renewals != 1 {
		t.Fatalf("a repeated wait counted again: %+v", n)
	}
	// A newer one is.
	tr.batch("c2", f, snap(2*time.Second))
	if n := tr.Node("n1"); n.Renewals != 2 || !n.ObservedAt.Equal(clk.now().Add(-2*time.Second)) {
		t.Fatalf("after a newer wait: %+v", n)
	}
}

// A WAITING that says how long the reporter was told to stay away makes
// the node quiet until then, from when it was heard (a snapshot's by its
// age), never for more than maxRetryWithin; a renewal ends the wait.
func TestRefusedWaitingIsQuietUntilItsRetry(t *testing.T) {
	tr, clk, f := trackerWithFeed(t, "c2")
	refused := func(node string, within time.Duration) *collectorv1.LivenessEvent {
		return &collectorv1.LivenessEvent{NodeName: node, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING, RetryWithin: durationpb.New(within)}
	}
	tr.batch("c2", f, &collectorv1.WatchLivenessResponse{Events: []*collectorv1.LivenessEvent{
		refused("n1", 30*time.Second), refused("n2", time.Hour),
		{NodeName: "n3", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING}, // queued, not refused
	}})
	now := clk.now()
	if got := tr.Node("n1").QuietUntil; !got.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("n1 quiet until %v, want %v", got, now.Add(30*time.Second))
	}
	if got := tr.Node("n2").QuietUntil; !got.Equal(now.Add(maxRetryWithin)) {
		t.Fatalf("n2, told an hour, quiet until %v, want the %s bound", got, maxRetryWithin)
	}
	if got := tr.Node("n3").QuietUntil; !got.IsZero() {
		t.Fatalf("n3, only queued, quiet until %v", got)
	}
	// A shorter wait said later does not cut the longer one short.
	clk.add(time.Second)
	tr.batch("c2", f, &collectorv1.WatchLivenessResponse{Events: []*collectorv1.LivenessEvent{refused("n1", 2*time.Second)}})
	if got := tr.Node("n1").QuietUntil; !got.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("n1 quiet until %v after a shorter wait, want %v", got, now.Add(30*time.Second))
	}
	// Attached and renewing: its silence is its own again.
	tr.batch("c2", f, &collectorv1.WatchLivenessResponse{Events: []*collectorv1.LivenessEvent{{
		NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: nodemodel.Timestamp(clk.now())}}})
	if got := tr.Node("n1").QuietUntil; !got.IsZero() {
		t.Fatalf("n1 attached, still quiet until %v", got)
	}
	// A snapshot repeats a refusal 12 s old: the wait counts from then.
	sent := clk.now().Add(time.Hour) // the collector's clock, an hour off
	ev := refused("n4", 30*time.Second)
	ev.RenewTime = nodemodel.Timestamp(sent.Add(-12 * time.Second))
	tr.batch("c2", f, &collectorv1.WatchLivenessResponse{Snapshot: true, SentTime: nodemodel.Timestamp(sent), Events: []*collectorv1.LivenessEvent{ev}})
	if got, want := tr.Node("n4").QuietUntil, clk.now().Add(18*time.Second); !got.Equal(want) {
		t.Fatalf("n4 from a snapshot: quiet until %v, want %v", got, want)
	}
}

// A feed that turns out to be another collector's (a new collector on the
// address of one whose session has not expired yet) is not applied under
// the followed id.
func TestFeedOfAnotherCollectorIsNotApplied(t *testing.T) {
	feed, addr := startFeed(t)
	src := &source{changed: make(chan struct{})}
	tr := runTracker(t, src, nil)
	src.set(map[string]*collectorv1.CollectorInfo{"old": {Id: "old", FeedAddress: addr}})
	wait := func(kind collectorv1.LivenessEventKind, from, node string) {
		feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: from, HeartbeatInterval: durationpb.New(time.Second),
			Events: []*collectorv1.LivenessEvent{{NodeName: node, Kind: kind}}}
		poll(t, "batch consumed", func() bool { return len(feed.batches) == 0 })
	}
	wait(collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING, "new", "n1")
	// The stream carrying the foreign batch was dropped; the follower
	// reconnects and reads on: a batch of the right collector is applied.
	// (Sent until heard: the dropped stream's handler may take one.)
	poll(t, "n2 heard on old", func() bool {
		if len(feed.batches) == 0 {
			feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "old", HeartbeatInterval: durationpb.New(time.Second),
				Events: []*collectorv1.LivenessEvent{{NodeName: "n2", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING}}}
		}
		return tr.Node("n2").Collector == "old"
	})
	if n := tr.Node("n1"); n.Collector != "" || n.Renewals != 0 {
		t.Fatalf("n1, heard only on another collector's feed: %+v", n)
	}
}

// A STATUS_REPORTED event carries an unchanged report's heartbeat, which
// etcd never sees: the tracker keeps the latest report's, dated on arrival
// (no received_time here), and ignores repeats (a snapshot's among them).
// An earlier heartbeat in an event is a node clock stepped back: the
// latest report still.
func TestStatusReportedKeepsTheLatestHeartbeat(t *testing.T) {
	feed, addr := startFeed(t)
	clk := &clock{t: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}
	src := &source{changed: make(chan struct{})}
	tr := runTracker(t, src, clk.now)
	src.set(map[string]*collectorv1.CollectorInfo{"c1": {Id: "c1", FeedAddress: addr}})
	const reported = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED
	reporterClock := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(at time.Time) *collectorv1.LivenessEvent {
		return &collectorv1.LivenessEvent{NodeName: "n1", Kind: reported, StatusHeartbeatTime: nodemodel.Timestamp(at)}
	}
	hb := durationpb.New(time.Second)
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", Snapshot: true, HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{
		{NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: nodemodel.Timestamp(reporterClock)}, ev(reporterClock)}}
	poll(t, "snapshot", func() bool { return tr.Node("n1").StatusHeartbeat.Equal(reporterClock) })
	first := clk.now()
	clk.add(5 * time.Minute)
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{ev(reporterClock)}}
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{ev(reporterClock.Add(-time.Second))}}
	poll(t, "the earlier heartbeat", func() bool { return tr.Node("n1").StatusHeartbeat.Equal(reporterClock.Add(-time.Second)) })
	if n := tr.Node("n1"); !n.StatusObservedAt.Equal(clk.now()) || n.StatusObservedAt.Equal(first) {
		t.Fatalf("a report whose node's clock stepped back not dated on arrival: %+v", n)
	}
	feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{ev(reporterClock.Add(5 * time.Minute))}}
	poll(t, "report", func() bool { return tr.Node("n1").StatusHeartbeat.Equal(reporterClock.Add(5 * time.Minute)) })
	if n := tr.Node("n1"); !n.StatusObservedAt.Equal(clk.now()) || n.Collector != "c1" || n.Renewals != 0 {
		t.Fatalf("report not dated on arrival, or counted as a renewal: %+v", n)
	}
}
