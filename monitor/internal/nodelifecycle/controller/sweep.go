// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// DefaultSweepPeriod bounds how late after its deadline a dead node is
// marked, when Config.SweepPeriod is 0.
const DefaultSweepPeriod = 250 * time.Millisecond

// sweepPeriod is the configured sweep period, defaulted and never longer
// than the monitor period (a sweep that rare would be pointless).
func (c *Controller) sweepPeriod() time.Duration {
	p := c.cfg.SweepPeriod
	if p <= 0 {
		p = DefaultSweepPeriod
	}
	return min(p, c.cfg.MonitorPeriod)
}

// Sweep judges only the nodes whose grace period may have run out. It runs
// on its own goroutine (sweeper), between passes and while one runs (a pass
// releases mu between chunks and during its writes). Exported for tests.
//
// Why: a full pass judges every node and at 100,000 nodes takes seconds,
// and it starts MonitorPeriod after the previous one ended, so a node
// whose deadline falls just after a pass started would be marked up to a
// pass duration plus a period late. A sweep only reads the controller's own
// records (one map walk, no cache copies), so it can run every few hundred
// milliseconds and mark a dead node within about SweepPeriod of its
// deadline, also when 10% of the fleet dies at once.
//
// Most sweeps do not even walk: the earliest deadline is kept (every judged
// node lowers it to its own, a walk recomputes it), and a sweep before it
// returns at once.
//
// The filter is conservative: rec.Probe only moves forward when a node is
// judged, so a node whose Probe + grace has passed is either dead or renewed
// after its last judgement; judging it (Evaluate sees the newest renewal)
// tells which, and refreshes Probe for the live ones so they drop out of the
// next sweep. Nodes already served Unknown are skipped: lifting an override
// is the full pass's job. Everything else a pass does (zone states, deleted
// nodes, orphans) stays in the pass; a node marked here gets its NoExecute
// taint from the next pass, exactly as a node marked by a pass does (the
// taint follows the Ready condition as read).
func (c *Controller) Sweep(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading || c.paused != "" {
		return nil
	}
	now := c.cfg.Now()
	if c.checkPause(now) != "" {
		return nil // the next pass pauses judgement and says why
	}
	if c.deadlineKnown && !now.After(c.nextDeadline) {
		return nil // nobody's grace period can have run out yet: no walk
	}
	grace := c.cfg.Lifecycle.GracePeriod
	var due []string
	c.deadlineKnown, c.nextDeadline = true, time.Time{}
	for name, st := range c.nodes {
		if !st.judged || st.rec.Probe.IsZero() || st.ready == nodemodel.Unknown {
			continue
		}
		d := st.rec.Deadline(grace)
		if now.After(d) {
			due = append(due, name)
		} else if c.nextDeadline.IsZero() || d.Before(c.nextDeadline) {
			c.nextDeadline = d
		}
	}
	if len(due) == 0 {
		return nil
	}
	cacheRev := c.cache.Revision()
	zones := map[string][]string{} // zone states are the pass's business
	stale := 0
	var writes []*healthWrite
	var pods []podCheck
	judged := 0
	for _, name := range due {
		if c.live.Node(name).Paused {
			// Its feed is stale: judging would only hold it (and a
			// long stall would make every node due on every sweep).
			// The first sweep after the feed resumes judges it.
			continue
		}
		e, ok := c.cache.Entry(name)
		if !ok {
			continue // deleted: the next pass forgets it
		}
		judged++
		w, pc := c.judgeLocked(c.cfg.Now(), c.viewLocked(e, cacheRev), zones, &stale)
		if w != nil {
			writes = append(writes, w)
		}
		if pc != nil {
			pods = append(pods, *pc)
		}
	}
	c.m.sweepJudged.Add(float64(judged))
	err := c.writeHealthLocked(ctx, writes, true)
	if err != nil {
		return err
	}
	for _, pc := range pods {
		if err := c.podsAfterPassLocked(ctx, c.cfg.Now(), pc.node, pc.observed, pc.current); err != nil {
			return err
		}
	}
	return nil
}

// noteDeadlineLocked lowers the earliest deadline the sweep waits for to a
// node just judged (lifecycle.Record.Deadline with the grace applied to
// it), unless it is served Unknown already (the sweep leaves those to the
// pass).
func (c *Controller) noteDeadlineLocked(rec *lifecycle.Record, grace time.Duration, ready string) {
	if rec.Probe.IsZero() || ready == nodemodel.Unknown {
		return
	}
	if d := rec.Deadline(grace); c.deadlineKnown && d.Before(c.nextDeadline) {
		c.nextDeadline = d
	}
}

// sweeper runs Sweep every sweep period until ctx ends; it closes lost and
// returns when a write finds this replica deposed.
func (c *Controller) sweeper(ctx context.Context, lost chan<- struct{}) {
	t := time.NewTicker(c.sweepPeriod())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.Sweep(ctx)
		if errors.Is(err, errLost) {
			close(lost)
			return
		}
		if err != nil && ctx.Err() == nil {
			c.lg.Error("deadline sweep failed", zap.Error(err))
		}
	}
}
