// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package cache is the monitor's watch cache: it lists every stored kind at
// one revision, then watches from that revision, so its view is always a
// consistent prefix of the store's history. On ErrCompacted (or any broken
// watch) it lists again and rebuilds, emitting the differences as changes so
// node watchers never notice. Served nodes are nodemodel.Merge(nodes/,
// status/, health/); every change of a served node gets a resource version
// that WatchNodes can resume from.
//
// Freshness: the cache asks the store for a progress notification every
// ProgressInterval and records when the last batch (events or progress)
// arrived. A watch that is broken or silent is detected by the controller
// from LastBatch, so it never judges nodes from a stale view.
package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/wait"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Store is what the cache needs from the store.
type Store interface {
	nodestore.Reader
	nodestore.Watcher
}

// Kinds the cache mirrors.
var Kinds = []nodestore.Kind{nodestore.Nodes, nodestore.Statuses, nodestore.Leases, nodestore.Health, nodestore.Pods, nodestore.Events, nodestore.EventBatches, nodestore.Collectors,
	nodestore.ReplicaSets, nodestore.StatefulSets, nodestore.DaemonSets, nodestore.PodDisruptionBudgets}

// Change types of node changes (the WatchNodes event types).
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
)

// Change is one change of a served node.
type Change struct {
	Type string
	// Node after the change (before it, for Deleted).
	Node *nodev1.Node
	// Old is the node before a Modified change.
	Old *nodev1.Node
	// Version orders changes; String() is the resource version.
	Version Version
}

// Version is a position in the stream of node changes: the store revision
// and the change's index among the node changes of that revision (sorted by
// node name, so every replica numbers them alike). Last marks the last change
// of its revision; its resource version is the bare revision.
type Version struct {
	Rev   int64
	Index int
	Last  bool
}

// String renders "rev" for a complete revision, "rev.index" otherwise.
func (v Version) String() string {
	if v.Last {
		return strconv.FormatInt(v.Rev, 10)
	}
	return fmt.Sprintf("%d.%d", v.Rev, v.Index)
}

// After reports whether v comes after o.
func (v Version) After(o Version) bool {
	if v.Rev != o.Rev {
		return v.Rev > o.Rev
	}
	if o.Last {
		return false
	}
	return v.Index > o.Index
}

// ParseVersion parses a resource version.
func ParseVersion(s string) (Version, error) {
	r, i, dotted := strings.Cut(s, ".")
	rev, err := strconv.ParseInt(r, 10, 64)
	if err != nil || rev < 0 {
		return Version{}, fmt.Errorf("resource version %q: not a number", s)
	}
	if !dotted {
		return Version{Rev: rev, Last: true}, nil
	}
	idx, err := strconv.Atoi(i)
	if err != nil || idx < 0 {
		return Version{}, fmt.Errorf("resource version %q: bad index", s)
	}
	return Version{Rev: rev, Index: idx}, nil
}

// Entry is the cached state of one node.
type Entry struct {
	// ID is the node's slot in the cache's index: dense (0 up to about
	// the number of nodes), stable while any record of the node exists, and
	// reused for another name after they are all gone. A caller keeping
	// per-node state in a slice indexed by ID must check the name.
	ID   int
	Name string
	// Node as served (merged).
	Node *nodev1.Node
	// Parts as stored, nil when absent.
	Meta   *nodev1.Node
	Status *nodev1.NodeStatus
	Lease  *nodev1.Lease
	Health *nodev1.NodeHealth
	// Mod revisions of the parts (0 when absent).
	MetaRev, HealthRev int64
}

// Config of the cache.
type Config struct {
	// ProgressInterval: how often to ask for a watch progress notification.
	ProgressInterval time.Duration
	// History: how many node changes are kept for WatchNodes resumption.
	History int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Cache mirrors the store.
type Cache struct {
	store Store
	cfg   Config
	lg    *zap.Logger

	mu     sync.RWMutex
	objs   map[nodestore.Kind]map[string]nodestore.Object
	merged map[string]*nodev1.Node
	// ids, slots, free: the node index (index.go).
	ids   map[string]int32
	slots []slot
	free  []int32
	// namesGen counts the changes to the set of served names (under mu);
	// sorted is their slots in name order as of sortedGen (under sortMu,
	// which AppendEntries takes while it holds mu for reading). A health
	// pass lists every node in order every few seconds; sorting 100,000
	// names each time was a quarter of a pass that changed nothing, and the
	// set of names rarely changes (a slot keeps its id while its node
	// exists, so the order stays valid until the set changes).
	namesGen  uint64
	sortMu    sync.Mutex
	sorted    []int32
	sortedGen uint64
	rev       int64
	synced    bool
	lastBat   time.Time
	log       []Change
	floor     Version // every change after floor is in log
	changed   chan struct{}
	relists   int

	// Pods: byNode indexes pods/<ns>/<name> by spec.nodeName; podLog and
	// podFloor are the pod change history, as log and floor for nodes.
	byNode   map[string]map[string]bool
	podLog   []PodChange
	podFloor Version
	// ObjectKinds (owners, budgets): one change history for them all.
	objLog   []ObjectChange
	objFloor Version
}

// New returns an empty, unsynced cache.
func New(s Store, cfg Config, lg *zap.Logger) *Cache {
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 5 * time.Second
	}
	if cfg.History <= 0 {
		cfg.History = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{store: s, cfg: cfg, lg: lg.Named("cache"), merged: map[string]*nodev1.Node{}, ids: map[string]int32{}, changed: make(chan struct{}), byNode: map[string]map[string]bool{}}
	c.objs = map[nodestore.Kind]map[string]nodestore.Object{}
	for _, k := range Kinds {
		c.objs[k] = map[string]nodestore.Object{}
	}
	return c
}

// Run keeps the cache in sync until ctx ends.
func (c *Cache) Run(ctx context.Context) error {
	go c.requestProgress(ctx)
	backoff := listBackoff
	for ctx.Err() == nil {
		rev, err := c.relist(ctx)
		if err != nil {
			d := backoff.Step()
			c.lg.Warn("list failed; retrying", zap.Error(err), zap.Duration("backoff", d))
			if !sleep(ctx, d) {
				break
			}
			continue
		}
		backoff = listBackoff
		err = c.watch(ctx, rev)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, nodestore.ErrCompacted) {
			c.lg.Info("watch revision compacted; listing again", zap.Int64("revision", rev), zap.Error(err))
		} else {
			c.lg.Warn("watch broken; listing again", zap.Error(err))
			sleep(ctx, 200*time.Millisecond)
		}
	}
	return nil
}

// listBackoff spaces failed lists: 100ms doubling up to 5s, restarted by
// a list that works (wait.Backoff stops growing at Cap).
var listBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt32}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// requestProgress asks for a progress notification every interval, so a
// quiet store still proves the watch alive (and a broken one is noticed).
func (c *Cache) requestProgress(ctx context.Context) {
	t := time.NewTicker(c.cfg.ProgressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.store.RequestProgress(ctx); err != nil && ctx.Err() == nil {
				c.lg.Debug("progress request failed", zap.Error(err))
			}
		}
	}
}

// relist reads every kind at one revision and replaces the cache.
func (c *Cache) relist(ctx context.Context) (int64, error) {
	fresh := map[nodestore.Kind]map[string]nodestore.Object{}
	var rev int64
	for _, k := range Kinds {
		objs, r, err := c.store.List(ctx, k, nodestore.ListOptions{Revision: rev})
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", k, err)
		}
		if rev == 0 {
			rev = r
		}
		m := make(map[string]nodestore.Object, len(objs))
		for _, o := range objs {
			m[o.Name] = o
		}
		fresh[k] = m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	names := map[string]bool{}
	for _, k := range []nodestore.Kind{nodestore.Nodes, nodestore.Statuses, nodestore.Health} {
		for n := range c.objs[k] {
			names[n] = true
		}
		for n := range fresh[k] {
			names[n] = true
		}
	}
	oldPods, freshPods := c.objs[nodestore.Pods], fresh[nodestore.Pods]
	oldObjs := map[nodestore.Kind]map[string]nodestore.Object{}
	objKeys := map[objectKey]bool{}
	freshObjs := map[objectKey]nodestore.Object{}
	for _, k := range ObjectKinds {
		oldObjs[k] = c.objs[k]
		for n := range c.objs[k] {
			objKeys[objectKey{k, n}] = true
		}
		for n, o := range fresh[k] {
			objKeys[objectKey{k, n}] = true
			freshObjs[objectKey{k, n}] = o
		}
	}
	c.objs = fresh
	if !c.synced {
		c.floor = Version{Rev: rev, Last: true}
		c.podFloor = c.floor
		c.objFloor = c.floor
	}
	c.relists++
	c.applyLocked(rev, names)
	// Every name the old or the fresh list has: slots of names gone are
	// freed, the others refreshed.
	for n := range c.ids {
		names[n] = true
	}
	for n := range fresh[nodestore.Leases] {
		names[n] = true
	}
	for n := range names {
		c.touchLocked(n)
	}
	// Pods: emit the differences between the old and the fresh list, so pod
	// watchers and the evictor see a relist as ordinary changes.
	c.objs[nodestore.Pods] = oldPods
	podNames := map[string]bool{}
	for n := range oldPods {
		podNames[n] = true
	}
	for n := range freshPods {
		podNames[n] = true
	}
	c.applyPodsLocked(rev, podNames, freshPods)
	// Owners and budgets likewise.
	for k, m := range oldObjs {
		c.objs[k] = m
	}
	c.applyObjectsLocked(rev, objKeys, freshObjs)
	c.rev = rev
	c.synced = true
	c.lastBat = c.cfg.Now()
	c.broadcastLocked()
	c.lg.Info("cache listed", zap.Int64("revision", rev), zap.Int("nodes", len(c.merged)))
	return rev, nil
}

func (c *Cache) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for b := range c.store.Watch(wctx, rev) {
		if b.Err != nil {
			return b.Err
		}
		c.apply(b)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("watch channel closed")
}

func (c *Cache) apply(b nodestore.WatchBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastBat = c.cfg.Now()
	// Apply one revision at a time, so each revision's node changes are
	// numbered on their own.
	i := 0
	for i < len(b.Events) {
		r := b.Events[i].Object.ModRevision
		names := map[string]bool{}
		var leases []string
		pods := map[string]bool{}
		next := map[string]nodestore.Object{}
		objKeys := map[objectKey]bool{}
		nextObjs := map[objectKey]nodestore.Object{}
		for ; i < len(b.Events) && b.Events[i].Object.ModRevision == r; i++ {
			ev := b.Events[i]
			o := ev.Object
			m := c.objs[o.Kind]
			if m == nil {
				continue
			}
			if o.Kind == nodestore.Pods {
				pods[o.Name] = true
				if ev.Type == nodestore.DeleteEvent {
					delete(next, o.Name)
				} else {
					next[o.Name] = o
				}
				continue
			}
			if isObjectKind(o.Kind) {
				k := objectKey{o.Kind, o.Name}
				objKeys[k] = true
				if ev.Type == nodestore.DeleteEvent {
					delete(nextObjs, k)
				} else {
					nextObjs[k] = o
				}
				continue
			}
			if ev.Type == nodestore.DeleteEvent {
				delete(m, o.Name)
			} else {
				m[o.Name] = o
			}
			switch o.Kind {
			case nodestore.Nodes, nodestore.Statuses, nodestore.Health:
				names[o.Name] = true
			case nodestore.Leases:
				leases = append(leases, o.Name)
			}
		}
		c.applyLocked(r, names)
		// After applyLocked: a slot holds the merged node too.
		for n := range names {
			c.touchLocked(n)
		}
		for _, n := range leases {
			c.touchLocked(n)
		}
		if len(pods) > 0 {
			fresh := make(map[string]nodestore.Object, len(c.objs[nodestore.Pods])+len(next))
			for n := range pods {
				if o, ok := next[n]; ok {
					fresh[n] = o
				}
			}
			c.applyPodsLocked(r, pods, fresh)
		}
		if len(objKeys) > 0 {
			c.applyObjectsLocked(r, objKeys, nextObjs)
		}
		c.rev = max(c.rev, r)
	}
	c.rev = max(c.rev, b.Revision)
	c.broadcastLocked()
}

// applyLocked recomputes the served nodes named and logs their changes at
// revision rev.
func (c *Cache) applyLocked(rev int64, names map[string]bool) {
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var changes []Change
	for _, n := range sorted {
		old := c.merged[n]
		cur := c.mergeLocked(n)
		switch {
		case cur == nil && old == nil:
		case cur == nil:
			delete(c.merged, n)
			c.namesGen++
			changes = append(changes, Change{Type: Deleted, Node: old})
		case old == nil:
			c.merged[n] = cur
			c.namesGen++
			changes = append(changes, Change{Type: Added, Node: cur})
		case !proto.Equal(old, cur):
			c.merged[n] = cur
			changes = append(changes, Change{Type: Modified, Node: cur, Old: old})
		}
	}
	for i := range changes {
		changes[i].Version = Version{Rev: rev, Index: i, Last: i == len(changes)-1}
	}
	c.log = append(c.log, changes...)
	if over := len(c.log) - c.cfg.History; over > 0 {
		// Slide, not copy: copying the whole history on every batch was
		// most of what the cache allocated while a fleet joined. The
		// dropped entries are cleared so they keep no node alive; append
		// moves the rest to a new array once the old one is used up.
		c.floor = c.log[over-1].Version
		clear(c.log[:over])
		c.log = c.log[over:]
	}
}

// mergeLocked builds the served node, or nil when nodes/<name> is absent (a
// status or health record without its node is not a node).
func (c *Cache) mergeLocked(name string) *nodev1.Node {
	meta, ok := c.objs[nodestore.Nodes][name]
	if !ok {
		return nil
	}
	st, _ := c.objs[nodestore.Statuses][name].Value.(*nodev1.NodeStatus)
	h, _ := c.objs[nodestore.Health][name].Value.(*nodev1.NodeHealth)
	n := nodemodel.MergeShared(meta.Value.(*nodev1.Node), st, h)
	if n.Metadata == nil {
		n.Metadata = &nodev1.ObjectMeta{}
	}
	n.Metadata.Name = name
	rv := max(meta.ModRevision, c.objs[nodestore.Statuses][name].ModRevision, c.objs[nodestore.Health][name].ModRevision)
	n.Metadata.ResourceVersion = strconv.FormatInt(rv, 10)
	return n
}

func (c *Cache) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of the cache.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// Synced reports whether the first list completed.
func (c *Cache) Synced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced
}

// LastBatch is the monitor clock when the watch last delivered anything
// (events or a progress notification), or the last list.
func (c *Cache) LastBatch() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lastBat
}

// Revision is the store revision the cache reflects.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// Node returns a served node (never modify it).
func (c *Cache) Node(name string) (*nodev1.Node, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n, ok := c.merged[name]
	return n, ok
}

// EachNode calls f with every served node (never modify it), in no order,
// under the cache's read lock: for aggregates over the fleet (metrics)
// that need neither a copy of the list nor its order.
func (c *Cache) EachNode(f func(*nodev1.Node)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.merged {
		f(n)
	}
}

// Nodes returns every served node sorted by name, and the version the list
// reflects (resume WatchNodes after it).
func (c *Cache) Nodes() ([]*nodev1.Node, Version) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	// The sorted names are kept between calls: a paged list (kubectl's
	// chunks of 500) calls this once a page, and sorting 100,000 nodes
	// each time was most of a page's cost.
	ids := c.sortedIDsRLocked()
	out := make([]*nodev1.Node, len(ids))
	for i, id := range ids {
		out[i] = c.merged[c.slots[id].name]
	}
	return out, c.versionLocked()
}

func (c *Cache) versionLocked() Version {
	v := Version{Rev: c.rev, Last: true}
	if len(c.log) > 0 && c.log[len(c.log)-1].Version.After(v) {
		v = c.log[len(c.log)-1].Version
	}
	return v
}

// Entries returns the cached state of every node, sorted by name, and the
// store revision it reflects.
func (c *Cache) Entries() ([]Entry, int64) {
	return c.AppendEntries(nil)
}

// AppendEntries is Entries appended to dst (sorted among themselves), for a
// caller that reuses one slice: a health pass lists all 100,000 nodes every
// few seconds.
func (c *Cache) AppendEntries(dst []Entry) ([]Entry, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := slices.Grow(dst, len(c.merged))
	for _, id := range c.sortedIDsRLocked() {
		out = append(out, c.entryAt(id))
	}
	return out, c.rev
}

// EntriesAfter appends to dst the entries of the served nodes named after
// after, in name order, at most limit of them (0: all), and returns the
// version they reflect and whether more follow. A paged read of 100,000
// nodes (the kube API's leases) then costs each page its own entries,
// not a copy of the whole fleet.
func (c *Cache) EntriesAfter(dst []Entry, after string, limit int) ([]Entry, Version, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids := c.sortedIDsRLocked()
	i := sort.Search(len(ids), func(i int) bool { return c.slots[ids[i]].name > after })
	end := len(ids)
	if limit > 0 && i+limit < end {
		end = i + limit
	}
	dst = slices.Grow(dst, end-i)
	for _, id := range ids[i:end] {
		dst = append(dst, c.entryAt(id))
	}
	return dst, c.versionLocked(), end < len(ids)
}

// sortedIDsRLocked returns the slots of the served nodes in name order;
// mu must be held (for reading at least). The slice is never modified
// after it is returned: a change of the names makes a new one.
func (c *Cache) sortedIDsRLocked() []int32 {
	c.sortMu.Lock()
	defer c.sortMu.Unlock()
	if c.sorted == nil || c.sortedGen != c.namesGen {
		ids := make([]int32, 0, len(c.merged))
		for name := range c.merged {
			ids = append(ids, c.ids[name])
		}
		slices.SortFunc(ids, func(a, b int32) int { return strings.Compare(c.slots[a].name, c.slots[b].name) })
		c.sorted, c.sortedGen = ids, c.namesGen
	}
	return c.sorted
}

// kinds holds the per-kind object maps an entry is assembled from.
type kinds struct{ nodes, statuses, leases, health map[string]nodestore.Object }

func (c *Cache) kindsLocked() kinds {
	return kinds{c.objs[nodestore.Nodes], c.objs[nodestore.Statuses], c.objs[nodestore.Leases], c.objs[nodestore.Health]}
}

// Entry returns the cached state of one node.
func (c *Cache) Entry(name string) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[name]
	if !ok || c.slots[id].node == nil {
		return Entry{}, false
	}
	return c.entryAt(id), true
}

// OrphanHealth lists health records whose node no longer exists.
func (c *Cache) OrphanHealth() map[string]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]int64{}
	for n, o := range c.objs[nodestore.Health] {
		if _, ok := c.objs[nodestore.Nodes][n]; !ok {
			out[n] = o.ModRevision
		}
	}
	return out
}

// Lease returns the stored lease of a node.
func (c *Cache) Lease(name string) (*nodev1.Lease, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	l, ok := c.objs[nodestore.Leases][name].Value.(*nodev1.Lease)
	return l, ok
}

// Collectors returns the registered collectors by id.
func (c *Cache) Collectors() map[string]*collectorv1.CollectorInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]*collectorv1.CollectorInfo, len(c.objs[nodestore.Collectors]))
	for id, o := range c.objs[nodestore.Collectors] {
		out[id] = o.Value.(*collectorv1.CollectorInfo)
	}
	return out
}

// Events returns the cached events, stored one per key or in batches,
// unsorted.
func (c *Cache) Events() []*nodev1.Event {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*nodev1.Event, 0, len(c.objs[nodestore.Events]))
	for _, o := range c.objs[nodestore.Events] {
		out = append(out, o.Value.(*nodev1.Event))
	}
	for _, o := range c.objs[nodestore.EventBatches] {
		out = append(out, o.Value.(*nodev1.EventBatch).GetEvents()...)
	}
	return out
}

// ErrTooOld means the requested version is older than the kept history.
var ErrTooOld = errors.New("resource version too old")

// ChangesAfter returns the node changes after v (at most limit), and a
// channel closed at the next change. ErrTooOld when changes after v were
// already dropped from the history.
func (c *Cache) ChangesAfter(v Version, limit int) ([]Change, <-chan struct{}, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.floor.After(v) {
		return nil, nil, fmt.Errorf("%w: %s is older than the oldest kept change after %s", ErrTooOld, v, c.floor)
	}
	i := sort.Search(len(c.log), func(i int) bool { return c.log[i].Version.After(v) })
	end := min(len(c.log), i+limit)
	return append([]Change(nil), c.log[i:end]...), c.changed, nil
}

// Relists counts full lists (the first one included), for tests and metrics.
func (c *Cache) Relists() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.relists
}
