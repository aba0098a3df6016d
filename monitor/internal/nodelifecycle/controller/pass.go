// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

// The health pass (spec §6.2-§6.6): every node is judged in memory against
// the clock read when its chunk is judged (lifecycle.Judge decides,
// judgeLocked applies), the zone states are updated, and only then are the changed
// health records written, in batched fenced Txns with mu released.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

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

// judgeChunk nodes are judged between two chances for readers to take mu.
const judgeChunk = 1024

// podCheck is a node whose pods may need marking after the pass (§6.3).
type podCheck struct{ node, observed, current string }

// Pass runs one health pass (spec §6.2-§6.6). Exported for tests.
//
// It decides for every node in memory, each node against the clock read
// when its chunk is judged (a pass over 100,000 nodes takes a while, and
// evidence sampled late must not be dated at the pass start), then writes every
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
		if i%judgeChunk == 0 {
			if i > 0 {
				// Let readers (API, readiness, evictor) and the deadline
				// sweeper in between chunks. A node the sweeper marks
				// meanwhile is seen by the rest of this pass through
				// pending; if this pass judged it already, one of the two
				// writes conflicts and the node is decided again from
				// fresh data.
				c.mu.Unlock()
				c.mu.Lock()
			}
			// The clock is read once per chunk, not per node: a chunk is
			// judged in a millisecond or two with mu held, so no node is
			// judged against a clock older than that (a read per node was
			// 6 % of a pass's CPU at 100,000 nodes). Evidence that arrives
			// after the reading is dated at it (lifecycle.Evaluate never
			// dates evidence past now).
			now = c.cfg.Now()
		}
		v := c.viewLocked(e, cacheRev)
		w, pc := c.judgeLocked(now, v, zones, &stale)
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
		c.forgetLocked(st)
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
	st := c.stateLocked(&v.Entry)
	known := st != nil
	if !known {
		st = &nodeState{name: name, id: -1}
		c.nodes[name] = st
		c.indexLocked(v.ID, st)
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

	hb := liveness.Merge(c.liveLocked(st), v.Lease, v.Status, liveness.Grants{Since: c.leaderSince, Epoch: c.epoch})
	d := lifecycle.Judge(c.cfg.Lifecycle, now, &lifecycle.JudgeInput{
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
