// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// ObjectKinds are the namespaced kinds the cache serves as plain objects
// (no merge, no index): the owners of pods and the disruption budgets. Their
// changes share one history, so WatchWorkloads can follow all three owner
// kinds from one resource version.
var ObjectKinds = []nodestore.Kind{nodestore.ReplicaSets, nodestore.StatefulSets, nodestore.DaemonSets, nodestore.PodDisruptionBudgets}

func isObjectKind(k nodestore.Kind) bool {
	switch k {
	case nodestore.ReplicaSets, nodestore.StatefulSets, nodestore.DaemonSets, nodestore.PodDisruptionBudgets:
		return true
	}
	return false
}

// Object is a served object of one of ObjectKinds.
type Object interface {
	proto.Message
	GetMetadata() *nodev1.ObjectMeta
}

// ObjectEntry is one cached object with its store revision (the CAS base
// of writes).
type ObjectEntry struct {
	Kind        nodestore.Kind
	Object      Object
	ModRevision int64
}

// ObjectChange is one change of an object of ObjectKinds.
type ObjectChange struct {
	Type string
	Kind nodestore.Kind
	// Object after the change (before it, for Deleted).
	Object Object
	// Old is the object before a Modified change.
	Old Object
	// Version orders changes, numbered per revision like pod changes.
	Version Version
}

// objectKey orders the object log within a revision: kind, then name.
type objectKey struct {
	kind nodestore.Kind
	name string
}

// servedObject returns the stored object with identity and resource
// version filled from the key and revision.
func servedObject(o nodestore.Object) Object {
	m := proto.Clone(o.Value)
	var md *nodev1.ObjectMeta
	switch v := m.(type) {
	case *appsv1.ReplicaSet:
		if v.Metadata == nil {
			v.Metadata = &nodev1.ObjectMeta{}
		}
		md = v.Metadata
	case *appsv1.StatefulSet:
		if v.Metadata == nil {
			v.Metadata = &nodev1.ObjectMeta{}
		}
		md = v.Metadata
	case *appsv1.DaemonSet:
		if v.Metadata == nil {
			v.Metadata = &nodev1.ObjectMeta{}
		}
		md = v.Metadata
	case *policyv1.PodDisruptionBudget:
		if v.Metadata == nil {
			v.Metadata = &nodev1.ObjectMeta{}
		}
		md = v.Metadata
	default:
		panic(fmt.Sprintf("cache: %T is not an object kind", m))
	}
	ns, name, _ := strings.Cut(o.Name, "/")
	md.Namespace, md.Name = ns, name
	md.ResourceVersion = strconv.FormatInt(o.ModRevision, 10)
	return m.(Object)
}

// applyObjectsLocked sets each named object to src[key] (absent: deleted)
// and logs the changes at revision rev, sorted by kind and name so every
// replica numbers them alike.
func (c *Cache) applyObjectsLocked(rev int64, keys map[objectKey]bool, src map[objectKey]nodestore.Object) {
	sorted := make([]objectKey, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].kind != sorted[j].kind {
			return sorted[i].kind < sorted[j].kind
		}
		return sorted[i].name < sorted[j].name
	})
	var changes []ObjectChange
	for _, k := range sorted {
		m := c.objs[k.kind]
		old, had := m[k.name]
		cur, has := src[k]
		switch {
		case !had && !has:
			continue
		case !has:
			delete(m, k.name)
			changes = append(changes, ObjectChange{Type: Deleted, Kind: k.kind, Object: old.Value.(Object)})
			continue
		}
		cur.Value = servedObject(cur)
		m[k.name] = cur
		switch {
		case !had:
			changes = append(changes, ObjectChange{Type: Added, Kind: k.kind, Object: cur.Value.(Object)})
		case old.ModRevision != cur.ModRevision:
			changes = append(changes, ObjectChange{Type: Modified, Kind: k.kind, Object: cur.Value.(Object), Old: old.Value.(Object)})
		}
	}
	for i := range changes {
		changes[i].Version = Version{Rev: rev, Index: i, Last: i == len(changes)-1}
	}
	c.objLog = append(c.objLog, changes...)
	if over := len(c.objLog) - c.cfg.History; over > 0 {
		c.objFloor = c.objLog[over-1].Version
		c.objLog = append([]ObjectChange(nil), c.objLog[over:]...)
	}
}

// GetObject returns one cached object of kind k (never modify it).
func (c *Cache) GetObject(k nodestore.Kind, namespace, name string) (ObjectEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	o, ok := c.objs[k][PodKey(namespace, name)]
	if !ok || !isObjectKind(k) {
		return ObjectEntry{}, false
	}
	return ObjectEntry{Kind: k, Object: o.Value.(Object), ModRevision: o.ModRevision}, true
}

// Objects returns every cached object of the kinds, kind by kind in the
// order given, each sorted by namespace and name, and the version the list
// reflects (resume ObjectChangesAfter after it). One call lists every kind
// at the same version, so a watch of several kinds starts consistently.
func (c *Cache) Objects(kinds ...nodestore.Kind) ([]ObjectEntry, Version) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ObjectEntry
	for _, k := range kinds {
		if !isObjectKind(k) {
			continue
		}
		m := c.objs[k]
		keys := make([]string, 0, len(m))
		for n := range m {
			keys = append(keys, n)
		}
		sort.Strings(keys)
		for _, n := range keys {
			out = append(out, ObjectEntry{Kind: k, Object: m[n].Value.(Object), ModRevision: m[n].ModRevision})
		}
	}
	return out, c.objVersionLocked()
}

func (c *Cache) objVersionLocked() Version {
	v := Version{Rev: c.rev, Last: true}
	if len(c.objLog) > 0 && c.objLog[len(c.objLog)-1].Version.After(v) {
		v = c.objLog[len(c.objLog)-1].Version
	}
	return v
}

// ObjectChangesAfter returns the changes of ObjectKinds after v (at most
// limit) and a channel closed at the next change of the cache. ErrTooOld
// when changes after v were already dropped from the history.
func (c *Cache) ObjectChangesAfter(v Version, limit int) ([]ObjectChange, <-chan struct{}, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.objFloor.After(v) {
		return nil, nil, fmt.Errorf("%w: %s is older than the oldest kept object change after %s", ErrTooOld, v, c.objFloor)
	}
	i := sort.Search(len(c.objLog), func(i int) bool { return c.objLog[i].Version.After(v) })
	end := min(len(c.objLog), i+limit)
	return append([]ObjectChange(nil), c.objLog[i:end]...), c.changed, nil
}
