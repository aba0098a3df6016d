// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

func waitRev(t *testing.T, c *Cache, rev int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Revision() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("cache at %d, want %d", c.Revision(), rev)
		}
		time.Sleep(time.Millisecond)
	}
}

func put(t *testing.T, s *memstore.Store, ops ...nodestore.Op) int64 {
	t.Helper()
	rev, err := s.Apply(context.Background(), nil, ops...)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// runningCache is a cache with cfg running over a fresh memstore until the
// test ends, synced with it.
func runningCache(t *testing.T, cfg Config) (*memstore.Store, *Cache) {
	t.Helper()
	s := memstore.New(memstore.Config{History: -1})
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // runs before the store closes
	c := New(s, cfg, zap.NewNop())
	go func() { _ = c.Run(ctx) }()
	waitRev(t, c, s.Revision())
	return s, c
}

func TestMergeAndVersions(t *testing.T) {
	s, c := runningCache(t, Config{})
	_, v0 := c.Nodes()

	// One revision touching two nodes' parts: two changes, numbered by name.
	rev := put(t, s,
		nodestore.Put(nodestore.Nodes, "b", &nodev1.Node{}),
		nodestore.Put(nodestore.Nodes, "a", &nodev1.Node{}),
		nodestore.Put(nodestore.Statuses, "a", &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: "True"}}}))
	// A status without its node is not a node.
	put(t, s, nodestore.Put(nodestore.Statuses, "orphan", &nodev1.NodeStatus{}))
	rev2 := put(t, s, nodestore.Put(nodestore.Health, "a", &nodev1.NodeHealth{
		ConditionOverrides: []*nodev1.NodeCondition{{Type: "Ready", Status: "Unknown", Reason: nodemodel.ReasonNodeStatusUnknown}}}))
	waitRev(t, c, rev2)

	n, ok := c.Node("a")
	if !ok || nodemodel.ConditionStatus(n.GetStatus().GetConditions(), "Ready") != "Unknown" {
		t.Fatalf("merged node a: %v", n)
	}
	if _, ok := c.Node("orphan"); ok {
		t.Fatal("orphan status served as a node")
	}
	changes, _, err := c.ChangesAfter(v0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range changes {
		got = append(got, ch.Type+" "+ch.Node.GetMetadata().GetName()+" "+ch.Version.String())
	}
	want := []string{
		"ADDED a " + Version{Rev: rev}.String(),
		"ADDED b " + Version{Rev: rev, Index: 1, Last: true}.String(),
		"MODIFIED a " + Version{Rev: rev2, Last: true}.String(),
	}
	if len(got) != len(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %q, want %q", i, got[i], want[i])
		}
	}
	// Resuming in the middle of a revision skips only what was delivered.
	after, _, _ := c.ChangesAfter(changes[0].Version, 100)
	if len(after) != 2 || after[0].Node.GetMetadata().GetName() != "b" {
		t.Fatalf("resume after a.%d: %v", rev, after)
	}
	for _, s := range []string{"12", "12.3"} {
		v, err := ParseVersion(s)
		if err != nil || v.String() != s {
			t.Errorf("ParseVersion(%q) = %v %v", s, v, err)
		}
	}
	if _, err := ParseVersion("x"); err == nil {
		t.Error("bad version parsed")
	}
}

func TestRelistAfterCompaction(t *testing.T) {
	s := memstore.New(memstore.Config{History: -1})
	defer s.Close()
	c := New(s, Config{}, zap.NewNop())
	// List first, then change and compact before the watch starts, so the
	// watch from the list revision fails with ErrCompacted.
	rev0, err := c.relist(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, nodestore.Put(nodestore.Nodes, "a", &nodev1.Node{}))
	last := put(t, s, nodestore.Put(nodestore.Nodes, "b", &nodev1.Node{}))
	if err := s.Compact(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	werr := c.watch(ctx, rev0)
	if werr == nil {
		t.Fatal("watch from a compacted revision did not fail")
	}
	go func() { _ = c.Run(ctx) }()
	waitRev(t, c, last)
	if _, ok := c.Node("b"); !ok {
		t.Fatal("relist did not pick up the missed node")
	}
	if c.Relists() < 2 {
		t.Fatalf("relists = %d", c.Relists())
	}
	// The missed changes were emitted, so a watcher from before sees them.
	changes, _, err := c.ChangesAfter(Version{Rev: rev0, Last: true}, 10)
	if err != nil || len(changes) != 2 {
		t.Fatalf("changes after relist: %v %v", changes, err)
	}
}

func TestHistoryBound(t *testing.T) {
	s, c := runningCache(t, Config{History: 2})
	_, v0 := c.Nodes()
	var last int64
	for _, n := range []string{"a", "b", "c"} {
		last = put(t, s, nodestore.Put(nodestore.Nodes, n, &nodev1.Node{}))
	}
	waitRev(t, c, last)
	if _, _, err := c.ChangesAfter(v0, 10); err == nil {
		t.Fatal("a version older than the history was accepted")
	}
}

// TestEntriesInOrder: AppendEntries lists every served node by name, also
// after nodes come and go between two listings (the order is kept between
// changes of the names, not recomputed per listing), and a slice it
// returned earlier is not rewritten by a later change.
func TestEntriesInOrder(t *testing.T) {
	s, c := runningCache(t, Config{})

	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	want := func(step string, es []Entry, w ...string) {
		t.Helper()
		if got := names(es); !slices.Equal(got, w) {
			t.Fatalf("%s: entries %v, want %v", step, got, w)
		}
	}
	waitRev(t, c, put(t, s, nodestore.Put(nodestore.Nodes, "c", &nodev1.Node{}), nodestore.Put(nodestore.Nodes, "a", &nodev1.Node{})))
	first, _ := c.Entries()
	want("two nodes", first, "a", "c")

	// A status alone changes no name: same order, the part included.
	waitRev(t, c, put(t, s, nodestore.Put(nodestore.Statuses, "c", &nodev1.NodeStatus{})))
	es, _ := c.Entries()
	want("a status", es, "a", "c")
	if es[1].Status == nil {
		t.Fatal("entry c without the status just stored")
	}

	waitRev(t, c, put(t, s, nodestore.Put(nodestore.Nodes, "b", &nodev1.Node{})))
	es, _ = c.AppendEntries(es[:0])
	want("b added", es, "a", "b", "c")
	waitRev(t, c, put(t, s, nodestore.Delete(nodestore.Nodes, "a")))
	es, _ = c.AppendEntries([]Entry{{Name: "kept"}})
	want("a deleted, appended", es, "kept", "b", "c")
	want("the first listing", first, "a", "c")
}
