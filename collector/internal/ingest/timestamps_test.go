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
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Only a time no clock can read is refused: before 1970, after the year
// 9999, or nanos out of range. InvalidArgument names the field, nothing
// stored changes, and the stream stays up for the node's next good message.
func TestImpossibleTimestampsRefused(t *testing.T) {
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
	for _, tc := range []struct {
		name string
		ts   *timestamppb.Timestamp
		want string
	}{
		{"year 1", timestamppb.New(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)), "not a time any clock reads"},
		{"1969", timestamppb.New(time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)), "not a time any clock reads"},
		{"year 10000", &timestamppb.Timestamp{Seconds: 253402300800}, "invalid timestamp"},
		{"nanos below zero", &timestamppb.Timestamp{Seconds: now.Unix(), Nanos: -1}, "invalid timestamp"},
		{"nanos of a second or more", &timestamppb.Timestamp{Seconds: now.Unix(), Nanos: 1e9}, "invalid timestamp"},
	} {
		seq++
		r := lease(seq, now)
		r.GetLease().RenewTime = tc.ts
		a := c.do(r)
		if e := a.GetError(); e.GetCode() != uint32(codes.InvalidArgument) || e.GetField() != "lease.renewTime" || !strings.Contains(e.GetMessage(), tc.want) {
			t.Fatalf("renewal dated %s: ack %v, want InvalidArgument on lease.renewTime (%s)", tc.name, a, tc.want)
		}
		if got := h.entry(t, "node-p").RenewTime; !got.Equal(before) {
			t.Fatalf("refused renewal dated %s changed the lease to %v", tc.name, got)
		}
		seq++
		st := statusMsg(seq, now, "True")
		st.GetStatus().GetStatus().GetConditions()[0].LastHeartbeatTime = tc.ts
		a = c.do(st)
		if e := a.GetError(); e.GetCode() != uint32(codes.InvalidArgument) || e.GetField() != "status.conditions[0].lastHeartbeatTime" || a.GetDurable() {
			t.Fatalf("status with a heartbeat dated %s: ack %v, want InvalidArgument on its lastHeartbeatTime", tc.name, a)
		}
		if _, err := h.mem.Get(ctx, nodestore.Statuses, "node-p"); !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("refused status stored: %v", err)
		}
	}
	// The stream is still up: the next good renewal and status are taken.
	seq++
	if a := c.do(lease(seq, now.Add(time.Second))); a.GetError() != nil {
		t.Fatalf("good renewal after the refusals: %v", a)
	}
	seq++
	if a := c.do(statusMsg(seq, now, "True")); a.GetError() != nil || !a.GetDurable() {
		t.Fatalf("good status after the refusals: %v", a)
	}
}

// A reporter clock off by any amount, either way, or stepped by any amount
// mid-stream, is never refused: a year behind, ten minutes, two minutes,
// two ahead, an hour, a year. The renewTime forwarded to the monitors
// still advances on the stream, and every stored report is dated by this
// collector's receipt for the monitors (the skew is measured against it).
func TestSkewedClocksAccepted(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-q")
	seq := uint64(1)
	next := func() uint64 { seq++; return seq }
	const year = 365 * 24 * time.Hour
	for _, off := range []time.Duration{0, -year, -10 * time.Minute, -2 * time.Minute, 2 * time.Minute, time.Hour, year, -year, 0} {
		prev := h.entry(t, "node-q").RenewTime
		at := time.Now().Add(off)
		if a := c.do(lease(next(), at)); a.GetError() != nil {
			t.Fatalf("renewal with the reporter's clock %s off: %v", off, a.GetError())
		}
		if got := h.entry(t, "node-q").RenewTime; !prev.IsZero() && !got.After(prev) {
			t.Fatalf("clock %s off: forwarded renewTime %v does not advance past %v", off, got, prev)
		}
		sent := time.Now()
		if a := c.do(statusMsg(next(), at, "True")); a.GetError() != nil || !a.GetDurable() {
			t.Fatalf("status with the reporter's clock %s off: %v", off, a)
		}
		e := h.entry(t, "node-q")
		if !e.StatusHeartbeat.Equal(at) {
			t.Fatalf("clock %s off: status heartbeat %v, want %v as reported", off, e.StatusHeartbeat, at)
		}
		if e.StatusReceived.Before(sent.Add(-time.Second)) || e.StatusReceived.After(time.Now()) {
			t.Fatalf("clock %s off: report received at %v, not on this collector's clock (sent %v)", off, e.StatusReceived, sent)
		}
	}
}
