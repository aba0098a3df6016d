// Package controller is the node lifecycle controller (spec §6) wired to the
// store: leader election, the health pass every --node-monitor-period, the
// NoExecute taint queues drained every 100ms, events, and the staleness
// protection that stops judgement while the monitor's own view is stale.
//
// Invariants:
//   - Only the leader writes, and every write is fenced by its election key
//     (nodestore.Fence): a deposed leader's late write fails with ErrFenced
//     and the replica steps down at once.
//   - Health records (probe timestamps) live in memory only; a new leader
//     starts with every node in a fresh grace period, and never lifts an
//     Unknown override without new evidence, so a failover changes no node.
//   - Judgement is paused (no node is marked Unknown) while the etcd watch is
//     silent or broken, or every collector feed is stale and no lease
//     advances in etcd; resuming grants every node a fresh grace period.
//   - All work of a leadership runs on one goroutine, so the records, queues
//     and zone states need no locking against each other; mu only guards
//     what the API reads (Explain, readiness, the evictor's leadership).
//   - A health pass decides for every node in memory first (each node
//     against a fresh now), then writes the changed health records in fenced
//     Txns of up to MaxOps nodes with mu released, so readers never wait for
//     etcd; events are queued and written by their own goroutine.
package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/zones"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// ElectionName is the election every monitor replica campaigns in.
const ElectionName = "monitor"

// EventSource names the controller in events.
const EventSource = "node-controller"

// EventNamespace holds events about nodes.
const EventNamespace = "default"

// EventTTL: events expire after this long.
const EventTTL = time.Hour

// Config of the controller.
type Config struct {
	Lifecycle lifecycle.Config
	// MonitorPeriod (--node-monitor-period) separates the end of one health
	// pass from the start of the next. It must be well below GracePeriod so
	// a node is marked within GracePeriod+MonitorPeriod of its last heartbeat.
	MonitorPeriod time.Duration
	// SweepPeriod: between passes, the nodes whose grace period may have
	// run out are judged this often (DefaultSweepPeriod when 0; see Sweep).
	SweepPeriod time.Duration
	// TaintPeriod drains the zone taint queues (upstream: 100ms).
	TaintPeriod time.Duration
	// ElectionTTL is the leader session TTL: a crashed leader is replaced
	// within about this long. Keep it well below GracePeriod.
	ElectionTTL time.Duration
	// WatchStaleAfter: judgement pauses when the etcd watch delivered
	// nothing (not even a requested progress notification) for this long.
	// It must exceed the cache's progress interval by a safe margin.
	WatchStaleAfter time.Duration
	// Identity of this replica (leader id).
	Identity string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// EventQueue bounds the events waiting to be written
	// (DefaultEventQueue when 0); more are dropped and counted.
	EventQueue int
	// EventFlushInterval is how long the event writer waits to fill a Txn
	// (DefaultEventFlushInterval when 0).
	EventFlushInterval time.Duration
}

// Liveness is what the controller needs from the feed tracker.
type Liveness interface {
	Node(name string) liveness.Node
	AllStale() bool
}

type pendingHealth struct {
	h   *nodev1.NodeHealth // nil: deleted
	rev int64
}

// nodeState is what the leader keeps of one node between passes. It is one
// map entry so that judging a node looks its name up once: a pass judges
// every node every few seconds, and at 100,000 nodes the lookups in the
// separate maps this replaced (zone, record, last Ready status, seen in
// this pass) were a third of a pass's CPU.
type nodeState struct {
	// zone is the node's zone key, excluded whether it is left out of
	// the zone disruption states; both derive from the labels of the
	// node's nodes/ record and are recomputed when its revision (metaRev)
	// changes.
	zone     string
	excluded bool
	metaRev  int64
	// queue is the zone's taint queue (Controller.queues[zone]), kept so
	// that judging a node does not look its zone up again.
	queue *lifecycle.RateLimitedQueue
	// rec is the lifecycle record, valid once judged.
	rec    lifecycle.Record
	judged bool
	// ready is the Ready status the last judgement served ("" for none).
	ready string
	// seen is the pass (Controller.passGen) current when the node was
	// last judged, by that pass or by a sweep meanwhile.
	seen uint64
}

// zoneOf returns the zone key and the disruption exclusion of the node in
// v, from the labels only when its nodes/ record changed. (A state made at
// takeover has metaRev 0 and a stored record never has, so its first
// judgement reads the labels.)
func (st *nodeState) zoneOf(v view) (string, bool) {
	if st.metaRev == 0 || st.metaRev != v.MetaRev {
		labels := v.Node.GetMetadata().GetLabels()
		st.zone = zones.KeyReusing(labels, st.zone)
		st.excluded = zones.Excluded(labels)
		st.metaRev = v.MetaRev
	}
	return st.zone, st.excluded
}

// Controller runs the lifecycle rules.
type Controller struct {
	// passEntries is Pass's list of every node, reused pass after pass, as
	// are passZones (each zone's Ready statuses, emptied). A pass looks at
	// every node every few seconds; built afresh each time, these were half
	// of the leader's garbage. (The judge decides a node's record as a
	// lifecycle.Health value, and a NodeHealth is built only for a node
	// whose record changes.) passGen numbers the passes (nodeState.seen).
	passEntries []cache.Entry
	passGen     uint64
	passZones   map[string][]string

	cfg   Config
	store nodestore.Store
	cache *cache.Cache
	live  Liveness
	lg    *zap.Logger
	m     *metrics

	mu          sync.Mutex
	leading     bool
	fence       nodestore.Fence
	leaderSince time.Time
	paused      string // reason, "" when judging
	// nodes: what the leader keeps of every node it knows (see nodeState).
	nodes      map[string]*nodeState
	queues     map[string]*lifecycle.RateLimitedQueue
	disruption zones.Disruption
	pending    map[string]pendingHealth
	epoch      uint64
	lastLease  time.Time
	// nextDeadline is no later than the earliest probe + grace of a node
	// not served Unknown, when deadlineKnown (see Sweep).
	nextDeadline  time.Time
	deadlineKnown bool
	// podRetry: nodes whose pods could not all be marked not ready (§6.3).
	podRetry map[string]bool
	// events waiting for runEvents; lastEventNano keeps event names unique.
	events        chan queuedEvent
	lastEventNano int64
	// leadDone is closed when the current leadership ends; leaderCh is
	// closed (and replaced) at every start and end of a leadership, so
	// other leader-only loops (the evictor) follow without polling.
	leadDone chan struct{}
	leaderCh chan struct{}
}

// New builds a controller; call Run.
func New(cfg Config, store nodestore.Store, c *cache.Cache, live Liveness, lg *zap.Logger, reg prometheus.Registerer) (*Controller, error) {
	if err := cfg.Lifecycle.Validate(); err != nil {
		return nil, err
	}
	if cfg.MonitorPeriod <= 0 || cfg.TaintPeriod <= 0 || cfg.ElectionTTL <= 0 || cfg.WatchStaleAfter <= 0 {
		return nil, errors.New("controller: periods, election TTL and watch staleness bound must be positive")
	}
	if cfg.MonitorPeriod >= cfg.Lifecycle.GracePeriod {
		return nil, fmt.Errorf("--node-monitor-period (%s) must be shorter than --node-monitor-grace-period (%s)", cfg.MonitorPeriod, cfg.Lifecycle.GracePeriod)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.EventQueue <= 0 {
		cfg.EventQueue = DefaultEventQueue
	}
	if cfg.EventFlushInterval <= 0 {
		cfg.EventFlushInterval = DefaultEventFlushInterval
	}
	ctl := &Controller{cfg: cfg, store: store, cache: c, live: live, lg: lg.Named("controller"), leaderCh: make(chan struct{}),
		events: make(chan queuedEvent, cfg.EventQueue)}
	ctl.m = newMetrics(ctl)
	ctl.m.grace.Set(cfg.Lifecycle.GracePeriod.Seconds())
	if reg != nil {
		nodes := nodesCollector{c: ctl, desc: prometheus.NewDesc(MetricNodes,
			"Served nodes by condition type, condition status (Missing: no Ready yet) and zone.", []string{"condition", "status", "zone"}, nil)}
		if err := ctl.m.register(reg, nodes); err != nil {
			return nil, fmt.Errorf("register controller metrics: %w", err)
		}
	}
	return ctl, nil
}

// Run campaigns for leadership and leads while elected, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	// Judge nothing before the cache has a consistent view.
	for !c.cache.Synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-c.cache.Changed():
		case <-time.After(100 * time.Millisecond):
		}
	}
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		c.runEvents(ctx)
	}()
	defer func() { <-evDone }()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.campaignAndLead(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.lg.Warn("leadership ended", zap.Error(err), zap.Duration("retryIn", backoff))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		if err == nil {
			backoff = 100 * time.Millisecond
		}
	}
	return nil
}

var errLost = errors.New("leadership lost")

func (c *Controller) campaignAndLead(ctx context.Context) error {
	sess, err := c.store.NewSession(ctx, c.cfg.ElectionTTL)
	if err != nil {
		return fmt.Errorf("election session: %w", err)
	}
	defer func() { _ = sess.Close() }()
	l, err := c.store.Campaign(ctx, sess, ElectionName, c.cfg.Identity)
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	err = c.lead(ctx, l)
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.Resign(rctx)
	return err
}

// lead runs the passes for one leadership.
func (c *Controller) lead(ctx context.Context, l nodestore.Leadership) error {
	now := c.cfg.Now()
	c.begin(l.Fence(), now)
	defer c.end()
	c.lg.Info("became leader; every node gets a fresh grace period", zap.String("identity", c.cfg.Identity),
		zap.Int64("fenceRevision", l.Fence().Revision), zap.Duration("grace", c.cfg.Lifecycle.GracePeriod))

	// Health pass first, then every MonitorPeriod after the previous one
	// ended (upstream wait.Until semantics), so a slow pass never overlaps.
	passT := time.NewTimer(0)
	defer passT.Stop()
	taintT := time.NewTicker(c.cfg.TaintPeriod)
	defer taintT.Stop()
	// Deadline sweeps run on their own goroutine: a pass holds this loop
	// for seconds at 100,000 nodes (judging, then writing taints in batched
	// Txns with mu released), and a dead node must not wait for it.
	sweepCtx, stopSweeps := context.WithCancel(ctx)
	sweepLost := make(chan struct{})
	sweepsDone := make(chan struct{})
	go func() { defer close(sweepsDone); c.sweeper(sweepCtx, sweepLost) }()
	defer func() { stopSweeps(); <-sweepsDone }() // before end(): deferred later, runs first
	// Condition taints follow node updates at once (upstream: node workers
	// on every add/update event), not only at the next health pass.
	_, cursor := c.cache.Nodes()
	podCursor := c.cache.PodVersion()
	for {
		changed := c.cache.Changed()
		select {
		case <-ctx.Done():
			return nil
		case <-l.Done():
			return errLost
		case <-changed:
			var err error
			if cursor, err = c.NodeUpdates(ctx, cursor); errors.Is(err, errLost) {
				return err
			}
			if podCursor, err = c.PodUpdates(ctx, podCursor); errors.Is(err, errLost) {
				return err
			}
		case <-passT.C:
			start := time.Now()
			err := c.Pass(ctx)
			c.m.passDuration.Observe(time.Since(start).Seconds())
			if errors.Is(err, errLost) {
				return err
			}
			if err != nil && ctx.Err() == nil {
				c.lg.Error("health pass failed", zap.Error(err))
			}
			passT.Reset(c.cfg.MonitorPeriod)
		case <-sweepLost:
			return errLost
		case <-taintT.C:
			if err := c.TaintPass(ctx); errors.Is(err, errLost) {
				return err
			}
		}
	}
}

func (c *Controller) begin(f nodestore.Fence, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading, c.fence, c.leaderSince, c.paused = true, f, now, ""
	c.queues = map[string]*lifecycle.RateLimitedQueue{}
	c.disruption = zones.Disruption{}
	c.pending = map[string]pendingHealth{}
	c.podRetry = map[string]bool{}
	c.lastLease = now
	c.deadlineKnown = false
	c.leadDone = make(chan struct{})
	close(c.leaderCh)
	c.leaderCh = make(chan struct{})
	// Nodes that exist at takeover are not "new": no RegisteredNode events
	// and no taint removal, unlike an upstream controller restart, so a
	// failover never flaps NoExecute taints.
	entries, _ := c.cache.Entries()
	c.nodes = make(map[string]*nodeState, len(entries))
	for _, e := range entries {
		z := nodemodel.ZoneKey(e.Node.GetMetadata().GetLabels())
		c.nodes[e.Name] = &nodeState{zone: z, queue: c.queueLocked(z, now)}
	}
	c.m.leader.Set(1)
	c.m.leaderChanges.Inc()
	c.m.paused.Set(0)
}

func (c *Controller) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading = false
	c.nodes, c.queues, c.pending, c.podRetry = nil, nil, nil, nil
	close(c.leadDone)
	close(c.leaderCh)
	c.leaderCh = make(chan struct{})
	c.m.leader.Set(0)
	c.m.paused.Set(0)
	c.m.zoneState.Reset()
	c.m.queueDepth.Reset()
}

func (c *Controller) queueLocked(zone string, now time.Time) *lifecycle.RateLimitedQueue {
	q := c.queues[zone]
	if q == nil {
		q = lifecycle.NewRateLimitedQueue(c.cfg.Lifecycle.EvictionRate, now)
		c.queues[zone] = q
	}
	return q
}

// Fence returns the current leadership's fence, if leading.
func (c *Controller) Fence() (nodestore.Fence, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fence, c.leading
}

// Leadership returns, while this replica leads, the fence of its writes and
// a channel closed when the leadership ends.
func (c *Controller) Leadership() (nodestore.Fence, <-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading {
		return nodestore.Fence{}, nil, false
	}
	return c.fence, c.leadDone, true
}

// LeaderChanged returns a channel closed when a leadership of this replica
// next starts or ends.
func (c *Controller) LeaderChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderCh
}

// Leading reports whether this replica leads.
func (c *Controller) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// Paused returns why judgement is paused ("" when it is not).
func (c *Controller) Paused() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

// view is one node as the leader sees it: the cache overlaid with its own
// writes the watch has not delivered yet.
type view struct {
	cache.Entry
	health    *nodev1.NodeHealth
	healthRev int64
}

func (c *Controller) viewLocked(e cache.Entry, cacheRev int64) view {
	v := view{Entry: e, health: e.Health, healthRev: e.HealthRev}
	if p, ok := c.pending[e.Name]; ok {
		if p.rev > cacheRev {
			v.health, v.healthRev = p.h, p.rev
			if p.h == nil {
				v.healthRev = 0 // deleted: the next write creates it
			}
			v.Node = nodemodel.Merge(e.Meta, e.Status, p.h)
		} else {
			delete(c.pending, e.Name)
		}
	}
	return v
}

// checkPause decides whether the leader may judge now; it returns the
// reason when it may not.
func (c *Controller) checkPause(now time.Time) string {
	if age := now.Sub(c.cache.LastBatch()); age > c.cfg.WatchStaleAfter {
		return fmt.Sprintf("etcd watch silent for %s (bound %s)", age.Round(time.Millisecond), c.cfg.WatchStaleAfter)
	}
	if c.live.AllStale() && now.Sub(c.lastLease) > c.cfg.WatchStaleAfter {
		return "every collector feed is stale and no lease advanced in etcd"
	}
	return ""
}

// healthWrite is one node's health record as decided, and the ModRevision of
// the record the decision was based on (0: there was none).
type healthWrite struct {
	name    string
	h       *nodev1.NodeHealth
	baseRev int64
}

// judgeChunk nodes are judged between two chances for readers to take mu.
const judgeChunk = 1024

// podCheck is a node whose pods may need marking after the pass (§6.3).
type podCheck struct{ node, observed, current string }

// Pass runs one health pass (spec §6.2-§6.6). Exported for tests.
//
// It decides for every node in memory, each node against the clock read
// when it is judged (a pass over 100,000 nodes takes a while, and evidence
// sampled late must not be dated at the pass start), then writes every
// changed health record in batched fenced Txns with mu released.
func (c *Controller) Pass(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading {
		return nil
	}
	now := c.cfg.Now()
	if reason := c.checkPause(now); reason != "" {
		if c.paused == "" {
			c.lg.Warn("judgement paused: the monitor's own view is stale; no node will be marked until it is fresh again", zap.String("reason", reason))
		}
		c.paused = reason
		c.m.paused.Set(1)
		return nil
	}
	if c.paused != "" {
		c.epoch++
		c.lg.Info("judgement resumed; every node gets a fresh grace period", zap.String("pausedBecause", c.paused))
		c.paused = ""
		c.m.paused.Set(0)
	}

	// One slice for every pass (only Run calls Pass), emptied at the end so
	// it holds no node after the pass.
	entries, cacheRev := c.cache.AppendEntries(c.passEntries[:0])
	c.passEntries = entries
	defer clear(c.passEntries)
	// Every node judged from here on is stamped with this pass; a known
	// node left unstamped at the end is gone.
	c.passGen++
	// The zones of the last pass with their slices emptied; a zone left
	// without nodes is dropped before the disruption states are updated,
	// which treat a zone that is absent as gone.
	zones := make(map[string][]string, len(c.passZones))
	for z, st := range c.passZones {
		zones[z] = st[:0]
	}
	plan := map[string]*healthWrite{}
	var writes []*healthWrite
	var pods []podCheck
	stale := 0
	for i, e := range entries {
		if i > 0 && i%judgeChunk == 0 {
			// Let readers (API, readiness, evictor) and the deadline
			// sweeper in between chunks. A node the sweeper marks meanwhile
			// is seen by the rest of this pass through pending; if this pass
			// judged it already, one of the two writes conflicts and the
			// node is decided again from fresh data.
			c.mu.Unlock()
			c.mu.Lock()
		}
		v := c.viewLocked(e, cacheRev)
		w, pc := c.judgeLocked(c.cfg.Now(), v, zones, &stale)
		if w != nil {
			plan[w.name] = w
			writes = append(writes, w)
		}
		if pc != nil {
			pods = append(pods, *pc)
		}
	}
	now = c.cfg.Now()
	for name, st := range c.nodes {
		if st.seen == c.passGen {
			continue
		}
		c.lg.Info("node deleted", zap.String("node", name))
		c.eventLocked(now, name, "", "Normal", "RemovingNode", fmt.Sprintf("Removing Node %s from Controller", name))
		delete(c.nodes, name)
		if q := c.queues[st.zone]; q != nil {
			q.Remove(name)
		}
	}
	c.m.staleHB.Set(float64(stale))
	maps.DeleteFunc(zones, func(_ string, st []string) bool { return len(st) == 0 })
	c.passZones = zones
	writes = c.disruptionLocked(now, entries, cacheRev, zones, plan, writes)

	firstErr := c.writeHealthLocked(ctx, writes, true)
	if errors.Is(firstErr, errLost) {
		return firstErr
	}
	// Pods follow their node's flip after its health record is written.
	for _, pc := range pods {
		if err := c.podsAfterPassLocked(ctx, c.cfg.Now(), pc.node, pc.observed, pc.current); err != nil {
			return err
		}
	}
	c.gcOrphansLocked(ctx)
	for z, q := range c.queues {
		c.m.queueDepth.WithLabelValues(nodemodel.ZoneName(z)).Set(float64(q.Len()))
	}
	return firstErr
}

// NodeUpdates reconciles the NoSchedule condition taints of every node
// changed after cursor and returns the new cursor. Exported for tests.
func (c *Controller) NodeUpdates(ctx context.Context, cursor cache.Version) (cache.Version, error) {
	changes, _, err := c.cache.ChangesAfter(cursor, 10000)
	if err != nil {
		// Fell behind the history: the next health pass covers every node.
		_, v := c.cache.Nodes()
		return v, nil
	}
	if len(changes) == 0 {
		return cursor, nil
	}
	cursor = changes[len(changes)-1].Version
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading || c.paused != "" {
		return cursor, nil
	}
	cacheRev := c.cache.Revision()
	seen := map[string]bool{}
	var writes []*healthWrite
	for _, ch := range changes {
		name := ch.Node.GetMetadata().GetName()
		if ch.Type == cache.Deleted || seen[name] {
			continue
		}
		seen[name] = true
		e, ok := c.cache.Entry(name)
		if !ok {
			continue
		}
		v := c.viewLocked(e, cacheRev)
		h := workingHealth(v.health, name)
		desired := lifecycle.DesiredNoScheduleTaints(v.Node.GetStatus().GetConditions(), v.Meta.GetSpec().GetUnschedulable())
		var changed bool
		if h.Taints, changed = lifecycle.ReconcileNoSchedule(h.Taints, v.Meta.GetSpec().GetTaints(), desired); !changed {
			continue
		}
		writes = append(writes, &healthWrite{name: name, h: h, baseRev: v.healthRev})
	}
	if err := c.writeHealthLocked(ctx, writes, true); errors.Is(err, errLost) {
		return cursor, err
	}
	return cursor, nil
}

// judgeLocked judges one node in memory: it gathers the judge's input (the
// node as the leader sees it, what liveness heard, the node's record), calls
// lifecycle.Judge and applies the decision to the leader's own state
// (records, zone queues, events, metrics). It returns the node's health
// record when it must be written, and the node when its pods may need
// marking (§6.3).
func (c *Controller) judgeLocked(now time.Time, v view, zones map[string][]string, stale *int) (*healthWrite, *podCheck) {
	name := v.Name
	st := c.nodes[name]
	known := st != nil
	if !known {
		st = &nodeState{}
		c.nodes[name] = st
	}
	st.seen = c.passGen
	old, oldQueue := st.zone, st.queue
	zone, excluded := st.zoneOf(v)
	if !known {
		c.lg.Info("new node", zap.String("node", name), zap.String("zone", nodemodel.ZoneName(zone)))
	}
	if !known || old != zone || oldQueue == nil {
		if old != zone && oldQueue != nil {
			oldQueue.Remove(name)
		}
		st.queue = c.queueLocked(zone, now)
	}

	hb := liveness.Merge(c.live.Node(name), v.Lease, v.Status, liveness.Grants{Since: c.leaderSince, Epoch: c.epoch})
	d := lifecycle.Judge(c.cfg.Lifecycle, now, lifecycle.JudgeInput{
		Name: name, Meta: v.Meta, Status: v.Status, Health: v.health, Node: v.Node,
		Heartbeat: hb, Record: st.rec, New: !known, PodRetry: c.podRetry[name],
	})
	judgedBefore := st.judged
	st.judged = true
	st.rec = d.Record
	rec, res := &st.rec, &d.Result
	uid := v.Node.GetMetadata().GetUid()
	for _, ev := range d.Events {
		c.eventLocked(now, name, uid, ev.Type, ev.Reason, ev.Message)
	}
	if d.LeaseAdvanced {
		c.lastLease = now
	}
	age := now.Sub(rec.Probe)
	c.m.heartbeatAge.Observe(age.Seconds())
	if age > c.cfg.Lifecycle.GracePeriod/2 {
		*stale++
	}
	if res.Recovered {
		c.lg.Info("node heard again; Unknown overrides lifted", zap.String("node", name))
	}
	if res.Marked {
		// What the live feed last said of it, so an operator (or a
		// benchmark) can tell a dead reporter from a late feed.
		c.lg.Warn("node missed its grace period; conditions marked Unknown", zap.String("node", name),
			zap.Time("lastProbe", rec.Probe), zap.Duration("grace", res.Grace),
			zap.String("feed", hb.Collector), zap.Time("feedObservedAt", hb.ObservedAt), zap.Duration("feedBlind", hb.Blind),
			zap.Time("quietUntil", hb.QuietUntil))
	}
	curStatus := res.Current.GetStatus()
	if !excluded {
		zones[zone] = append(zones[zone], curStatus)
	}
	if judgedBefore && st.ready != curStatus {
		c.m.transitions.WithLabelValues(orMissing(st.ready), orMissing(curStatus)).Inc()
	}
	st.ready = curStatus
	c.noteDeadlineLocked(rec, res.Grace, curStatus)

	switch q := st.queue; d.Queue {
	case lifecycle.QueueForgetAndAdd, lifecycle.QueueAdd:
		if d.Queue == lifecycle.QueueForgetAndAdd {
			q.Remove(name)
		}
		if q.Add(name, uid, now) {
			if ce := c.lg.Check(zap.DebugLevel, "node not ready; queued for a NoExecute taint"); ce != nil {
				ce.Write(zap.String("node", name), zap.String("ready", res.Observed.GetStatus()), zap.String("zone", nodemodel.ZoneName(zone)))
			}
		}
	case lifecycle.QueueRemove:
		q.Remove(name)
	}
	var pods *podCheck
	switch d.Pods {
	case lifecycle.PodsMark:
		pods = &podCheck{node: name, observed: res.Observed.GetStatus(), current: curStatus}
	case lifecycle.PodsForget:
		delete(c.podRetry, name)
	}
	if !d.Write {
		return nil, pods
	}
	h := &nodev1.NodeHealth{NodeName: name, ConditionOverrides: d.Health.Overrides, Taints: d.Health.Taints, RecoveryTime: d.Health.RecoveryTime,
		UpdateTime: v.health.GetUpdateTime(), Leader: v.health.GetLeader()}
	return &healthWrite{name: name, h: h, baseRev: v.healthRev}, pods
}

func orMissing(s string) string {
	if s == "" {
		return "Missing"
	}
	return s
}

func (c *Controller) removeNoExecuteLocked(now time.Time, v view) (*nodev1.NodeHealth, bool) {
	h := workingHealth(v.health, v.Name)
	var changed bool
	h.Taints, changed = lifecycle.SwapTaints(now, h.Taints, nil, []*nodev1.Taint{lifecycle.NotReadyNoExecute, lifecycle.UnreachableNoExecute})
	return h, changed
}

// workingHealth is the record a decision starts from: a new top-level
// message over the stored record's fields. Every decision step replaces the
// slices and messages it changes (ReconcileNoSchedule and SwapTaints build
// new taint slices, overrides and the recovery time are assigned whole) and
// never modifies them in place, so the stored record's parts are shared,
// not cloned: a pass looks at every node every few seconds and leaves almost
// all of them as they are, and deep copies of 100,000 records a pass were
// the biggest part of the leader's garbage (docs/benchmarks-history.md, session 12).
func workingHealth(h *nodev1.NodeHealth, name string) *nodev1.NodeHealth {
	if h == nil {
		return &nodev1.NodeHealth{NodeName: name}
	}
	return &nodev1.NodeHealth{NodeName: h.GetNodeName(), ConditionOverrides: h.GetConditionOverrides(), Taints: h.GetTaints(),
		RecoveryTime: h.GetRecoveryTime(), UpdateTime: h.GetUpdateTime(), Leader: h.GetLeader()}
}

// writeHealthLocked stores decided health records: one op per node, each
// fenced by the leader key and conditional on the record the decision was
// based on (so a concurrent DeleteNode is never undone), in Txns of up to
// MaxOps nodes. A conflict costs only that node's write: it is decided again
// on the next pass from fresh data. With release, mu is released during the
// round trips, so readers do not wait for etcd; the writes depend only on
// the fence and their own records, and the deadline sweeper, which may run
// meanwhile, writes other nodes (or loses a conflict on the same one). It
// returns errLost when fenced, else the store's first error.
func (c *Controller) writeHealthLocked(ctx context.Context, writes []*healthWrite, release bool) error {
	if len(writes) == 0 {
		return nil
	}
	now := nodemodel.Timestamp(c.cfg.Now())
	ops := make([]nodestore.Op, len(writes))
	for i, w := range writes {
		if lifecycle.HealthOf(w.h).Empty() && w.baseRev != 0 {
			// Nothing to remember (no overrides, taints or recovery time):
			// delete the record rather than keep an empty one. A missing
			// record means exactly that, and at fleet scale the key costs
			// more than its value (~135 B of etcd overhead per key; the
			// ramp's not-ready taints left 54,553 empty records behind at
			// 100,000 nodes).
			w.h = nil
			ops[i] = nodestore.Op{Kind: nodestore.Health, Name: w.name, IfModRevision: w.baseRev}
			continue
		}
		w.h.NodeName, w.h.UpdateTime, w.h.Leader = w.name, now, c.cfg.Identity
		ops[i] = nodestore.Op{Kind: nodestore.Health, Name: w.name, Value: w.h, IfModRevision: w.baseRev, IfAbsent: w.baseRev == 0}
	}
	fence := c.fence
	if release {
		c.mu.Unlock()
	}
	res, err := applyIndependent(ctx, c.store, &fence, ops)
	if release {
		c.mu.Lock()
	}
	if !c.leading {
		return errLost
	}
	for i, w := range writes {
		switch r := res[i]; {
		case r.err == nil:
			c.pending[w.name] = pendingHealth{h: w.h, rev: r.rev}
			c.m.writes.WithLabelValues("ok").Inc()
		case errors.Is(r.err, nodestore.ErrFenced):
			c.m.writes.WithLabelValues("fenced").Inc()
		case errors.Is(r.err, nodestore.ErrConflict):
			// Someone else changed the record (DeleteNode); decide again on
			// the next pass from fresh data.
			c.m.writes.WithLabelValues("conflict").Inc()
			delete(c.pending, w.name)
		default:
			c.m.writes.WithLabelValues("error").Inc()
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nodestore.ErrFenced):
		c.m.fenced.Inc()
		c.lg.Warn("write rejected: no longer the leader; stepping down", zap.Int("records", len(writes)))
		return errLost
	}
	return fmt.Errorf("write %d health records: %w", len(writes), err)
}

// disruptionLocked updates zone states and limiters (spec §6.6). Entering
// master disruption mode removes every NoExecute taint: it amends the pass's
// planned writes (plan, writes) and returns the writes.
func (c *Controller) disruptionLocked(now time.Time, entries []cache.Entry, cacheRev int64, zones map[string][]string,
	plan map[string]*healthWrite, writes []*healthWrite) []*healthWrite {
	res := c.disruption.Update(c.cfg.Lifecycle, zones)
	for z, s := range res.Changed {
		c.lg.Info("zone changed state", zap.String("zone", nodemodel.ZoneName(z)), zap.String("state", string(s)),
			zap.Int("nodes", len(zones[z])), zap.Int("notReady", res.NotReady[z]))
	}
	if res.EnterMaster {
		c.lg.Warn("every zone is fully disrupted: entering master disruption mode; removing NoExecute taints and stopping all tainting")
		for _, e := range entries {
			v := c.viewLocked(e, cacheRev)
			if w := plan[e.Name]; w != nil {
				v.health = w.h
			}
			h, changed := c.removeNoExecuteLocked(now, v)
			switch {
			case !changed:
			case plan[e.Name] != nil:
				plan[e.Name].h = h
			default:
				w := &healthWrite{name: e.Name, h: h, baseRev: v.healthRev}
				plan[e.Name] = w
				writes = append(writes, w)
			}
		}
	}
	if res.ExitMaster {
		c.lg.Info("some nodes are ready again: leaving master disruption mode; every node's probe is reset")
		for _, st := range c.nodes {
			if st.judged {
				st.rec.Probe, st.rec.ReadyTransition = now, now
			}
		}
	}
	for z, qps := range res.Limiters {
		c.queueLocked(z, now).SwapLimiter(qps, now)
	}
	c.m.zoneState.Reset()
	for z, s := range c.disruption.States {
		c.m.zoneState.WithLabelValues(nodemodel.ZoneName(z), string(s)).Set(1)
	}
	return writes
}

// gcOrphansLocked deletes health records whose node is gone (a DeleteNode
// racing a health write can leave one).
func (c *Controller) gcOrphansLocked(ctx context.Context) {
	for name, rev := range c.cache.OrphanHealth() {
		if _, known := c.nodes[name]; known {
			continue
		}
		_, err := c.store.Apply(ctx, &c.fence, nodestore.Op{Kind: nodestore.Health, Name: name, IfModRevision: rev})
		if err != nil && !errors.Is(err, nodestore.ErrConflict) {
			c.lg.Debug("cannot delete orphan health record", zap.String("node", name), zap.Error(err))
		}
	}
}

// TaintPass drains the zone queues (every TaintPeriod). Exported for tests.
func (c *Controller) TaintPass(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading || c.paused != "" {
		return nil
	}
	now := c.cfg.Now()
	cacheRev := c.cache.Revision()
	var lost error
	for zone, q := range c.queues {
		q.Try(now, func(it lifecycle.QueueItem) (bool, time.Duration) {
			if lost != nil {
				return false, 0
			}
			e, ok := c.cache.Entry(it.Name)
			if !ok {
				return true, 0 // gone
			}
			v := c.viewLocked(e, cacheRev)
			qt := lifecycle.ProcessQueued(nodemodel.FindCondition(v.Node.GetStatus().GetConditions(), nodemodel.Ready))
			if qt.Done {
				return true, 0
			}
			if qt.Retry > 0 {
				return false, qt.Retry
			}
			h := workingHealth(v.health, it.Name)
			var changed bool
			h.Taints, changed = lifecycle.SwapTaints(now, h.Taints, []*nodev1.Taint{qt.Add}, []*nodev1.Taint{qt.Remove})
			if !changed {
				return true, 0
			}
			// One node at a time (the queues are rate limited), holding mu:
			// the queue is mid-Try.
			if err := c.writeHealthLocked(ctx, []*healthWrite{{name: it.Name, h: h, baseRev: v.healthRev}}, false); err != nil {
				if errors.Is(err, errLost) {
					lost = err
				}
				return false, 0
			}
			c.m.taintsApplied.WithLabelValues(nodemodel.ZoneName(zone)).Inc()
			c.lg.Info("NoExecute taint added", zap.String("node", it.Name), zap.String("taint", qt.Add.GetKey()),
				zap.String("zone", nodemodel.ZoneName(zone)), zap.Float64("qps", q.QPS()))
			return true, 0
		})
	}
	return lost
}
