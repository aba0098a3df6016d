// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package liveness

import (
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Heartbeat is what the monitor has heard of one node, from every source at
// once: the live feeds (Node), the leases/ checkpoint and the reported
// status the cache holds from etcd, and the fresh grace periods the node is
// owed. It is the one liveness value the lifecycle rules read (spec §6.2
// steps 2-3): which evidence is newest, when it arrived on the monitor's
// clock, and whether the node may be judged at all right now.
//
// Reporter-clock times (LeaseRenew, StatusHeartbeat) are only ever compared
// with earlier values of the same node, never with the monitor's clock.
type Heartbeat struct {
	// LeaseRenew is the newest lease renewTime known: the feed's when it is
	// at least as new as etcd's checkpoint, else the checkpoint's.
	LeaseRenew time.Time
	// LeaseObservedAt is the monitor's clock when LeaseRenew arrived, known
	// only when it came from the feed; zero means "seen now".
	LeaseObservedAt time.Time
	// StatusHeartbeat is the newest heartbeat of the reporter's status
	// reports known: the Ready condition's lastHeartbeatTime in the stored
	// status (see Merge for a status without one), or a later report's from
	// the feed (STATUS_REPORTED) or the lease checkpoint. A change of it
	// is liveness, as a changed Ready heartbeat is upstream (spec §6.7).
	StatusHeartbeat time.Time
	// StatusObservedAt is the monitor's clock when StatusHeartbeat arrived,
	// known only when it came from the feed; zero means "seen now".
	StatusObservedAt time.Time
	// Reported is the heartbeat of the latest status report seen on the
	// feed or in the checkpoint (Reported; zero when none): what the API
	// serves as the reporter's conditions' lastHeartbeatTime when it is
	// later than theirs (nodemodel.WithHeartbeat).
	Reported time.Time
	// Renewals counts live renewals seen on the feeds (Node.Renewals);
	// ObservedAt is when the newest arrived (Node.ObservedAt).
	Renewals   uint64
	ObservedAt time.Time
	// Epoch changes whenever the node is owed a fresh grace period: its
	// collector vanished (Node.Epoch) or the controller resumed judging
	// after a pause (Grants.Epoch). Only its changes matter.
	Epoch uint64
	// FreshSince is when the current leadership began (Grants.Since): a
	// node that never reported Ready is judged from then at the earliest.
	FreshSince time.Time
	// Held: the node's feed is stale, so renewals may be on their way that
	// the monitor cannot see; it must not be judged (Node.Paused).
	Held bool
	// Blind is how long, in total, the monitor could not see the node's
	// feed (Node.Blind, a counter that only grows).
	Blind time.Duration
	// QuietUntil: a collector told the node to stay away until then
	// (Node.QuietUntil); its grace period does not run before that.
	QuietUntil time.Time
	// Collector the node was last heard on, for logs.
	Collector string
	// ClockSkew and ClockSkewAt: Node.ClockSkew, Node.ClockSkewAt; shown
	// (events, metrics), never judged by.
	ClockSkew   time.Duration
	ClockSkewAt time.Time
}

// Grants are the fresh grace periods the controller itself hands out: every
// node is judged from the start of its leadership (Since) at the earliest,
// and Epoch grows each time judgement resumes after a pause.
type Grants struct {
	Since time.Time
	Epoch uint64
}

// Merge combines the feed's view of a node with the lease and status the
// cache holds for it (either may be nil) into one Heartbeat.
//
// A checkpoint in etcd lags the live feed by up to the collector's
// checkpoint interval. Both renewTimes come from the same reporter's clock,
// so they compare: a checkpoint that is not newer than what the feed already
// delivered is old news, not a heartbeat, and must not restart the grace
// period (it would delay detection of a dead node). The feed's renewal is
// then dated by its arrival, not by the pass that reads it.
func Merge(feed Node, lease *nodev1.Lease, status *nodev1.NodeStatus, g Grants) Heartbeat {
	hb := Heartbeat{
		Renewals: feed.Renewals, ObservedAt: feed.ObservedAt, Epoch: g.Epoch + feed.Epoch, FreshSince: g.Since,
		Held: feed.Paused, Blind: feed.Blind, QuietUntil: feed.QuietUntil, Collector: feed.Collector,
		ClockSkew: feed.ClockSkew, ClockSkewAt: feed.ClockSkewAt,
	}
	if rt := lease.GetSpec().GetRenewTime(); rt != nil {
		hb.LeaseRenew = rt.AsTime()
	}
	if !feed.RenewTime.IsZero() && !feed.RenewTime.Before(hb.LeaseRenew) {
		hb.LeaseRenew, hb.LeaseObservedAt = feed.RenewTime, feed.ObservedAt
	}
	// A missing Ready or heartbeat reads as the Unix epoch (protobuf's nil
	// timestamp), not as zero: its appearance or its loss is a change.
	hb.StatusHeartbeat = nodemodel.FindCondition(status.GetConditions(), nodemodel.Ready).GetLastHeartbeatTime().AsTime()
	// Unchanged reports are not written to status/: their heartbeats come
	// from the feed, or coarsely from the checkpoint. Only a later one
	// replaces the stored Ready's, so a report already stored is not heard
	// twice; the feed's is dated by its arrival.
	// The checkpoint's time is converted once (a pass merges every node).
	cp := checkpointed(lease)
	if cp.After(hb.StatusHeartbeat) {
		hb.StatusHeartbeat = cp
	}
	if feed.StatusHeartbeat.After(hb.StatusHeartbeat) {
		hb.StatusHeartbeat, hb.StatusObservedAt = feed.StatusHeartbeat, feed.StatusObservedAt
	}
	hb.Reported = feed.StatusHeartbeat
	if cp.After(hb.Reported) {
		hb.Reported = cp
	}
	return hb
}

// checkpointed is the status heartbeat the lease's checkpoint carries,
// zero when it carries none.
func checkpointed(lease *nodev1.Lease) time.Time {
	if cp := lease.GetPersistence().GetStatusHeartbeatTime(); cp != nil {
		return cp.AsTime()
	}
	return time.Time{}
}

// Reported is the heartbeat of the node's latest status report that
// status/ may not hold: the later of the feed's (STATUS_REPORTED) and the
// lease checkpoint's. Zero when neither has one. Each served condition
// takes the later of its own stored heartbeat and this one
// (nodemodel.WithHeartbeat): a report stamps all of them at once.
func Reported(feed Node, lease *nodev1.Lease) time.Time {
	hb := feed.StatusHeartbeat
	if cp := checkpointed(lease); cp.After(hb) {
		hb = cp
	}
	return hb
}
