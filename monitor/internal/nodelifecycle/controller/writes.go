// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

// Writes: every health record the leader stores is fenced by its election
// key and conditional on the record the decision was based on, so a deposed
// leader's late write and a concurrent DeleteNode are never undone.

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// pendingHealth is a health record this leader wrote that the watch has
// not delivered to the cache yet: viewLocked lays it over the cache, so a
// decision never starts from a record older than the leader's own write.
type pendingHealth struct {
	h   *nodev1.NodeHealth // nil: deleted
	rev int64
}

// healthWrite is one node's health record as decided, and the ModRevision of
// the record the decision was based on (0: there was none).
type healthWrite struct {
	name    string
	h       *nodev1.NodeHealth
	baseRev int64
}

// workingHealth is the record a decision starts from: a new top-level
// message over the stored record's fields. Every decision step replaces the
// slices and messages it changes (ReconcileNoSchedule and SwapTaints build
// new taint slices, overrides and the recovery time are assigned whole) and
// never modifies them in place, so the stored record's parts are shared,
// not cloned: a pass looks at every node every few seconds and leaves almost
// all of them as they are, and deep copies of 100,000 records a pass were
// the biggest part of the leader's garbage (docs/adr/0018-monitor-shares-unchanged-state.md).
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
