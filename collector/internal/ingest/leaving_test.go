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
	"google.golang.org/grpc/status"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Issue 32, finding 4: renewals and statuses sent after Leaving were
// acked. After Leaving a stream takes nothing but its end: whatever comes
// next ends it with FailedPrecondition naming the state, unacked, and
// nothing of it is stored.
func TestNothingAfterLeaving(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	for _, tc := range []struct {
		name string
		msg  *collectorv1.ReportRequest
	}{
		{"lease", lease(4, now)},
		{"empty renewal", &collectorv1.ReportRequest{}},
		{"status", statusMsg(4, now, "True")},
		{"leaving", &collectorv1.ReportRequest{Seq: 4, Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "again"}}}},
		{"pod status", &collectorv1.ReportRequest{Seq: 4, Message: &collectorv1.ReportRequest_PodStatus{PodStatus: &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "p", Uid: "u"}}}},
	} {
		name := "node-" + strings.ReplaceAll(tc.name, " ", "-")
		c, _ := h.open(t, ctx, name)
		if a := c.do(lease(2, now)); a.GetError() != nil {
			t.Fatalf("%s: lease: %v", tc.name, a)
		}
		if a := c.do(&collectorv1.ReportRequest{Seq: 3, Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "shutdown"}}}); a.GetError() != nil {
			t.Fatalf("%s: leaving: %v", tc.name, a)
		}
		h.srv.mu.Lock()
		gen := h.srv.streams[name].gen
		h.srv.mu.Unlock()
		before := h.entry(t, name).RenewTime
		if err := c.s.Send(tc.msg); err != nil {
			t.Fatal(err)
		}
		var err error
		for {
			var r *collectorv1.ReportResponse
			if r, err = c.s.Recv(); err != nil {
				break
			}
			if a := r.GetAck(); a != nil {
				t.Fatalf("%s after Leaving was answered: %v", tc.name, a)
			}
		}
		st, _ := status.FromError(err)
		if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "Leaving") {
			t.Fatalf("%s after Leaving: stream ended with %v, want FailedPrecondition naming Leaving", tc.name, err)
		}
		if _, err := h.mem.Get(ctx, nodestore.Statuses, name); !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("%s after Leaving: a status was stored (%v)", tc.name, err)
		}
		if e, ok := h.table.Get(name, gen); ok && e.RenewTime.After(before) {
			t.Fatalf("%s after Leaving: the lease was renewed to %v", tc.name, e.RenewTime)
		}
	}
}
