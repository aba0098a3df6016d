// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

// Zones: each zone's rate-limited NoExecute taint queue (spec §6.5) and the
// zone states that set its rate (spec §6.6, package zones), applied to the
// leader's queues and nodes.

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func (c *Controller) queueLocked(zone string, now time.Time) *lifecycle.RateLimitedQueue {
	q := c.queues[zone]
	if q == nil {
		q = lifecycle.NewRateLimitedQueue(c.cfg.Lifecycle.EvictionRate, now)
		c.queues[zone] = q
	}
	return q
}

func (c *Controller) removeNoExecuteLocked(now time.Time, v view) (*nodev1.NodeHealth, bool) {
	h := workingHealth(v.health, v.Name)
	var changed bool
	h.Taints, changed = lifecycle.SwapTaints(now, h.Taints, nil, []*nodev1.Taint{lifecycle.NotReadyNoExecute, lifecycle.UnreachableNoExecute})
	return h, changed
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
