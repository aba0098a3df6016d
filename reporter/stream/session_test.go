// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package stream

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Renewals are full LeaseRenewals until one went out, then empty only if
// the collector takes empty ones; the empty one carries no seq but takes
// its number.
func TestRenewalsAndSequence(t *testing.T) {
	now := time.Unix(1_700_000_000, 5)
	for _, emptyOK := range []bool{false, true} {
		s, bad := Open(&collectorv1.Ack{Seq: 1, EmptyRenewals: emptyOK})
		if bad || s.Seq() != 1 {
			t.Fatalf("Open: bad phase %v, seq %d", bad, s.Seq())
		}
		buf := &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{}}}
		first := s.Renewal(now, 40, buf)
		if first != buf || !first.GetLease().GetRenewTime().AsTime().Equal(now) || first.GetLease().GetLeaseDurationSeconds() != 40 {
			t.Fatalf("first renewal %v, want a LeaseRenewal in buf dated now", first)
		}
		if seq := s.Stamp(first); seq != 2 || first.GetSeq() != 2 {
			t.Fatalf("first renewal numbered %d (seq field %d), want 2", seq, first.GetSeq())
		}
		s.Renewed()
		second := s.Renewal(now, 40, nil)
		if empty := proto.Size(second) == 0; empty != emptyOK {
			t.Fatalf("empty_renewals=%v: second renewal empty=%v", emptyOK, empty)
		}
		if seq := s.Stamp(second); seq != 3 || (emptyOK && second.GetSeq() != 0) {
			t.Fatalf("second renewal numbered %d, seq field %d", seq, second.GetSeq())
		}
	}
}

// The collector's phase decides the renewal instants unless a slow-down
// stretched the interval; a phase outside [0, 1) is refused.
func TestPhaseAndSlowDown(t *testing.T) {
	iv := 10 * time.Second
	now := time.Unix(1_700_000_000, 0)
	s, bad := Open(&collectorv1.Ack{Seq: 1, RenewPhase: proto.Float64(0.6)})
	if bad || !s.Phased(iv) {
		t.Fatalf("phase 0.6: bad %v, phased %v", bad, s.Phased(iv))
	}
	if d := s.NextRenewal(now, iv); d != 6*time.Second {
		t.Fatalf("next renewal on phase 0.6 in %s, want 6s", d)
	}
	s.SlowDown(&collectorv1.SlowDown{MinLeaseInterval: durationpb.New(time.Minute)})
	if s.Phased(iv) || s.LeaseInterval(iv) != time.Minute || !s.LeaseAtRisk(iv) {
		t.Fatalf("after a 1m slow-down: phased %v, interval %s, at risk %v", s.Phased(iv), s.LeaseInterval(iv), s.LeaseAtRisk(iv))
	}
	if d := s.NextRenewal(now, iv); d < time.Minute || d > time.Minute+time.Duration(JitterFactor*float64(time.Minute)) {
		t.Fatalf("slowed-down renewal in %s", d)
	}
	if _, bad := Open(&collectorv1.Ack{Seq: 1, RenewPhase: proto.Float64(1)}); !bad {
		t.Fatal("phase 1 accepted")
	}
	if s, _ := Open(nil); s.Phased(iv) || s.Seq() != 1 {
		t.Fatal("Open(nil) must give an unphased session at seq 1")
	}
}

func TestReadRegisterReply(t *testing.T) {
	queued := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
		Command: &collectorv1.Command_RegisterQueued{RegisterQueued: &collectorv1.RegisterQueued{Within: durationpb.New(20 * time.Second)}}}}}
	if r := ReadRegisterReply(queued, 30*time.Second); !r.Queued || r.Wait != 50*time.Second || r.Ack != nil {
		t.Fatalf("queued: %+v", r)
	}
	other := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 2}}}
	if r := ReadRegisterReply(other, time.Second); r.Queued || r.Ack != nil {
		t.Fatalf("an ack of another seq: %+v", r)
	}
	refused := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 1, Error: &collectorv1.Error{Code: 3, Field: "node_name"}}}}
	if r := ReadRegisterReply(refused, time.Second); r.Ack == nil || r.Err == nil {
		t.Fatalf("refused: %+v", r)
	}
}

func TestReadCommandAndRetry(t *testing.T) {
	rc := ReadCommand(&collectorv1.Command{Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{Within: durationpb.New(time.Second)}}})
	if rc.Kind != CmdReconnect || rc.After < 0 || rc.After >= time.Second {
		t.Fatalf("reconnect: %+v", rc)
	}
	if c := ReadCommand(&collectorv1.Command{Command: &collectorv1.Command_ReportStatus{ReportStatus: &collectorv1.ReportStatus{Reason: "x"}}}); c.Kind != CmdReportStatus || c.Reason != "x" {
		t.Fatalf("report status: %+v", c)
	}
	if c := ReadCommand(&collectorv1.Command{}); c.Kind != CmdNone {
		t.Fatalf("empty command: %+v", c)
	}
	if _, ok := RetryAfter(&collectorv1.Ack{Seq: 3}); ok {
		t.Fatal("retry without retry_after")
	}
	if d, ok := RetryAfter(&collectorv1.Ack{Seq: 3, RetryAfter: durationpb.New(4 * time.Second)}); !ok || d < 4*time.Second || d > 6*time.Second {
		t.Fatalf("retry_after 4s: %s %v, want [4s, 6s]", d, ok)
	}
}

// After a reconnect the node's own schedule wins; without one, a stored
// heartbeat younger than the report frequency counts, an older one not.
func TestResumeReports(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	freq := 5 * time.Minute
	stored := func(age time.Duration) *nodev1.NodeStatus {
		return &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True,
			LastHeartbeatTime: timestamppb.New(now.Add(-age))}}}
	}
	own := now.Add(time.Minute)
	if due, ok := ResumeReports(own, stored(time.Hour), now, freq); !ok || !due.Equal(own) {
		t.Fatalf("own schedule: %v %v", due, ok)
	}
	if due, ok := ResumeReports(time.Time{}, stored(time.Minute), now, freq); !ok || !due.Equal(now.Add(4*time.Minute)) {
		t.Fatalf("fresh stored heartbeat: %v %v", due, ok)
	}
	if _, ok := ResumeReports(time.Time{}, stored(freq), now, freq); ok {
		t.Fatal("a stored heartbeat a report frequency old counted")
	}
}
