// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package liveness

import (
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Merge picks the newest lease renewTime of the feed and etcd's checkpoint
// (the feed on a tie, dated by its arrival), reads the status heartbeat and
// adds the controller's grants to the feed's.
func TestMergeHeartbeat(t *testing.T) {
	base := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	arrived := base.Add(time.Hour) // the monitor's clock; renewTimes are the reporter's
	lease := func(at time.Time) *nodev1.Lease {
		return &nodev1.Lease{Spec: &nodev1.LeaseSpec{RenewTime: nodemodel.Timestamp(at)}}
	}
	feed := func(renew time.Time) Node { return Node{Renewals: 3, RenewTime: renew, ObservedAt: arrived} }
	for _, tc := range []struct {
		name         string
		feed         Node
		lease        *nodev1.Lease
		renew, dated time.Time
	}{
		{"nothing heard", Node{}, nil, time.Time{}, time.Time{}},
		{"etcd checkpoint only: seen now", Node{}, lease(base), base, time.Time{}},
		{"lease without renewTime", Node{}, &nodev1.Lease{}, time.Time{}, time.Time{}},
		{"feed newer than the checkpoint: dated on arrival", feed(base.Add(time.Second)), lease(base), base.Add(time.Second), arrived},
		{"a tie is the feed's: the checkpoint is old news", feed(base), lease(base), base, arrived},
		{"checkpoint newer than the feed", feed(base), lease(base.Add(time.Second)), base.Add(time.Second), time.Time{}},
		{"feed only", feed(base), nil, base, arrived},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := Merge(tc.feed, tc.lease, nil, Grants{})
			if !hb.LeaseRenew.Equal(tc.renew) || !hb.LeaseObservedAt.Equal(tc.dated) {
				t.Fatalf("lease %v dated %v, want %v dated %v", hb.LeaseRenew, hb.LeaseObservedAt, tc.renew, tc.dated)
			}
			if hb.Renewals != tc.feed.Renewals || !hb.ObservedAt.Equal(tc.feed.ObservedAt) {
				t.Errorf("feed counters %d/%v, want %d/%v", hb.Renewals, hb.ObservedAt, tc.feed.Renewals, tc.feed.ObservedAt)
			}
		})
	}

	status := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True, LastHeartbeatTime: nodemodel.Timestamp(base)}}}
	since := arrived.Add(-time.Minute)
	n := Node{Epoch: 2, Paused: true, Blind: 3 * time.Second, QuietUntil: arrived.Add(time.Minute), Collector: "c1"}
	hb := Merge(n, nil, status, Grants{Since: since, Epoch: 5})
	if !hb.StatusHeartbeat.Equal(base) {
		t.Errorf("status heartbeat %v, want %v", hb.StatusHeartbeat, base)
	}
	if hb.Epoch != 7 || !hb.FreshSince.Equal(since) || !hb.Held || hb.Blind != n.Blind || !hb.QuietUntil.Equal(n.QuietUntil) || hb.Collector != "c1" {
		t.Errorf("grants and holds not carried: %+v", hb)
	}
	// No Ready heartbeat reads as protobuf's nil time, the Unix epoch, so
	// losing it is a change the rules see.
	if got := Merge(Node{}, nil, &nodev1.NodeStatus{}, Grants{}).StatusHeartbeat; !got.Equal(time.Unix(0, 0)) {
		t.Errorf("status without Ready: heartbeat %v, want the Unix epoch", got)
	}
}

// The status heartbeat is the newest of the stored Ready's, the lease
// checkpoint's and the feed's (STATUS_REPORTED): unchanged reports never
// reach status/. Only the feed's is dated by its arrival; Reported is the
// newest of the feed's and the checkpoint's, for the API to serve.
func TestMergeStatusHeartbeat(t *testing.T) {
	base := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	arrived := base.Add(time.Hour)
	status := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True, LastHeartbeatTime: nodemodel.Timestamp(base)}}}
	checkpoint := func(at time.Time) *nodev1.Lease {
		return &nodev1.Lease{Persistence: &nodev1.LeasePersistence{StatusHeartbeatTime: nodemodel.Timestamp(at)}}
	}
	feed := func(at time.Time) Node { return Node{StatusHeartbeat: at, StatusObservedAt: arrived} }
	for _, tc := range []struct {
		name     string
		feed     Node
		lease    *nodev1.Lease
		want, at time.Time
		reported time.Time
	}{
		{"stored only", Node{}, nil, base, time.Time{}, time.Time{}},
		{"feed newer: dated on arrival", feed(base.Add(5 * time.Minute)), nil, base.Add(5 * time.Minute), arrived, base.Add(5 * time.Minute)},
		{"feed equal to stored: the stored report, not news", feed(base), nil, base, time.Time{}, base},
		{"checkpoint newer: seen now", Node{}, checkpoint(base.Add(5 * time.Minute)), base.Add(5 * time.Minute), time.Time{}, base.Add(5 * time.Minute)},
		{"checkpoint older than stored", Node{}, checkpoint(base.Add(-time.Minute)), base, time.Time{}, base.Add(-time.Minute)},
		{"feed newer than checkpoint", feed(base.Add(10 * time.Minute)), checkpoint(base.Add(5 * time.Minute)), base.Add(10 * time.Minute), arrived, base.Add(10 * time.Minute)},
		{"checkpoint newer than feed", feed(base.Add(5 * time.Minute)), checkpoint(base.Add(10 * time.Minute)), base.Add(10 * time.Minute), time.Time{}, base.Add(10 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := Merge(tc.feed, tc.lease, status, Grants{})
			if !hb.StatusHeartbeat.Equal(tc.want) || !hb.StatusObservedAt.Equal(tc.at) {
				t.Fatalf("status heartbeat %v dated %v, want %v dated %v", hb.StatusHeartbeat, hb.StatusObservedAt, tc.want, tc.at)
			}
			if !hb.Reported.Equal(tc.reported) {
				t.Fatalf("reported %v, want %v", hb.Reported, tc.reported)
			}
		})
	}
	if got := Reported(Node{}, nil); !got.IsZero() {
		t.Errorf("nothing reported: %v, want zero", got)
	}
}
