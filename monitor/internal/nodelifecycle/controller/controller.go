// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

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
//
// Where things are: controller.go the type, Run and leadership; pass.go the
// health pass (gather each node's input, lifecycle.Judge, apply the
// decision); sweep.go the deadline sweeps between passes; writes.go the
// fenced health writes; zones.go the zone taint queues and zone states;
// pods.go the pod marking of §6.3; events.go, explain.go, metrics.go.
package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

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

// liveRefs is a Liveness that hands out a handle on each node's record, so
// that a pass reads it without a lookup by name (*liveness.Tracker does).
type liveRefs interface {
	Ref(name string) liveness.Ref
	NodeOf(r liveness.Ref) liveness.Node
}

// stateLocked returns the state of the node in e, by its slot in the
// cache's index; nil when the controller does not know it.
func (c *Controller) stateLocked(e *cache.Entry) *nodeState {
	if e.ID >= 0 && e.ID < len(c.byID) {
		if st := c.byID[e.ID]; st != nil && st.name == e.Name {
			return st
		}
	}
	st := c.nodes[e.Name]
	if st != nil {
		c.indexLocked(e.ID, st) // the slot changed since (a relist)
	}
	return st
}

// indexLocked files st under slot id.
func (c *Controller) indexLocked(id int, st *nodeState) {
	if id < 0 {
		return
	}
	if st.id >= 0 && st.id < len(c.byID) && c.byID[st.id] == st {
		c.byID[st.id] = nil
	}
	if id >= len(c.byID) {
		c.byID = append(c.byID, make([]*nodeState, id+1-len(c.byID))...)
	}
	c.byID[id] = st
	st.id = id
}

// forgetLocked drops the state of a deleted node.
func (c *Controller) forgetLocked(st *nodeState) {
	delete(c.nodes, st.name)
	if st.id >= 0 && st.id < len(c.byID) && c.byID[st.id] == st {
		c.byID[st.id] = nil
	}
}

// liveLocked is what the feed tracker knows of the node.
func (c *Controller) liveLocked(st *nodeState) liveness.Node {
	lr, ok := c.live.(liveRefs)
	if !ok {
		return c.live.Node(st.name)
	}
	if !st.hasLive {
		st.live, st.hasLive = lr.Ref(st.name), true
	}
	return lr.NodeOf(st.live)
}

// nodeState is what the leader keeps of one node between passes. It is one
// map entry so that judging a node looks its name up once: a pass judges
// every node every few seconds, and at 100,000 nodes the lookups in the
// separate maps this replaced (zone, record, last Ready status, seen in
// this pass) were a third of a pass's CPU.
type nodeState struct {
	// name is the node's, id its slot in the cache's index (byID).
	name string
	id   int
	// live is the node's record in the feed tracker, when it hands them
	// out (liveRefs): a pass reads it without looking the name up.
	live    liveness.Ref
	hasLive bool
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
	// nodes: what the leader keeps of every node it knows (see nodeState),
	// by name and by the node's slot in the cache's index (byID; nil
	// where unknown): a pass finds each node's state by its slot, and
	// looks the name up only when the slot changed hands.
	nodes      map[string]*nodeState
	byID       []*nodeState
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
	backoff := electionBackoff
	for ctx.Err() == nil {
		err := c.campaignAndLead(ctx)
		if ctx.Err() != nil {
			return nil
		}
		d := backoff.Step()
		if err != nil {
			c.lg.Warn("leadership ended", zap.Error(err), zap.Duration("retryIn", d))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		if err == nil {
			backoff = electionBackoff
		}
	}
	return nil
}

// electionBackoff spaces campaigns after leadership ended: 100ms doubling
// up to 2s, restarted by a term that ended without error.
var electionBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}

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
	c.byID = nil
	for _, e := range entries {
		z := nodemodel.ZoneKey(e.Node.GetMetadata().GetLabels())
		st := &nodeState{name: e.Name, id: -1, zone: z, queue: c.queueLocked(z, now)}
		c.nodes[e.Name] = st
		c.indexLocked(e.ID, st)
	}
	c.m.leader.Set(1)
	c.m.leaderChanges.Inc()
	c.m.paused.Set(0)
}

func (c *Controller) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading = false
	c.nodes, c.byID, c.queues, c.pending, c.podRetry = nil, nil, nil, nil, nil
	close(c.leadDone)
	close(c.leaderCh)
	c.leaderCh = make(chan struct{})
	c.m.leader.Set(0)
	c.m.paused.Set(0)
	c.m.zoneState.Reset()
	c.m.queueDepth.Reset()
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
