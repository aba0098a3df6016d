// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// recv returns the next batch, failing the test if the channel closes or
// Deadline passes first.
func recv(t *testing.T, ch <-chan nodestore.WatchBatch) nodestore.WatchBatch {
	t.Helper()
	select {
	case b, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed early")
		}
		return b
	case <-time.After(Deadline):
		t.Fatalf("no watch batch within %v", Deadline)
	}
	panic("unreachable")
}

// collect reads batches until n events arrived, checking the invariants of
// every batch on the way: no error, events in revision order, a batch's
// Revision at or after its events, and revisions never going back across
// batches. Progress batches in between are allowed (etcd may send one at any
// time) but must carry no events.
func collect(t *testing.T, ch <-chan nodestore.WatchBatch, n int) []nodestore.Event {
	t.Helper()
	var out []nodestore.Event
	var last int64
	for len(out) < n {
		b := recv(t, ch)
		if b.Err != nil {
			t.Fatalf("watch error after %d of %d events: %v", len(out), n, b.Err)
		}
		if b.Progress {
			if len(b.Events) > 0 {
				t.Fatalf("progress batch with %d events", len(b.Events))
			}
			if b.Revision < last {
				t.Fatalf("progress at %d after events up to %d", b.Revision, last)
			}
			continue
		}
		if len(b.Events) == 0 {
			t.Fatalf("empty batch that is not a progress notification (revision %d)", b.Revision)
		}
		for _, e := range b.Events {
			if e.Object.ModRevision < last {
				t.Fatalf("event %s at %d after an event at %d", evString(e), e.Object.ModRevision, last)
			}
			last = e.Object.ModRevision
		}
		if b.Revision < last {
			t.Fatalf("batch revision %d before its last event at %d", b.Revision, last)
		}
		out = append(out, b.Events...)
	}
	if len(out) > n {
		t.Fatalf("got %d events, want %d: %v", len(out), n, evStrings(out))
	}
	return out
}

// want is one expected event; a zero rev means "any".
type want struct {
	typ  nodestore.EventType
	kind nodestore.Kind
	name string
	rev  int64
}

func put(k nodestore.Kind, name string, rev int64) want {
	return want{nodestore.PutEvent, k, name, rev}
}

func del(k nodestore.Kind, name string, rev int64) want {
	return want{nodestore.DeleteEvent, k, name, rev}
}

func evString(e nodestore.Event) string {
	typ := "put"
	if e.Type == nodestore.DeleteEvent {
		typ = "delete"
	}
	return fmt.Sprintf("%s %s/%s@%d", typ, e.Object.Kind, e.Object.Name, e.Object.ModRevision)
}

func evStrings(evs []nodestore.Event) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = evString(e)
	}
	return strings.Join(s, ", ")
}

func wantEvents(t *testing.T, got []nodestore.Event, wants ...want) {
	t.Helper()
	ok := len(got) == len(wants)
	for i := 0; ok && i < len(wants); i++ {
		e, w := got[i], wants[i]
		ok = e.Type == w.typ && e.Object.Kind == w.kind && e.Object.Name == w.name &&
			(w.rev == 0 || e.Object.ModRevision == w.rev)
		switch {
		case !ok:
		case e.Type == nodestore.DeleteEvent:
			ok = e.Object.Value == nil
		default:
			ok = e.Object.Value != nil && e.Object.CreateRevision > 0 && e.Object.CreateRevision <= e.Object.ModRevision
		}
	}
	if !ok {
		ws := make([]string, len(wants))
		for i, w := range wants {
			ws[i] = evString(nodestore.Event{Type: w.typ, Object: nodestore.Object{Kind: w.kind, Name: w.name, ModRevision: w.rev}})
		}
		t.Fatalf("events:\n got  %s\n want %s", evStrings(got), strings.Join(ws, ", "))
	}
}

// noMoreEvents checks that nothing but progress arrives before a marker
// write shows up: the way to assert "no event" without waiting for a
// timeout.
func noMoreEvents(t *testing.T, s nodestore.Store, ch <-chan nodestore.WatchBatch) {
	t.Helper()
	marker := fmt.Sprintf("marker-%d", time.Now().UnixNano())
	rev := apply(t, s, nil, nodestore.Put(nodestore.Events, marker, &nodev1.Event{}))
	wantEvents(t, collect(t, ch, 1), put(nodestore.Events, marker, rev))
}

func testWatchOrder(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	start := currentRev(t, s)
	ch := s.Watch(c, start)

	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	r2 := apply(t, s, nil,
		nodestore.Put(nodestore.Nodes, "b", node("b", "1")),
		nodestore.Put(nodestore.Statuses, "b", &nodev1.NodeStatus{}),
	)
	r3 := apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "a"))
	r4 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "b", node("b", "2")))
	// A delete of nothing is no event.
	apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "never"))
	r5 := apply(t, s, nil, nodestore.Put(nodestore.Leases, "b", &nodev1.Lease{}))

	got := collect(t, ch, 6)
	wantEvents(t, got,
		put(nodestore.Nodes, "a", r1),
		put(nodestore.Nodes, "b", r2),
		put(nodestore.Statuses, "b", r2),
		del(nodestore.Nodes, "a", r3),
		put(nodestore.Nodes, "b", r4),
		put(nodestore.Leases, "b", r5),
	)
	wantValue(t, got[4].Object, node("b", "2"))
	if got[4].Object.CreateRevision != r2 {
		t.Fatalf("update event: create=%d, want %d", got[4].Object.CreateRevision, r2)
	}
	noMoreEvents(t, s, ch)
}

func testWatchFromRevision(t *testing.T, s nodestore.Store) {
	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	r2 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "2")))
	r3 := apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "a"))

	// Replays history after the given revision, then follows live writes.
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := s.Watch(c, r1)
	got := collect(t, ch, 2)
	wantEvents(t, got, put(nodestore.Nodes, "a", r2), del(nodestore.Nodes, "a", r3))
	wantValue(t, got[0].Object, node("a", "2"))
	r4 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "3")))
	wantEvents(t, collect(t, ch, 1), put(nodestore.Nodes, "a", r4))

	// The usual pattern: List, then Watch from the list's revision, sees
	// every later change exactly once.
	objs, rev, err := s.List(c, nodestore.Nodes, nodestore.ListOptions{})
	if err != nil || len(objs) != 1 {
		t.Fatalf("list = %v, %v", names(objs), err)
	}
	r5 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "b", node("b", "1")))
	ch2 := s.Watch(c, rev)
	wantEvents(t, collect(t, ch2, 1), put(nodestore.Nodes, "b", r5))
	noMoreEvents(t, s, ch2)
}

func testWatchCancel(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	ch := s.Watch(c, currentRev(t, s))
	r := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	wantEvents(t, collect(t, ch, 1), put(nodestore.Nodes, "a", r))
	cancel()
	// The channel closes; batches already on their way may still come.
	deadline := time.After(Deadline)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch channel still open %v after cancel", Deadline)
		}
	}
}

func testWatchCompacted(t *testing.T, s nodestore.Store) {
	cs, ok := s.(Compactor)
	if !ok {
		t.Skipf("%T has no Compact method (storetest.Compactor)", s)
	}
	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	r2 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "2")))
	r3 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "b", node("b", "1")))
	if err := cs.Compact(ctx(t), r3); err != nil {
		t.Fatalf("compact at %d: %v", r3, err)
	}

	_, _, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{Revision: r1})
	wantErr(t, fmt.Sprintf("list at %d after compaction at %d", r1, r3), err, nodestore.ErrCompacted)
	objs, _, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{Revision: r3})
	if err != nil || len(objs) != 2 {
		t.Fatalf("list at the compaction revision %d = %v, %v; want a and b", r3, names(objs), err)
	}
	wantValue(t, objs[0], node("a", "2"))
	if objs[0].ModRevision != r2 {
		t.Fatalf("a survived compaction with mod=%d, want %d", objs[0].ModRevision, r2)
	}

	// A watch that would need compacted history gets one ErrCompacted
	// batch, then the channel closes: the caller lists again.
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := s.Watch(c, r1)
	b := recv(t, ch)
	for b.Progress && b.Err == nil {
		b = recv(t, ch)
	}
	wantErr(t, fmt.Sprintf("watch after %d with history compacted at %d", r1, r3), b.Err, nodestore.ErrCompacted)
	select {
	case b, ok := <-ch:
		if ok {
			t.Fatalf("watch sent %+v after its error", b)
		}
	case <-time.After(Deadline):
		t.Fatal("watch channel not closed after its error")
	}

	// Watching from the compaction revision on still works.
	ch = s.Watch(c, r3)
	r4 := apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "b"))
	wantEvents(t, collect(t, ch, 1), del(nodestore.Nodes, "b", r4))
}

func testRequestProgress(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := s.Watch(c, currentRev(t, s))
	// An event first: once it arrived the watch is registered and caught
	// up, which etcd needs before it answers a progress request.
	r := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	wantEvents(t, collect(t, ch, 1), put(nodestore.Nodes, "a", r))

	// A store may drop a request it gets while a watch is not synced
	// (etcd may), so ask again until one is answered; each ask waits
	// longer than a healthy store needs, which keeps this deterministic.
	deadline := time.Now().Add(Deadline)
	for {
		if err := s.RequestProgress(c); err != nil {
			t.Fatalf("request progress: %v", err)
		}
		select {
		case b, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			if b.Err != nil || !b.Progress || len(b.Events) > 0 {
				t.Fatalf("got %+v, want a progress notification", b)
			}
			if b.Revision < r {
				t.Fatalf("progress at %d, before the last write %d", b.Revision, r)
			}
			// The watch goes on after progress.
			noMoreEvents(t, s, ch)
			return
		case <-time.After(2 * time.Second):
			if time.Now().After(deadline) {
				t.Fatalf("no progress notification within %v", Deadline)
			}
		}
	}
}
