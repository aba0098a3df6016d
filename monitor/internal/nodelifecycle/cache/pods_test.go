// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

func pod(node string) *podv1.Pod {
	return &podv1.Pod{Metadata: &nodev1.ObjectMeta{Uid: "u"}, Spec: &podv1.PodSpec{NodeName: node}}
}

// TestPods: the node index follows binds, moves and deletes; changes carry
// versions a watcher resumes from; a relist (after compaction) emits what
// was missed, including pods present before the first list.
func TestPods(t *testing.T) {
	s := memstore.New(memstore.Config{History: -1})
	defer s.Close()
	put(t, s, nodestore.Put(nodestore.Pods, "ns/before", pod("n1")))
	c := New(s, Config{}, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	for !c.Synced() {
		time.Sleep(time.Millisecond)
	}
	if got := c.PodsOnNode("n1"); len(got) != 1 || got[0].Pod.GetMetadata().GetName() != "before" || got[0].Pod.GetMetadata().GetNamespace() != "ns" {
		t.Fatalf("first list: pods on n1 = %v", got)
	}
	v0 := c.PodVersion()
	put(t, s, nodestore.Put(nodestore.Pods, "ns/a", pod("")))
	put(t, s, nodestore.Put(nodestore.Pods, "ns/a", pod("n1")), nodestore.Put(nodestore.Pods, "ns/b", pod("n2")))
	last := put(t, s, nodestore.Delete(nodestore.Pods, "ns/before"))
	waitRev(t, c, last)
	if got := c.PodsOnNode("n1"); len(got) != 1 || got[0].Pod.GetMetadata().GetName() != "a" {
		t.Fatalf("pods on n1 = %v", got)
	}
	pe, ok := c.Pod("ns", "b")
	if !ok || pe.Pod.GetMetadata().GetResourceVersion() == "" || pe.ModRevision == 0 {
		t.Fatalf("pod b = %v %v", pe, ok)
	}
	changes, _, err := c.PodChangesAfter(v0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range changes {
		got = append(got, ch.Type+" "+ch.Pod.GetMetadata().GetName()+" "+ch.Version.String())
	}
	if len(changes) != 4 || changes[0].Type != Added || changes[1].Type != Modified || changes[1].Old.GetSpec().GetNodeName() != "" ||
		changes[2].Type != Added || changes[3].Type != Deleted || changes[1].Version.Last || !changes[2].Version.Last {
		t.Fatalf("changes = %v", got)
	}
	// Resume in the middle of a revision.
	rest, _, _ := c.PodChangesAfter(changes[1].Version, 100)
	if len(rest) != 2 {
		t.Fatalf("resume after %s: %d changes", changes[1].Version, len(rest))
	}

	// Missed changes across a compaction come out of the relist as changes.
	cancel()
	c2 := New(s, Config{}, zap.NewNop())
	if _, err := c2.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	from := c2.PodVersion()
	put(t, s, nodestore.Delete(nodestore.Pods, "ns/a"))
	last = put(t, s, nodestore.Put(nodestore.Pods, "ns/c", pod("n1")))
	if err := s.Compact(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { _ = c2.Run(ctx2) }()
	waitRev(t, c2, last)
	changes, _, err = c2.PodChangesAfter(from, 100)
	if err != nil || len(changes) != 2 || changes[0].Type != Deleted || changes[1].Type != Added {
		t.Fatalf("relist changes = %v %v", changes, err)
	}
	if got := c2.PodsOnNode("n1"); len(got) != 1 || got[0].Pod.GetMetadata().GetName() != "c" {
		t.Fatalf("pods on n1 after relist = %v", got)
	}
}
