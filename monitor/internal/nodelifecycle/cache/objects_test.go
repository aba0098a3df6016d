// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// TestObjects: owners and budgets are listed and watched; their changes
// share one history ordered by kind and name within a revision, resumable,
// and a relist emits what was missed.
func TestObjects(t *testing.T) {
	s := memstore.New(memstore.Config{History: -1})
	defer s.Close()
	rs := func(gen int64) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{Metadata: &nodev1.ObjectMeta{Uid: "u", Generation: gen}}
	}
	put(t, s, nodestore.Put(nodestore.ReplicaSets, "ns/before", rs(1)))
	c := New(s, Config{}, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	for !c.Synced() {
		time.Sleep(time.Millisecond)
	}
	got, v0 := c.Objects(nodestore.ReplicaSets)
	if len(got) != 1 || got[0].Object.GetMetadata().GetName() != "before" || got[0].Object.GetMetadata().GetNamespace() != "ns" ||
		got[0].Object.GetMetadata().GetResourceVersion() == "" {
		t.Fatalf("first list = %v", got)
	}
	put(t, s, nodestore.Put(nodestore.StatefulSets, "ns/db", &appsv1.StatefulSet{}),
		nodestore.Put(nodestore.DaemonSets, "ns/agent", &appsv1.DaemonSet{}),
		nodestore.Put(nodestore.PodDisruptionBudgets, "ns/web", &policyv1.PodDisruptionBudget{}))
	put(t, s, nodestore.Put(nodestore.ReplicaSets, "ns/before", rs(2)))
	last := put(t, s, nodestore.Delete(nodestore.DaemonSets, "ns/agent"))
	waitRev(t, c, last)
	changes, _, err := c.ObjectChangesAfter(v0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, ch := range changes {
		seq = append(seq, ch.Type+" "+string(ch.Kind)+" "+ch.Object.GetMetadata().GetName()+" "+ch.Version.String())
	}
	// Within the first revision: daemonsets < poddisruptionbudgets < statefulsets.
	want := []string{"ADDED daemonsets agent", "ADDED poddisruptionbudgets web", "ADDED statefulsets db", "MODIFIED replicasets before", "DELETED daemonsets agent"}
	if len(seq) != len(want) {
		t.Fatalf("changes = %v", seq)
	}
	for i := range want {
		if seq[i][:len(want[i])] != want[i] {
			t.Fatalf("changes = %v, want %v", seq, want)
		}
	}
	if changes[3].Old.(*appsv1.ReplicaSet).GetMetadata().GetGeneration() != 1 || changes[0].Version.Last || !changes[2].Version.Last {
		t.Fatalf("changes = %v", seq)
	}
	if rest, _, _ := c.ObjectChangesAfter(changes[0].Version, 100); len(rest) != 4 {
		t.Fatalf("resume after %s: %d changes", changes[0].Version, len(rest))
	}
	if e, ok := c.GetObject(nodestore.PodDisruptionBudgets, "ns", "web"); !ok || e.ModRevision == 0 {
		t.Fatalf("pdb = %v %v", e, ok)
	}
	if _, ok := c.GetObject(nodestore.DaemonSets, "ns", "agent"); ok {
		t.Fatal("deleted daemonset still served")
	}

	// A relist after changes it missed emits them.
	cancel()
	c2 := New(s, Config{}, zap.NewNop())
	if _, err := c2.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	from := c2.objVersionLocked()
	put(t, s, nodestore.Delete(nodestore.StatefulSets, "ns/db"))
	if _, err := c2.relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	missed, _, _ := c2.ObjectChangesAfter(from, 100)
	if len(missed) != 1 || missed[0].Type != Deleted || missed[0].Kind != nodestore.StatefulSets {
		t.Fatalf("after relist: %v", missed)
	}
}
