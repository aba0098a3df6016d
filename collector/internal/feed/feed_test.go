// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package feed

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

type noCommands struct{}

func (noCommands) Command(string, *collectorv1.Command) bool { return false }

// newTestServer is a feed of collector "c" over a fresh table; configure
// adjusts the defaults before New.
func newTestServer(t *testing.T, configure func(*Config)) (*Server, *live.Table) {
	t.Helper()
	table := live.New(1 << 10)
	cfg := DefaultConfig()
	cfg.CollectorID = "c"
	if configure != nil {
		configure(&cfg)
	}
	s, err := New(cfg, table, noCommands{}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, table
}

// A subscriber that stops reading is not allowed to grow memory: once its
// buffer is full its backlog is dropped, and the next thing it reads is a
// snapshot that reflects every change it skipped.
func TestSlowSubscriberGetsSnapshot(t *testing.T) {
	s, table := newTestServer(t, func(c *Config) { c.SubscriberBuffer = 2 })
	cfg := s.cfg
	sub := &subscriber{watcher: "slow", ch: make(chan batch, cfg.SubscriberBuffer), needSnap: true}
	s.subs[sub] = struct{}{}
	now := time.Now()
	gen := table.Attach("node-1", "uid", now)
	// Flush far more batches than the buffer holds, without reading.
	for i := range 10 {
		table.Renew("node-1", gen, now.Add(time.Duration(i)*time.Second), 40)
		if i == 5 {
			table.Attach("node-2", "uid", now)
		}
		s.flush(now.Add(time.Duration(i) * time.Second))
	}
	if len(sub.ch) > cfg.SubscriberBuffer {
		t.Fatalf("buffer grew to %d", len(sub.ch))
	}
	// Drain what is buffered; after a resync the last snapshot must list both
	// nodes with node-1's latest renewal.
	s.flush(now.Add(20 * time.Second))
	var last *collectorv1.WatchLivenessResponse
	for len(sub.ch) > 0 {
		b := <-sub.ch
		for _, m := range b.msgs {
			if m.GetSnapshot() {
				last = m
			}
		}
	}
	if last == nil {
		t.Fatal("no snapshot after falling behind")
	}
	got := map[string]time.Time{}
	for _, e := range received(t, last).GetEvents() {
		got[e.GetNodeName()] = e.GetRenewTime().AsTime()
	}
	if len(got) != 2 || !got["node-1"].Equal(now.Add(9*time.Second)) {
		t.Fatalf("snapshot %v", got)
	}
}

// Large batches are split into messages of at most MaxEventsPerMessage.
func TestMessagesSplit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CollectorID = "c"
	cfg.MaxEventsPerMessage = 3
	s, err := New(cfg, live.New(16), noCommands{}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]live.Event, 7)
	msgs := s.messages(evs, true, time.Now())
	if len(msgs) != 3 || !msgs[0].GetSnapshot() || msgs[1].GetSnapshot() || len(received(t, msgs[2]).GetEvents()) != 1 {
		t.Fatalf("split into %d messages", len(msgs))
	}
	if empty := s.messages(nil, false, time.Now()); len(empty) != 1 || len(received(t, empty[0]).GetEvents()) != 0 {
		t.Fatalf("heartbeat batch %v", empty)
	}
}

// A subscriber of a collector with no node yet gets a snapshot too, with
// no events: it must learn that its view is replaced (a watcher that had
// followed this collector before keeps nothing from then), and its first
// message must not be deltas.
func TestEmptyTableStillSendsSnapshot(t *testing.T) {
	s, table := newTestServer(t, nil)
	sub := &subscriber{watcher: "early", ch: make(chan batch, s.cfg.SubscriberBuffer), needSnap: true}
	s.subs[sub] = struct{}{}
	now := time.Now()
	s.flush(now)
	if len(sub.ch) != 1 {
		t.Fatalf("%d batches queued after the first flush, want 1 (the snapshot)", len(sub.ch))
	}
	b := <-sub.ch
	if len(b.msgs) != 1 || !b.msgs[0].GetSnapshot() || len(received(t, b.msgs[0]).GetEvents()) != 0 {
		t.Fatalf("first batch %v, want one empty snapshot message", b.msgs)
	}
	// Afterwards, deltas as usual.
	table.Attach("node-1", "uid", now)
	s.flush(now.Add(time.Second))
	b = <-sub.ch
	if len(b.msgs) != 1 || b.msgs[0].GetSnapshot() || len(received(t, b.msgs[0]).GetEvents()) != 1 {
		t.Fatalf("second batch %v, want node-1's attach as a delta", b.msgs)
	}
}

// Finish (a draining collector whose reporters are gone) delivers the last
// events — the detaches — and then ends every feed stream cleanly, so the
// gRPC server's graceful stop does not wait for watchers.
func TestFinishSendsLastEventsAndEndsStreams(t *testing.T) {
	s, table := newTestServer(t, func(c *Config) {
		c.BatchInterval = time.Hour // flushed by hand below
		c.HeartbeatInterval = time.Hour
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectorv1.RegisterFeedServiceServer(srv, s)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	gen := table.Attach("node-1", "uid", time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := collectorv1.NewFeedServiceClient(cc).WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		s.mu.Lock()
		n := len(s.subs)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.flush(time.Now())
	if m, err := stream.Recv(); err != nil || !m.GetSnapshot() {
		t.Fatalf("first message: %v, %v", m, err)
	}

	table.Detach("node-1", gen)
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	s.Finish()
	m, err := stream.Recv()
	if err != nil || len(m.GetEvents()) != 1 || m.GetEvents()[0].GetKind() != collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED {
		t.Fatalf("last message: %v, %v; want node-1's detach", m, err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the last events: %v, want the stream ended (EOF)", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("graceful stop still waiting for the feed stream")
	}
	s.Finish() // idempotent
}

// A node heard waiting before anyone followed the feed (a collector that
// just started) is in the first subscriber's snapshot, with when it was
// heard; it leaves the snapshots when it attaches, or WaitingMemory after it
// was last heard.
func TestSnapshotsRepeatWaitingNodes(t *testing.T) {
	s, table := newTestServer(t, nil)
	t0 := time.Unix(1_000_000, 0)
	table.Waiting("early", t0, 0)
	table.Waiting("attaches", t0, 0)
	s.flush(t0.Add(time.Second)) // nobody subscribed: the events go nowhere
	snapshot := func(at time.Time) map[string]time.Time {
		t.Helper()
		sub := &subscriber{watcher: "m", ch: make(chan batch, 4), needSnap: true}
		s.subs[sub] = struct{}{}
		defer delete(s.subs, sub)
		s.flush(at)
		got := map[string]time.Time{}
		for _, m := range (<-sub.ch).msgs {
			if !m.GetSnapshot() {
				t.Fatalf("first batch is not a snapshot: %v", m)
			}
			for _, e := range received(t, m).GetEvents() {
				if e.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING {
					got[e.GetNodeName()] = e.GetRenewTime().AsTime()
				}
			}
		}
		return got
	}
	if got := snapshot(t0.Add(2 * time.Second)); len(got) != 2 || !got["early"].Equal(t0) {
		t.Fatalf("waiting in the first snapshot: %v, want early and attaches heard at %v", got, t0)
	}
	table.Attach("attaches", "uid", t0.Add(3*time.Second))
	table.Waiting("late", t0.Add(20*time.Second), 0)
	got := snapshot(t0.Add(live.WaitingMemory))
	if len(got) != 2 || !got["early"].Equal(t0) || !got["late"].Equal(t0.Add(20*time.Second)) {
		t.Fatalf("waiting after an attach: %v, want early and late", got)
	}
	got = snapshot(t0.Add(live.WaitingMemory + time.Second))
	if len(got) != 1 || got["late"].IsZero() {
		t.Fatalf("waiting once early is WaitingMemory old: %v, want only late", got)
	}
}
