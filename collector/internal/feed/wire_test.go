// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package feed

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// received is what a subscriber decodes from m.
func received(t testing.TB, m *collectorv1.WatchLivenessResponse) *collectorv1.WatchLivenessResponse {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got := new(collectorv1.WatchLivenessResponse)
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func randomEvent(r *rand.Rand) live.Event {
	pick := func(vals ...int64) int64 { return vals[r.IntN(len(vals))] }
	e := live.Event{
		Name:            []string{"", "n", "node-000123.zone-a.example.com"}[r.IntN(3)],
		Kind:            collectorv1.LivenessEventKind(r.IntN(7)),
		DurationSeconds: int32(pick(0, 40, -1, math.MaxInt32, math.MinInt32, r.Int64N(3600))),
		RetryWithin:     time.Duration(pick(0, -5, 1, int64(time.Second), int64(90*time.Second+7), r.Int64())),
		Received:        pick(0, -1, 1, int64(time.Second), 1_800_000_000_123_456_789, r.Int64()),
	}
	switch r.IntN(4) {
	case 0: // zero: no renew_time
	case 1:
		e.RenewTime = time.Unix(0, 0)
	case 2:
		e.RenewTime = time.Unix(-1_000_000, 999_999_999)
	default:
		e.RenewTime = time.Unix(1_800_000_000+r.Int64N(1e6), r.Int64N(1e9))
	}
	return e
}

// What a subscriber receives is what it would receive had the events been
// protobuf objects (the coding before wire.go), on random events.
func TestEventsDecodeAsProtoObjects(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	s, _ := newTestServer(t, nil)
	now := time.Unix(1_800_000_000, 5)
	for range 2000 {
		evs := make([]live.Event, r.IntN(12))
		for i := range evs {
			evs[i] = randomEvent(r)
		}
		msgs := s.messages(evs, r.IntN(2) == 0, now)
		if len(msgs) != 1 {
			t.Fatalf("%d messages for %d events", len(msgs), len(evs))
		}
		want := proto.CloneOf(msgs[0])
		want.ProtoReflect().SetUnknown(nil)
		for _, e := range evs {
			pb := &collectorv1.LivenessEvent{NodeName: e.Name, Kind: e.Kind, LeaseDurationSeconds: e.DurationSeconds}
			switch {
			case e.RenewTime.IsZero():
			case e.Kind == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED:
				pb.StatusHeartbeatTime = timestamppb.New(e.RenewTime)
			default:
				pb.RenewTime = timestamppb.New(e.RenewTime)
			}
			if e.Received != 0 {
				pb.ReceivedTime = timestamppb.New(time.Unix(0, e.Received))
			}
			if e.RetryWithin > 0 {
				pb.RetryWithin = durationpb.New(e.RetryWithin)
			}
			want.Events = append(want.Events, pb)
		}
		if got := received(t, msgs[0]); !proto.Equal(got, want) {
			t.Fatalf("received %v\nwant %v", got, want)
		}
		wantBytes, _ := proto.Marshal(want)
		if got, _ := proto.Marshal(msgs[0]); len(got) != len(wantBytes) {
			t.Fatalf("%d bytes on the wire, proto.Marshal of the objects gives %d", len(got), len(wantBytes))
		}
	}
}
