// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// TestUnchangedStatusHeartbeatOnFeed: an unchanged status report costs no
// etcd write, and its heartbeat reaches the monitors on the feed as
// STATUS_REPORTED (spec §6.7): the only place it travels.
func TestUnchangedStatusHeartbeatOnFeed(t *testing.T) {
	h := newHarness(t, func(_ *Config, pc *persist.Config) { pc.CheckpointInterval = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := h.fc.WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := h.open(t, ctx, "node-hb")
	now := time.Now()
	if a := c.do(statusMsg(2, now, "True")); !a.GetDurable() {
		t.Fatalf("status ack %v", a)
	}
	base := h.store.applies.Load()
	later := now.Add(time.Minute)
	if a := c.do(statusMsg(3, later, "True")); !a.GetDurable() {
		t.Fatalf("unchanged status ack %v", a)
	}
	if n := h.store.applies.Load() - base; n != 0 {
		t.Fatalf("unchanged status cost %d Applies, want 0", n)
	}
	var seen []time.Time
	for {
		b, err := w.Recv()
		if err != nil {
			t.Fatalf("feed ended before the unchanged report's heartbeat arrived (seen %v): %v", seen, err)
		}
		for _, ev := range b.GetEvents() {
			if ev.GetNodeName() != "node-hb" || ev.GetKind() != collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED {
				continue
			}
			hb := ev.GetStatusHeartbeatTime().AsTime()
			seen = append(seen, hb)
			if hb.Equal(later) {
				if len(seen) > 2 {
					t.Fatalf("status heartbeats on the feed %v, want at most the written one and the unchanged one", seen)
				}
				return
			}
		}
	}
}
