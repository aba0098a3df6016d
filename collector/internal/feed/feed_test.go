package feed

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

type noCommands struct{}

func (noCommands) Command(string, *collectorv1.Command) bool { return false }

// A subscriber that stops reading is not allowed to grow memory: once its
// buffer is full its backlog is dropped, and the next thing it reads is a
// snapshot that reflects every change it skipped.
func TestSlowSubscriberGetsSnapshot(t *testing.T) {
	table := live.New(1 << 10)
	cfg := DefaultConfig()
	cfg.CollectorID = "c"
	cfg.SubscriberBuffer = 2
	s, err := New(cfg, table, noCommands{}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := &subscriber{watcher: "slow", ch: make(chan batch, cfg.SubscriberBuffer), needSnap: true}
	s.subs[sub] = struct{}{}
	now := time.Now()
	gen := table.Attach("node-1", "uid", now)
	// Flush far more batches than the buffer holds, without reading.
	for i := range 10 {
		table.Renew("node-1", gen, now.Add(time.Duration(i)*time.Second), 40)
		if i == 5 {
			table.Attach("node-2", "uid", now)
		}
		s.flush(now.Add(time.Duration(i) * time.Second))
	}
	if len(sub.ch) > cfg.SubscriberBuffer {
		t.Fatalf("buffer grew to %d", len(sub.ch))
	}
	// Drain what is buffered; after a resync the last snapshot must list both
	// nodes with node-1's latest renewal.
	s.flush(now.Add(20 * time.Second))
	var last *collectorv1.WatchLivenessResponse
	for len(sub.ch) > 0 {
		b := <-sub.ch
		for _, m := range b.msgs {
			if m.GetSnapshot() {
				last = m
			}
		}
	}
	if last == nil {
		t.Fatal("no snapshot after falling behind")
	}
	got := map[string]time.Time{}
	for _, e := range last.GetEvents() {
		got[e.GetNodeName()] = e.GetRenewTime().AsTime()
	}
	if len(got) != 2 || !got["node-1"].Equal(now.Add(9*time.Second)) {
		t.Fatalf("snapshot %v", got)
	}
}

// Large batches are split into messages of at most MaxEventsPerMessage.
func TestMessagesSplit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CollectorID = "c"
	cfg.MaxEventsPerMessage = 3
	s, err := New(cfg, live.New(16), noCommands{}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]live.Event, 7)
	msgs := s.messages(evs, true, time.Now())
	if len(msgs) != 3 || !msgs[0].GetSnapshot() || msgs[1].GetSnapshot() || len(msgs[2].GetEvents()) != 1 {
		t.Fatalf("split into %d messages", len(msgs))
	}
	if empty := s.messages(nil, false, time.Now()); len(empty) != 1 || len(empty[0].GetEvents()) != 0 {
		t.Fatalf("heartbeat batch %v", empty)
	}
}
