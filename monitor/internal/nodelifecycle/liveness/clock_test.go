// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package liveness

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// A status report is dated by the collector's receipt, not by the batch's
// arrival (which follows the report's etcd write), and its skew is the
// heartbeat minus that receipt. The collector's and the monitor's clocks
// need not agree: only the report's age at sent_time is used.
func TestStatusReportDatedByCollectorReceipt(t *testing.T) {
	feed, addr := startFeed(t)
	monitorClock := &clock{t: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}
	src := &source{changed: make(chan struct{})}
	tr := runTracker(t, src, monitorClock.now)
	src.set(map[string]*collectorv1.CollectorInfo{"c1": {Id: "c1", FeedAddress: addr}})

	collectorClock := time.Date(2026, 7, 1, 11, 0, 0, 0, time.UTC) // an hour behind the monitor's
	nodeClock := collectorClock.Add(10 * time.Minute)              // ten minutes ahead of its collector's
	hb := durationpb.New(time.Second)
	report := func(snapshot bool, heartbeat, received, sent time.Time) {
		feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", Snapshot: snapshot, HeartbeatInterval: hb, SentTime: nodemodel.Timestamp(sent),
			Events: []*collectorv1.LivenessEvent{{NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED,
				StatusHeartbeatTime: nodemodel.Timestamp(heartbeat), ReceivedTime: nodemodel.Timestamp(received)}}}
	}
	// Received, then written to etcd for 3 s, then sent.
	report(false, nodeClock, collectorClock, collectorClock.Add(3*time.Second))
	poll(t, "report", func() bool { return !tr.Node("n1").StatusHeartbeat.IsZero() })
	n := tr.Node("n1")
	if want := monitorClock.now().Add(-3 * time.Second); !n.StatusObservedAt.Equal(want) {
		t.Fatalf("report dated %v, want %v (the collector's receipt, 3 s before the batch arrived)", n.StatusObservedAt, want)
	}
	if n.ClockSkew != 10*time.Minute || n.ClockSkewAt.IsZero() {
		t.Fatalf("skew %v (measured %v), want 10m", n.ClockSkew, n.ClockSkewAt)
	}

	// The node's clock steps back a year: its next report is earlier than
	// the last, and still a report of a live node.
	monitorClock.add(time.Minute)
	collectorClock = collectorClock.Add(time.Minute)
	back := collectorClock.Add(-365 * 24 * time.Hour)
	report(false, back, collectorClock, collectorClock)
	poll(t, "report after the step", func() bool { return tr.Node("n1").StatusHeartbeat.Equal(back) })
	n = tr.Node("n1")
	if !n.StatusObservedAt.Equal(monitorClock.now()) || n.ClockSkew != -365*24*time.Hour {
		t.Fatalf("after a step back: dated %v, skew %v", n.StatusObservedAt, n.ClockSkew)
	}
	// A snapshot repeating it is no news.
	monitorClock.add(time.Second)
	report(true, back, collectorClock, collectorClock.Add(time.Second))
	applied(t, tr, feed, "c1", "marker-1")
	if got := tr.Node("n1").StatusObservedAt; !got.Equal(monitorClock.now().Add(-time.Second)) {
		t.Fatalf("a snapshot's repetition re-dated the report to %v", got)
	}
}

// Collectors keep renewTimes advancing per stream only. A node whose clock
// stepped back and which reconnected (to another collector, or after a
// detach) renews with earlier renewTimes than the monitor last saw: each
// renewal on its new stream is still a heartbeat.
func TestRenewalsOfANewStreamCountWhateverTheNodesClock(t *testing.T) {
	feed1, addr1 := startFeed(t)
	feed2, addr2 := startFeed(t)
	monitorClock := &clock{t: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}
	src := &source{changed: make(chan struct{})}
	tr := runTracker(t, src, monitorClock.now)
	src.set(map[string]*collectorv1.CollectorInfo{"c1": {Id: "c1", FeedAddress: addr1}, "c2": {Id: "c2", FeedAddress: addr2}})
	hb := durationpb.New(time.Second)
	renew := func(f *fakeFeed, id string, kind collectorv1.LivenessEventKind, rt time.Time) {
		f.batches <- &collectorv1.WatchLivenessResponse{CollectorId: id, HeartbeatInterval: hb,
			Events: []*collectorv1.LivenessEvent{{NodeName: "n1", Kind: kind, RenewTime: nodemodel.Timestamp(rt), LeaseDurationSeconds: 40}}}
	}
	const attached, renewed = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED
	ahead := monitorClock.now().Add(365 * 24 * time.Hour) // a year ahead, then corrected
	renew(feed1, "c1", attached, ahead)
	renew(feed1, "c1", renewed, ahead.Add(10*time.Second))
	poll(t, "renewals on c1", func() bool { return tr.Node("n1").Renewals == 2 })

	// NTP corrects the clock; the reporter reconnects to c2.
	now := monitorClock.now()
	renew(feed2, "c2", attached, now)
	poll(t, "attached to c2", func() bool { return tr.Node("n1").Renewals == 3 })
	for i := 1; i <= 3; i++ {
		monitorClock.add(10 * time.Second)
		renew(feed2, "c2", renewed, now.Add(time.Duration(i)*10*time.Second))
		poll(t, "renewal on c2", func() bool { return tr.Node("n1").Renewals == uint64(3+i) })
		if n := tr.Node("n1"); !n.ObservedAt.Equal(monitorClock.now()) {
			t.Fatalf("renewal %d on the new stream dated %v", i, n.ObservedAt)
		}
	}
	// On one stream, a renewTime that does not advance is still no news.
	renew(feed2, "c2", renewed, now.Add(30*time.Second))
	applied(t, tr, feed2, "c2", "marker-2")
	if n := tr.Node("n1"); n.Renewals != 6 {
		t.Fatalf("a repeated renewTime on one stream counted: %d renewals", n.Renewals)
	}

	// The node crashes and boots again on c2, and its clock steps back a
	// year meanwhile: DETACHED, an ATTACHED before the new stream's first
	// renewal (no renewTime), then renewals a year behind the old ones.
	// (The fault suite found this: kill-fleet, then a clock step.)
	feed2.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c2", HeartbeatInterval: hb, Events: []*collectorv1.LivenessEvent{
		{NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED},
		{NodeName: "n1", Kind: attached}}}
	poll(t, "attached again", func() bool { return tr.Node("n1").Renewals == 7 })
	back := now.Add(-365 * 24 * time.Hour)
	for i := 1; i <= 2; i++ {
		monitorClock.add(10 * time.Second)
		renew(feed2, "c2", renewed, back.Add(time.Duration(i)*10*time.Second))
		poll(t, "renewal after the reboot", func() bool { return tr.Node("n1").Renewals == uint64(7+i) })
	}
}

// The monitor's clock steps forward 10 minutes: every feed looks stale at
// once, so every node is held (never judged on the gap), and the next
// batch gives the whole gap back as blind time; a step back holds nothing
// and gives nothing.
func TestTrackerClockStepForwardHoldsAndGivesBack(t *testing.T) {
	feed, addr := startFeed(t)
	monitorClock := &clock{t: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}
	src := &source{changed: make(chan struct{})}
	tr := runTracker(t, src, monitorClock.now)
	src.set(map[string]*collectorv1.CollectorInfo{"c1": {Id: "c1", FeedAddress: addr}})
	hb := durationpb.New(250 * time.Millisecond)
	rt := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	renew := func() {
		rt = rt.Add(10 * time.Second)
		feed.batches <- &collectorv1.WatchLivenessResponse{CollectorId: "c1", HeartbeatInterval: hb,
			Events: []*collectorv1.LivenessEvent{{NodeName: "n1", Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED, RenewTime: nodemodel.Timestamp(rt), LeaseDurationSeconds: 40}}}
	}
	renew()
	poll(t, "renewal", func() bool { return tr.Node("n1").Renewals == 1 })
	monitorClock.add(10 * time.Minute)
	if n := tr.Node("n1"); !n.Paused || n.Blind != 0 || !tr.AllStale() {
		t.Fatalf("right after a forward step: %+v (all stale %v), want held", n, tr.AllStale())
	}
	renew()
	poll(t, "renewal after the step", func() bool { return tr.Node("n1").Renewals == 2 })
	if n := tr.Node("n1"); n.Paused || n.Blind != 10*time.Minute {
		t.Fatalf("after the next batch: %+v, want not held and the 10 m gap given back", n)
	}
	monitorClock.add(-10 * time.Minute)
	if n := tr.Node("n1"); n.Paused || n.Blind != 10*time.Minute {
		t.Fatalf("after a step back: %+v", n)
	}
	renew()
	poll(t, "renewal after the step back", func() bool { return tr.Node("n1").Renewals == 3 })
	if n := tr.Node("n1"); n.Paused || n.Blind != 10*time.Minute || !n.ObservedAt.Equal(monitorClock.now()) {
		t.Fatalf("renewal after a step back: %+v", n)
	}
}

// applied returns once every batch queued on f before it has been applied:
// it sends one more, a WAITING of a node no other batch names, and waits
// until the tracker has heard it. A feed's batches are applied in order.
func applied(t *testing.T, tr *Tracker, f *fakeFeed, id, marker string) {
	t.Helper()
	f.batches <- &collectorv1.WatchLivenessResponse{CollectorId: id, HeartbeatInterval: durationpb.New(time.Second),
		Events: []*collectorv1.LivenessEvent{{NodeName: marker, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING}}}
	poll(t, "the batches before "+marker, func() bool { return tr.Node(marker).Collector == id })
}
