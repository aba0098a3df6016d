// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Issue 32, finding 3: a renewal dated 0001-01-01 was acked, and statuses
// whose heartbeats were dated year 1, 1970 or a day ago were stored as
// durable. Each is refused now, InvalidArgument naming the field, the
// value and the bound, and nothing stored changes.
func TestTimestampsInThePastRefused(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-p")
	now := time.Now()
	if a := c.do(lease(2, now)); a.GetError() != nil {
		t.Fatalf("lease: %v", a)
	}
	before := h.entry(t, "node-p").RenewTime
	seq := uint64(2)
	for _, old := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), now.Add(-24 * time.Hour)} {
		seq++
		a := c.do(lease(seq, old))
		e := a.GetError()
		if e.GetCode() != uint32(codes.InvalidArgument) || e.GetField() != "lease.renewTime" ||
			!strings.Contains(e.GetMessage(), old.UTC().Format(time.RFC3339Nano)) || !strings.Contains(e.GetMessage(), "not before") {
			t.Fatalf("renewal dated %v: ack %v, want InvalidArgument on lease.renewTime naming the value and the bound", old, a)
		}
		if got := h.entry(t, "node-p").RenewTime; !got.Equal(before) {
			t.Fatalf("refused renewal dated %v changed the lease to %v", old, got)
		}
		seq++
		a = c.do(statusMsg(seq, old, "True"))
		if e := a.GetError(); e.GetCode() != uint32(codes.InvalidArgument) || e.GetField() != "status.conditions[0].lastHeartbeatTime" || a.GetDurable() {
			t.Fatalf("status with a heartbeat dated %v: ack %v, want InvalidArgument on its lastHeartbeatTime", old, a)
		}
		if _, err := h.mem.Get(ctx, nodestore.Statuses, "node-p"); !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("refused status stored: %v", err)
		}
	}
	// A transition time may be old, but not from a clock never set.
	seq++
	bad := statusMsg(seq, now, "True")
	bad.GetStatus().GetStatus().GetConditions()[0].LastTransitionTime.Seconds = 0
	if a := c.do(bad); a.GetError().GetField() != "status.conditions[0].lastTransitionTime" {
		t.Fatalf("status with a transition in 1970: %v", a)
	}
}

// A reporter clock stepped back or forward by up to --max-clock-skew (from
// a clock in step with the collector's, or from one off by less) is never
// refused, and the renewTime forwarded to the monitors still
// advances (they take a renewTime that does not as no news).
func TestClockStepWithinSkewAccepted(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-q")
	now := time.Now()
	seq := uint64(1)
	next := func() uint64 { seq++; return seq }
	if a := c.do(lease(next(), now)); a.GetError() != nil {
		t.Fatalf("lease: %v", a)
	}
	if a := c.do(statusMsg(next(), now, "True")); a.GetError() != nil || !a.GetDurable() {
		t.Fatalf("status: %v", a)
	}
	skew := h.srv.cfg.Limits.MaxClockSkew
	// The reporter's clock, relative to the collector's: each step from
	// one to the next is within the skew.
	for _, step := range []time.Duration{-5 * time.Second, -skew + time.Second, 0, 5 * time.Second, skew - time.Second, 0, -3 * time.Second} {
		prev := h.entry(t, "node-q").RenewTime
		at := time.Now().Add(step)
		if a := c.do(lease(next(), at)); a.GetError() != nil {
			t.Fatalf("renewal with the reporter's clock %s off: %v", step, a.GetError())
		}
		if got := h.entry(t, "node-q").RenewTime; !got.After(prev) {
			t.Fatalf("clock step %s: forwarded renewTime %v does not advance past %v", step, got, prev)
		}
		if a := c.do(statusMsg(next(), at, "True")); a.GetError() != nil || !a.GetDurable() {
			t.Fatalf("status with the reporter's clock %s off: %v", step, a)
		}
	}
	// The node's last accepted heartbeat is a skew ahead; one more than a
	// skew behind it is refused even though it is within the skew of the
	// collector's clock.
	if a := c.do(statusMsg(next(), time.Now().Add(skew-time.Second), "True")); a.GetError() != nil {
		t.Fatalf("status a skew ahead: %v", a)
	}
	if a := c.do(statusMsg(next(), time.Now().Add(-2*time.Second), "True")); a.GetError().GetField() != "status.conditions[0].lastHeartbeatTime" ||
		!strings.Contains(a.GetError().GetMessage(), "last accepted") {
		t.Fatalf("status more than a skew behind the last accepted: %v", a)
	}
}

// A status stored before the bounds existed may carry a heartbeat in the
// year 1 or far ahead; it bounds nothing (and does not overflow).
func TestUnixNanoBounds(t *testing.T) {
	for _, tc := range []time.Time{{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if n := unixNano(tc); n != 0 || !fromUnixNano(n).IsZero() {
			t.Errorf("unixNano(%v) = %d, want 0 (none)", tc, n)
		}
	}
	now := time.Now()
	if !fromUnixNano(unixNano(now)).Equal(now) {
		t.Errorf("round trip of %v", now)
	}
}
