// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package compactor bounds etcd's history. The leading monitor observes
// etcd's revision Steps times per Interval and compacts to the revision it
// observed one Interval earlier, so etcd keeps between 1 and 1 + 1/Steps
// intervals of history: enough for any watcher that is merely slow, and not
// the whole history since the cluster was created, which is what etcd keeps
// when nobody compacts (at 100,000 nodes that history, not the live data,
// is most of the database).
//
// kube-apiserver compacts once per interval, to the revision of the
// previous round, which keeps one to two intervals; etcd's own periodic
// auto-compaction instead runs every tenth of its retention. Rounds a fifth
// of an interval apart keep the same guarantee to watchers with less
// history on disk: at 100,000 nodes an interval of history is mostly lease
// checkpoints, ~8 MB per 5 minutes (docs/adr/0013-compaction-and-defragmentation.md).
//
// Only the leader compacts, so replicas do not multiply the requests; a
// deposed leader racing its successor for one round is harmless, because
// compacting to a revision that is already compacted is refused and counted
// as such. That refusal is also what etcd's own --auto-compaction-* or a
// second fleet under another prefix produce: both are tolerated.
//
// A watcher that falls more than one interval behind gets a compacted-
// revision error and must list again (monitor/internal/nodelifecycle/cache does).
// Compaction frees pages for reuse but never shrinks the bbolt file; that
// takes a defragmentation, which follows compactions (Config.Compacted,
// package defrag).
package compactor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/monitor/internal/leadership"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Metric names (deploy/prometheus, deploy/grafana).
const (
	MetricCompactions       = "nodepulse_monitor_etcd_compactions_total"
	MetricCompactedRevision = "nodepulse_monitor_etcd_compacted_revision"
	MetricLastCompaction    = "nodepulse_monitor_etcd_last_compaction_timestamp_seconds"
)

// Results of a compaction round (label "result" of MetricCompactions).
const (
	ResultCompacted        = "compacted"
	ResultAlreadyCompacted = "already_compacted"
	ResultFuture           = "future_revision"
	ResultError            = "error"
)

// Config of the compactor.
type Config struct {
	// Interval is how much history is kept (one to 1 + 1/Steps intervals);
	// rounds run every Interval/Steps. Zero disables the compactor (etcd
	// compacts itself).
	Interval time.Duration
	// After returns a channel that delivers after d (tests inject a clock);
	// default time.After.
	After func(d time.Duration) <-chan time.Time
	// Now is the wall clock of the last-compaction metric; default time.Now.
	Now func() time.Time
	// Compacted, if set, is called after each round that found history
	// compacted to its revision, by this replica or another (the
	// defragmenter follows compactions); it must not block.
	Compacted func()
}

// Compactor compacts while this replica leads.
type Compactor struct {
	cfg    Config
	store  nodestore.Compaction
	leader leadership.Leader
	lg     *zap.Logger

	rounds   *prometheus.CounterVec
	revision prometheus.Gauge
	last     prometheus.Gauge
}

// New returns a compactor; reg may be nil, and so may store when it cannot
// compact (an in-memory store has no nodestore.Maintenance): Run then does
// nothing.
func New(cfg Config, store nodestore.Compaction, leader leadership.Leader, lg *zap.Logger, reg prometheus.Registerer) (*Compactor, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("compaction interval %s must not be negative", cfg.Interval)
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Compactor{cfg: cfg, store: store, leader: leader, lg: lg.Named("compactor"),
		rounds: metric.CounterVec(MetricCompactions,
			"etcd compaction rounds of the leading monitor, by result: compacted, already_compacted (someone compacted further first), future_revision (etcd went back, e.g. restored), error.",
			"result"),
		revision: metric.Gauge(MetricCompactedRevision,
			"The revision this monitor last compacted etcd's history to."),
		last: metric.Gauge(MetricLastCompaction,
			"Unix time of this monitor's last successful etcd compaction."),
	}
	for _, r := range []string{ResultCompacted, ResultAlreadyCompacted, ResultFuture, ResultError} {
		c.rounds.WithLabelValues(r)
	}
	if err := metric.Register(reg, c.rounds, c.revision, c.last); err != nil {
		return nil, fmt.Errorf("register compactor metrics: %w", err)
	}
	return c, nil
}

// Run compacts every Interval/Steps while this replica leads, until ctx ends. It
// only returns when ctx ends, also when compaction is disabled.
func (c *Compactor) Run(ctx context.Context) error {
	if c.store == nil {
		c.lg.Debug("the store cannot compact; compaction off")
		<-ctx.Done()
		return nil
	}
	if c.cfg.Interval == 0 {
		c.lg.Info("etcd compaction disabled (--etcd.compaction-interval=0): etcd must compact itself (--auto-compaction-mode/--auto-compaction-retention)")
		<-ctx.Done() // returning would stop the monitor (run.Group)
		return nil
	}
	leadership.Follow(ctx, c.leader, func(ctx context.Context, _ nodestore.Fence, done <-chan struct{}) {
		c.lead(ctx, done)
	})
	return nil
}

// Steps is how many rounds an interval has.
const Steps = 5

// lead runs the rounds of one leadership: each round observes the current
// revision and compacts to the one observed Steps rounds (one interval)
// earlier.
func (c *Compactor) lead(ctx context.Context, done <-chan struct{}) {
	type observed struct {
		round int
		rev   int64
	}
	var seen []observed // oldest first, none older than the last compacted
	var last int64      // last revision compacted to in this leadership
	for round := 0; ; round++ {
		now, err := c.store.Revision(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			// Nothing is observed this round; later rounds compact to the
			// newest older observation, which is still safe (older).
			c.lg.Warn("cannot read etcd's revision; compaction postponed", zap.Error(err))
		case len(seen) > 0 && seen[len(seen)-1].rev > now:
			// The store went back in time (restored from a snapshot): the
			// remembered revisions mean nothing there; start over from now.
			c.rounds.WithLabelValues(ResultFuture).Inc()
			c.lg.Warn("etcd's revision went back; not compacting this round", zap.Int64("remembered", seen[len(seen)-1].rev), zap.Int64("current", now))
			seen, last = append(seen[:0], observed{round, now}), 0
		default:
			seen = append(seen, observed{round, now})
			// The newest observation at least one interval old.
			i := -1
			for j := range seen {
				if seen[j].round <= round-Steps {
					i = j
				}
			}
			if i >= 0 {
				if rev := seen[i].rev; rev > last {
					c.compact(ctx, rev, now)
					last = rev
				}
				seen = seen[i+1:]
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-c.cfg.After(c.cfg.Interval / Steps):
		}
	}
}

// compact compacts to rev, observed one interval before cur (lead has
// already dropped revisions above cur: the store went back in time).
func (c *Compactor) compact(ctx context.Context, rev, cur int64) {
	start := time.Now()
	err := c.store.Compact(ctx, rev)
	if (err == nil || errors.Is(err, nodestore.ErrCompacted)) && c.cfg.Compacted != nil {
		// History up to rev is gone, by this replica or by someone else
		// (etcd's --auto-compaction-*): either way pages were freed.
		defer c.cfg.Compacted()
	}
	switch {
	case err == nil:
		c.rounds.WithLabelValues(ResultCompacted).Inc()
		c.revision.Set(float64(rev))
		c.last.Set(float64(c.cfg.Now().UnixNano()) / 1e9)
		c.lg.Info("compacted etcd history", zap.Int64("revision", rev), zap.Int64("current", cur),
			zap.Int64("revisionsKept", cur-rev), zap.Duration("took", time.Since(start)))
	case errors.Is(err, nodestore.ErrCompacted):
		c.rounds.WithLabelValues(ResultAlreadyCompacted).Inc()
		c.lg.Debug("etcd history already compacted past this revision", zap.Int64("revision", rev), zap.Error(err))
	case errors.Is(err, nodestore.ErrFutureRevision):
		c.rounds.WithLabelValues(ResultFuture).Inc()
		c.lg.Warn("etcd has not reached the revision to compact to; not compacting this round", zap.Int64("revision", rev), zap.Error(err))
	default:
		if ctx.Err() != nil {
			return
		}
		c.rounds.WithLabelValues(ResultError).Inc()
		c.lg.Warn("etcd compaction failed; retrying next interval", zap.Int64("revision", rev), zap.Error(err))
	}
}
