// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// TestIndexMatchesKinds puts and deletes random parts of random nodes and
// checks after each step that every Entry read through the index is what
// the kinds' maps hold, that slots are reused rather than grown, and that
// two served nodes never share a slot.
func TestIndexMatchesKinds(t *testing.T) {
	s, c := runningCache(t, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []nodestore.Kind{nodestore.Nodes, nodestore.Statuses, nodestore.Leases, nodestore.Health}
	value := func(k nodestore.Kind, name string) proto.Message {
		switch k {
		case nodestore.Nodes:
			return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name}}
		case nodestore.Statuses:
			return &nodev1.NodeStatus{}
		case nodestore.Leases:
			return &nodev1.Lease{Metadata: &nodev1.ObjectMeta{Name: name}}
		}
		return &nodev1.NodeHealth{NodeName: name}
	}
	const names = 40
	for step := range 400 {
		var ops []nodestore.Op
		for range 1 + rng.IntN(4) {
			k, name := kinds[rng.IntN(len(kinds))], fmt.Sprintf("n%02d", rng.IntN(names))
			if rng.IntN(3) == 0 {
				ops = append(ops, nodestore.Op{Kind: k, Name: name})
			} else {
				ops = append(ops, nodestore.Put(k, name, value(k, name)))
			}
		}
		rev, err := s.Apply(t.Context(), nil, ops...)
		if err != nil {
			continue // deleting what is absent
		}
		waitRev(t, c, rev)
		if step == 200 {
			// A relist keeps the index consistent too.
			if _, err := c.relist(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		c.mu.RLock()
		if len(c.slots) > names {
			t.Fatalf("step %d: %d slots for %d names", step, len(c.slots), names)
		}
		ks := c.kindsLocked()
		for name, n := range c.merged {
			e, ok := c.ids[name]
			if !ok {
				t.Fatalf("step %d: served node %s has no slot", step, name)
			}
			got := c.entryAt(e)
			if got.Name != name || got.Node != n || got.Meta != ks.nodes[name].Value || got.MetaRev != ks.nodes[name].ModRevision ||
				got.HealthRev != ks.health[name].ModRevision || (got.Status == nil) != (ks.statuses[name].Value == nil) ||
				(got.Lease == nil) != (ks.leases[name].Value == nil) || (got.Health == nil) != (ks.health[name].Value == nil) {
				t.Fatalf("step %d: entry of %s does not match the kinds' maps: %+v", step, name, got)
			}
		}
		for name, id := range c.ids {
			if c.slots[id].name != name {
				t.Fatalf("step %d: slot %d holds %q, indexed as %q", step, id, c.slots[id].name, name)
			}
		}
		c.mu.RUnlock()
		entries, _ := c.Entries()
		if len(entries) != len(c.merged) {
			t.Fatalf("step %d: %d entries for %d served nodes", step, len(entries), len(c.merged))
		}
		for i := 1; i < len(entries); i++ {
			if entries[i-1].Name >= entries[i].Name {
				t.Fatalf("step %d: entries out of order: %s before %s", step, entries[i-1].Name, entries[i].Name)
			}
		}
	}
}
