// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// PodChange is one change of a stored pod (a WatchPods event).
type PodChange struct {
	Type string
	// Pod after the change (before it, for Deleted).
	Pod *podv1.Pod
	// Old is the pod before a Modified change.
	Old *podv1.Pod
	// Version orders changes, numbered per revision like node changes.
	Version Version
}

// PodEntry is one cached pod with its store revision (the CAS base of
// monitor writes).
type PodEntry struct {
	Pod         *podv1.Pod
	ModRevision int64
}

// PodKey is the store name of a pod: "<namespace>/<name>".
func PodKey(namespace, name string) string { return namespace + "/" + name }

// servedPod returns the stored pod with identity and resource version
// filled from the key and revision (the stored value carries neither
// reliably).
func servedPod(o nodestore.Object) *podv1.Pod {
	p := proto.CloneOf(o.Value.(*podv1.Pod))
	if p.Metadata == nil {
		p.Metadata = &nodev1.ObjectMeta{}
	}
	ns, name, _ := strings.Cut(o.Name, "/")
	md := p.Metadata
	md.Namespace, md.Name = ns, name
	md.ResourceVersion = strconv.FormatInt(o.ModRevision, 10)
	return p
}

// applyPodsLocked sets each named pod to src[name] (absent: deleted),
// keeps the node index, and logs the changes at revision rev, sorted by key
// so every replica numbers them alike.
func (c *Cache) applyPodsLocked(rev int64, names map[string]bool, src map[string]nodestore.Object) {
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	m := c.objs[nodestore.Pods]
	var changes []PodChange
	for _, n := range sorted {
		old, had := m[n]
		cur, has := src[n]
		var oldPod *podv1.Pod
		if had {
			oldPod = old.Value.(*podv1.Pod)
			c.unindexLocked(n, oldPod.GetSpec().GetNodeName())
		}
		switch {
		case !had && !has:
			continue
		case !has:
			delete(m, n)
			changes = append(changes, PodChange{Type: Deleted, Pod: oldPod})
			continue
		}
		cur.Value = servedPod(cur)
		m[n] = cur
		p := cur.Value.(*podv1.Pod)
		if nn := p.GetSpec().GetNodeName(); nn != "" {
			if c.byNode[nn] == nil {
				c.byNode[nn] = map[string]bool{}
			}
			c.byNode[nn][n] = true
		}
		switch {
		case !had:
			changes = append(changes, PodChange{Type: Added, Pod: p})
		case old.ModRevision != cur.ModRevision:
			changes = append(changes, PodChange{Type: Modified, Pod: p, Old: oldPod})
		}
	}
	for i := range changes {
		changes[i].Version = Version{Rev: rev, Index: i, Last: i == len(changes)-1}
	}
	c.podLog = append(c.podLog, changes...)
	if over := len(c.podLog) - c.cfg.History; over > 0 {
		c.podFloor = c.podLog[over-1].Version
		c.podLog = append([]PodChange(nil), c.podLog[over:]...)
	}
}

func (c *Cache) unindexLocked(key, node string) {
	if node == "" {
		return
	}
	if s := c.byNode[node]; s != nil {
		delete(s, key)
		if len(s) == 0 {
			delete(c.byNode, node)
		}
	}
}

// Pod returns one cached pod (never modify it).
func (c *Cache) Pod(namespace, name string) (PodEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	o, ok := c.objs[nodestore.Pods][PodKey(namespace, name)]
	if !ok {
		return PodEntry{}, false
	}
	return PodEntry{Pod: o.Value.(*podv1.Pod), ModRevision: o.ModRevision}, true
}

// Pods returns every cached pod sorted by namespace and name, and the
// version the list reflects (resume PodChangesAfter after it).
func (c *Cache) Pods() ([]PodEntry, Version) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := c.objs[nodestore.Pods]
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]PodEntry, len(keys))
	for i, k := range keys {
		out[i] = PodEntry{Pod: m[k].Value.(*podv1.Pod), ModRevision: m[k].ModRevision}
	}
	return out, c.podVersionLocked()
}

// PodsOnNode returns the pods bound to node, sorted by namespace and name.
func (c *Cache) PodsOnNode(node string) []PodEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	keys := make([]string, 0, len(c.byNode[node]))
	for k := range c.byNode[node] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]PodEntry, len(keys))
	m := c.objs[nodestore.Pods]
	for i, k := range keys {
		out[i] = PodEntry{Pod: m[k].Value.(*podv1.Pod), ModRevision: m[k].ModRevision}
	}
	return out
}

func (c *Cache) podVersionLocked() Version {
	v := Version{Rev: c.rev, Last: true}
	if len(c.podLog) > 0 && c.podLog[len(c.podLog)-1].Version.After(v) {
		v = c.podLog[len(c.podLog)-1].Version
	}
	return v
}

// PodVersion is the position of the newest pod change the cache holds.
func (c *Cache) PodVersion() Version {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.podVersionLocked()
}

// PodChangesAfter returns the pod changes after v (at most limit) and a
// channel closed at the next change of the cache. ErrTooOld when changes
// after v were already dropped from the history.
func (c *Cache) PodChangesAfter(v Version, limit int) ([]PodChange, <-chan struct{}, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.podFloor.After(v) {
		return nil, nil, fmt.Errorf("%w: %s is older than the oldest kept pod change after %s", ErrTooOld, v, c.podFloor)
	}
	i := sort.Search(len(c.podLog), func(i int) bool { return c.podLog[i].Version.After(v) })
	end := min(len(c.podLog), i+limit)
	return append([]PodChange(nil), c.podLog[i:end]...), c.changed, nil
}
