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
