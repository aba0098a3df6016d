// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

// The node index: every name that has a node, status, lease or health
// record gets a dense slot holding those parts and the served node, so a
// health pass reads each node's Entry from one slot in a slice instead of
// five string-keyed map lookups (at 100,000 nodes those lookups, each a
// cache miss on a hash bucket and another on the key's bytes, were most of
// what listing the entries cost). The slots are updated only when one of
// the parts changes; the kinds' maps stay the source of truth.

import (
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// slot is one name's parts. A free slot has name "".
type slot struct {
	name               string
	node               *nodev1.Node
	meta               *nodev1.Node
	status             *nodev1.NodeStatus
	lease              *nodev1.Lease
	health             *nodev1.NodeHealth
	metaRev, healthRev int64
}

// touchLocked brings name's slot up to date with the kinds' maps and the
// merged nodes: it takes a slot when the name first appears and frees it
// when the last of its parts is gone. mu must be held for writing.
func (c *Cache) touchLocked(name string) {
	ks := c.kindsLocked()
	meta, hasMeta := ks.nodes[name]
	st, hasStatus := ks.statuses[name]
	l, hasLease := ks.leases[name]
	h, hasHealth := ks.health[name]
	id, ok := c.ids[name]
	if !hasMeta && !hasStatus && !hasLease && !hasHealth {
		if ok {
			c.slots[id] = slot{}
			c.free = append(c.free, id)
			delete(c.ids, name)
		}
		return
	}
	if !ok {
		if n := len(c.free); n > 0 {
			id, c.free = c.free[n-1], c.free[:n-1]
		} else {
			id = int32(len(c.slots))
			c.slots = append(c.slots, slot{})
		}
		c.ids[name] = id
	}
	s := slot{name: name, node: c.merged[name], metaRev: meta.ModRevision, healthRev: h.ModRevision}
	s.meta, _ = meta.Value.(*nodev1.Node)
	s.status, _ = st.Value.(*nodev1.NodeStatus)
	s.lease, _ = l.Value.(*nodev1.Lease)
	s.health, _ = h.Value.(*nodev1.NodeHealth)
	c.slots[id] = s
}

// entryAt is the Entry of the served node in slot id.
func (c *Cache) entryAt(id int32) Entry {
	s := &c.slots[id]
	return Entry{ID: int(id), Name: s.name, Node: s.node, Meta: s.meta, Status: s.status, Lease: s.lease, Health: s.health,
		MetaRev: s.metaRev, HealthRev: s.healthRev}
}
