// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// entry is node name's live entry on its current stream.
func (h *harness) entry(t *testing.T, name string) live.Entry {
	t.Helper()
	h.srv.mu.Lock()
	st := h.srv.streams[name]
	h.srv.mu.Unlock()
	if st == nil {
		t.Fatalf("%s has no stream", name)
	}
	e, ok := h.table.Get(name, st.gen)
	if !ok {
		t.Fatalf("%s has no live entry", name)
	}
	return e
}

// An empty message renews the lease once a LeaseRenewal was sent on the
// stream: numbered after the previous message, dated the last renewal's
// time plus what the collector measured since, for the last duration.
func TestEmptyRenewal(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, a := h.open(t, ctx, "node-e")
	if !a.GetEmptyRenewals() {
		t.Fatalf("register ack does not offer empty renewals: %v", a)
	}
	empty := &collectorv1.ReportRequest{}

	// Before any LeaseRenewal there is no duration to renew with.
	if a := c.do(empty); a.GetSeq() != 2 || a.GetError().GetCode() != uint32(codes.InvalidArgument) || a.GetError().GetField() != "message" {
		t.Fatalf("empty message before a lease renewal: want InvalidArgument on message with seq 2, got %v", a)
	}
	t0 := time.Now().Truncate(time.Microsecond)
	if a := c.do(lease(3, t0)); a.GetError() != nil || a.GetSeq() != 3 {
		t.Fatalf("lease ack %v", a)
	}
	time.Sleep(20 * time.Millisecond)
	if a := c.do(empty); a.GetError() != nil || a.GetSeq() != 4 {
		t.Fatalf("empty renewal: want a plain ack of seq 4, got %v", a)
	}
	e := h.entry(t, "node-e")
	if d := e.RenewTime.Sub(t0); d < 20*time.Millisecond || d > 10*time.Second || e.DurationSeconds != 40 {
		t.Fatalf("empty renewal recorded at %v for %d s; want the last renewal's time plus the ~20 ms between them, for its duration, 40 s", e.RenewTime, e.DurationSeconds)
	}

	// A reporter whose clock is ahead of the collector's by more than a
	// renewal interval: its empty renewals stay on its clock and advance.
	ahead := time.Now().Add(50 * time.Second).Truncate(time.Microsecond)
	if a := c.do(lease(5, ahead)); a.GetError() != nil {
		t.Fatalf("lease ack %v", a)
	}
	time.Sleep(20 * time.Millisecond)
	if a := c.do(empty); a.GetError() != nil || a.GetSeq() != 6 {
		t.Fatalf("empty renewal after a renewal from a clock ahead: %v", a)
	}
	if e := h.entry(t, "node-e"); !e.RenewTime.After(ahead.Add(19*time.Millisecond)) || e.RenewTime.After(ahead.Add(10*time.Second)) {
		t.Fatalf("empty renewal dated %v, want ~20 ms after the last renewal's %v", e.RenewTime, ahead)
	}

	// Its seq follows whatever message came before.
	if a := c.do(statusMsg(7, time.Now(), "True")); a.GetError() != nil {
		t.Fatalf("status ack %v", a)
	}
	if a := c.do(empty); a.GetError() != nil || a.GetSeq() != 8 {
		t.Fatalf("empty renewal after a status: want seq 8, got %v", a)
	}
}

// An empty message costs nothing to decode into a stream's buffer.
func TestEmptyRenewalDecodeAllocatesNothing(t *testing.T) {
	codec, rb := Codec(), new(recvBuf)
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() {
		if err := codec.Unmarshal(mem.BufferSlice{}, rb); err != nil || !rb.empty {
			t.Fatalf("empty message: err %v, empty %v", err, rb.empty)
		}
		rb.empty = false
		rb.emptyRenewal(9, now, 40)
	}); n != 0 {
		t.Fatalf("%v allocations per empty renewal", n)
	}
	if rb.req.GetSeq() != 9 || rb.req.GetLease().GetLeaseDurationSeconds() != 40 || !rb.req.GetLease().GetRenewTime().AsTime().Equal(now) {
		t.Fatalf("empty renewal decoded as %v", &rb.req)
	}
}

// A Send blocked for ackStuckAfter ends its stream, so one reporter that
// does not read cannot hold up the other streams of its sender.
func TestStuckAckEndsItsStream(t *testing.T) {
	h := newHarness(t, nil)
	now := time.Unix(1_700_000_000, 0)
	a := newAckSenders(h.srv)
	ended := false
	st := &stream{s: h.srv, ctx: context.Background(), cancelReader: func() { ended = true }}
	sh := &a.shards[0]
	sh.cur.Store(st)

	sh.since.Store(now.Add(-ackStuckAfter + time.Second).UnixNano())
	a.check(now)
	if ended {
		t.Fatal("a Send blocked for less than ackStuckAfter ended its stream")
	}
	sh.since.Store(now.Add(-ackStuckAfter).UnixNano())
	a.check(now)
	if !ended || st.endCause() != errAcksUnread {
		t.Fatalf("a Send blocked for ackStuckAfter: ended %v, cause %v", ended, st.endCause())
	}
	if err := h.srv.streamEnd(st, nil); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream ends with %v, want ResourceExhausted", err)
	}
}
