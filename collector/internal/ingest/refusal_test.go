// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/identity"
)

// A refused Register ends the stream with a status that carries a retry
// delay (google.rpc.RetryInfo), so reporters stay away instead of retrying
// into an overloaded or cut-off collector at once; the monitors hear the
// node WAITING for that delay and the reporter's jitter, so the wait it was
// asked for does not count against its grace period.
func TestRefusedRegisterCarriesRetryInfo(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.RetryAfter = 3 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second) // a missing event fails, not hangs
	defer wcancel()
	w, err := h.fc.WatchLiveness(wctx, &collectorv1.WatchLivenessRequest{Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := w.Recv(); err != nil || !b.GetSnapshot() {
		t.Fatalf("first feed batch: snapshot %v, %v", b.GetSnapshot(), err)
	}
	h.mem.Fail(errors.New("injected outage"))
	waitFor(t, func() bool { return !h.p.Available() })
	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(register("node-r")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("register during outage: %v", err)
	}
	if delay := retryDelay(st); delay != 3*time.Second {
		t.Fatalf("retry delay %s, want 3s (details %v)", delay, st.Details())
	}
	for {
		b, err := w.Recv()
		if err != nil {
			t.Fatalf("no WAITING with retry_within for the refused node-r: %v", err)
		}
		for _, ev := range b.GetEvents() {
			if ev.GetNodeName() == "node-r" && ev.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING && ev.GetRetryWithin() != nil {
				if got := ev.GetRetryWithin().AsDuration(); got != 4500*time.Millisecond {
					t.Fatalf("WAITING retry_within %s, want the retry delay plus half (4.5s)", got)
				}
				return
			}
		}
	}
}

// While the registration queue is full a new stream is refused at once,
// before its Register is read, with a RetryInfo delay; once the queue
// drains, registrations go through again.
func TestFullRegistrationQueueRefusesStreamsAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config, p *persist.Config) {
		p.RegisterQueueSize, p.RegisterConcurrency = 1, 1
		c.WaitingInterval = 20 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make(chan struct{})
	h.store.hold.Store(&hold)
	send := func(name string) { sendRegister(t, ctx, h, name) }
	// The only worker's batch waits in etcd; the next registration fills
	// the one-place queue.
	send("node-a")
	waitFor(t, func() bool { return h.store.held.Load() > 0 })
	send("node-b")
	waitFor(t, h.p.RegisterQueueFull)

	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second) // a missing event fails, not hangs
	defer wcancel()
	w, err := h.fc.WatchLiveness(wctx, &collectorv1.WatchLivenessRequest{Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// The first batch is the snapshot (attached nodes only); WAITING is an
	// event, so subscribe before the refusals.
	if b, err := w.Recv(); err != nil || !b.GetSnapshot() {
		t.Fatalf("first feed batch: snapshot %v, %v", b.GetSnapshot(), err)
	}
	refused := func(md ...string) time.Duration {
		t.Helper()
		s, err := h.client.Report(metadata.AppendToOutgoingContext(ctx, md...))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv() // nothing sent: refused without reading a Register
		st, _ := status.FromError(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("stream opened on a full registration queue: %v", err)
		}
		delay := retryDelay(st)
		if delay < time.Second {
			t.Fatalf("retry delay %s, want at least 1s (details %v)", delay, st.Details())
		}
		return delay
	}
	// node-a's Register waits in etcd: it is reported WAITING again and
	// again while it does, not only when it was read.
	for n := 0; n < 2; {
		b, err := w.Recv()
		if err != nil {
			t.Fatalf("node-a not reported WAITING while its registration waits: %v", err)
		}
		for _, ev := range b.GetEvents() {
			if ev.GetNodeName() == "node-a" && ev.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING {
				if ev.GetRetryWithin() != nil {
					t.Fatalf("queued node-a WAITING with retry_within %v: it was not told to stay away", ev.GetRetryWithin().AsDuration())
				}
				n++
			}
		}
	}
	// Refused reporters that name their node (and may report for it) are
	// alive: the monitors hear a WAITING event. Nameless or badly named
	// ones are refused without one.
	refused()
	refused(identity.NodeMetadata, "Bad_Name")
	delay := refused(identity.NodeMetadata, "node-w")
	for {
		b, err := w.Recv()
		if err != nil {
			t.Fatalf("no WAITING event for node-w: %v", err)
		}
		var waiting []string
		for _, ev := range b.GetEvents() {
			// node-a and node-b keep waiting in the queue meanwhile.
			if n := ev.GetNodeName(); ev.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING && n != "node-a" && n != "node-b" {
				waiting = append(waiting, n)
				// The monitors learn how long it may stay away: the
				// delay it was told plus the reporters' jitter (half again).
				if got, want := ev.GetRetryWithin().AsDuration(), delay+delay/2; got != want {
					t.Fatalf("%s WAITING retry_within %s, want %s (retry delay %s + half)", n, got, want, delay)
				}
			}
		}
		if len(waiting) > 0 {
			if len(waiting) != 1 || waiting[0] != "node-w" {
				t.Fatalf("WAITING events %v, want only node-w", waiting)
			}
			break
		}
	}

	h.store.hold.Store(nil)
	close(hold)
	waitFor(t, func() bool { return !h.p.RegisterQueueFull() })
	if _, ack := h.open(t, ctx, "node-c"); ack.GetError() != nil {
		t.Fatalf("register after the queue drained: %v", ack.GetError())
	}
	// A Register that was read is WAITING too until it is attached: it may
	// sit in the queue for seconds.
	for seen := false; !seen; {
		b, err := w.Recv()
		if err != nil {
			t.Fatalf("no WAITING event for node-c: %v", err)
		}
		for _, ev := range b.GetEvents() {
			seen = seen || ev.GetNodeName() == "node-c" && ev.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING
		}
	}
}

// sendRegister opens a Report stream and sends name's Register, without
// waiting for the answer.
func sendRegister(t *testing.T, ctx context.Context, h *harness, name string) collectorv1.CollectorService_ReportClient {
	t.Helper()
	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(register(name)); err != nil {
		t.Fatal(err)
	}
	return s
}

// retryDelay is the RetryInfo delay a status carries, 0 without one.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// A Register that will wait in the registration queue is told so with the
// time it may take (Command.register_queued), told again while it waits,
// and answered when its turn comes: its reporter waits on the stream
// instead of giving up at its register timeout. The monitors hear the same
// time in its WAITING event.
func TestQueuedRegisterIsToldAndAnswered(t *testing.T) {
	const refresh = 50 * time.Millisecond
	h := newHarness(t, func(c *Config, p *persist.Config) {
		p.RegisterConcurrency = 1
		// One queued registration is 10 ms of wait at the assumed rate of
		// 100 per worker per second.
		c.QueuedAfter = 5 * time.Millisecond
		c.WaitingInterval = refresh
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a missing message fails, not hangs
	defer cancel()
	hold := make(chan struct{})
	h.store.hold.Store(&hold)
	w, err := h.fc.WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	open := func(name string) collectorv1.CollectorService_ReportClient { return sendRegister(t, ctx, h, name) }
	// node-a's batch waits in etcd, node-b waits in the queue before
	// node-c: node-c's expected wait is one registration's.
	a := open("node-a")
	waitFor(t, func() bool { return h.store.held.Load() > 0 })
	b := open("node-b")
	waitFor(t, func() bool { return h.p.RegisterWait() > 0 })
	c := open("node-c")

	want := queuedWithin(10*time.Millisecond, refresh)
	r, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetCommand().GetRegisterQueued().GetWithin().AsDuration(); got != want {
		t.Fatalf("first message to a queued Register: %v, want register_queued within %s", r, want)
	}
	// Told again while the wait lasts, with the refresh interval.
	r, err = c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetCommand().GetRegisterQueued().GetWithin().AsDuration(); got != refresh {
		t.Fatalf("second message to a queued Register: %v, want register_queued within %s", r, refresh)
	}
	for seen := false; !seen; {
		batch, err := w.Recv()
		if err != nil {
			t.Fatalf("no WAITING event for node-c: %v", err)
		}
		for _, ev := range batch.GetEvents() {
			if ev.GetNodeName() == "node-c" && ev.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING && ev.GetRetryWithin() != nil {
				if got := ev.GetRetryWithin().AsDuration(); got != want {
					t.Fatalf("node-c WAITING retry_within %s, want %s", got, want)
				}
				seen = true
			}
		}
	}

	h.store.hold.Store(nil)
	close(hold)
	for name, s := range map[string]collectorv1.CollectorService_ReportClient{"node-a": a, "node-b": b, "node-c": c} {
		for {
			r, err := s.Recv()
			if err != nil {
				t.Fatalf("%s: no register ack: %v", name, err)
			}
			if r.GetCommand().GetRegisterQueued() != nil {
				continue // refreshes sent before the answer
			}
			if ack := r.GetAck(); ack.GetSeq() != 1 || ack.GetError() != nil || ack.GetNode() == nil {
				t.Fatalf("%s: first answer after the wait %v, want the register ack", name, r)
			}
			break
		}
	}
}
