// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

// Rebalancing (spec §20): every --balance.interval the collector publishes
// its load in discovery (collectors/<id>: attached nodes, capacity) and
// compares it with the loads its peers published; holding more than its
// share by more than the tolerance, it asks a bounded fraction of its
// reporters, at random, to reconnect elsewhere within the next interval.

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/collector/internal/balance"
	"github.com/nodepulse/nodepulse/collector/internal/ingest"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/run"
)

type balanceMetrics struct {
	nodes, share prometheus.Gauge

	// loads: every collector's load as last listed (self's included),
	// for naming destinations in Reconnect (hints).
	mu    sync.Mutex
	loads []balance.Load
}

func newBalanceMetrics(reg prometheus.Registerer) (*balanceMetrics, error) {
	m := &balanceMetrics{
		nodes: metric.Gauge("nodepulse_collector_balance_nodes",
			"Nodes attached to this collector (registered Report streams), as published in discovery every --balance.interval."),
		share: metric.Gauge("nodepulse_collector_balance_fair_share",
			"This collector's fair share of the nodes attached to the collectors in discovery (in proportion to capacity); 0 when it has no peer."),
	}
	return m, metric.Register(reg, m.nodes, m.share)
}

// balance runs the rebalancing loop; --balance.interval=0 disables it.
func (a *App) balance(ctx context.Context) error {
	if a.cfg.Balance.Interval <= 0 {
		return nil
	}
	run.Every(ctx, a.cfg.Balance.Interval, func() { a.balanceOnce(ctx) })
	return nil
}

// balanceOnce publishes the load, reads the peers' and sheds what is due.
func (a *App) balanceOnce(ctx context.Context) {
	now := time.Now()
	nodes := a.ingest.Attached()
	a.bm.nodes.Set(float64(nodes))
	capacity := a.cfg.Ingest.MaxStreams

	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	a.sessMu.Lock()
	a.info.ConnectedNodes, a.info.Capacity, a.info.LoadTime = uint32(nodes), uint32(capacity), nodemodel.Timestamp(now)
	if a.sess != nil {
		if err := a.sess.Put(pctx, nodestore.Collectors, a.cfg.ID, a.info); err != nil && ctx.Err() == nil {
			a.lg.Debug("cannot publish the collector's load in discovery", zap.Error(err))
		}
	}
	draining := a.info.GetDraining()
	a.sessMu.Unlock()

	objs, _, err := a.store.List(pctx, nodestore.Collectors, nodestore.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			a.lg.Debug("cannot list collectors in discovery; no rebalancing this interval", zap.Error(err))
		}
		return
	}
	loads := []balance.Load{{ID: a.cfg.ID, Address: a.info.GetFeedAddress(), Nodes: nodes, Capacity: capacity, Draining: draining, At: now}}
	for _, o := range objs {
		ci, ok := o.Value.(*collectorv1.CollectorInfo)
		if !ok || ci.GetId() == a.cfg.ID || ci.GetLoadTime() == nil {
			continue // self is counted as of now; a collector without a load is older than rebalancing
		}
		loads = append(loads, balance.Load{ID: ci.GetId(), Address: ci.GetFeedAddress(), Nodes: int(ci.GetConnectedNodes()),
			Capacity: int(ci.GetCapacity()), Draining: ci.GetDraining(), At: ci.GetLoadTime().AsTime()})
	}
	a.bm.mu.Lock()
	a.bm.loads = loads
	a.bm.mu.Unlock()
	d := balance.Decide(a.cfg.Balance, now, a.cfg.ID, loads)
	a.bm.share.Set(d.Share)
	if d.Move == 0 {
		return
	}
	if balance.Paused(a.cfg.Balance, now, a.persist.Available(), a.ingest.LastRegisterFailure()) {
		a.lg.Info("rebalancing paused: etcd failed recently, and a moved reporter must register again",
			zap.Int("would_move", d.Move), zap.Time("last_register_failure", a.ingest.LastRegisterFailure()), zap.Bool("etcd_available", a.persist.Available()))
		return
	}
	asked := a.ingest.Rebalance(d.Move, a.cfg.Balance.Interval)
	a.lg.Info("rebalancing: asked reporters to move to another collector", zap.Int("nodes", nodes), zap.Float64("share", d.Share),
		zap.Int("move", d.Move), zap.Int("asked", asked), zap.Duration("within", a.cfg.Balance.Interval))
}

// hints plans the destinations of a batch of reporters asked to leave
// (ingest.SetHints): the collectors with the most room in discovery as last
// listed, self excluded (spec §20.3). The feed address is the one gRPC
// server's address, where reporters open their Report streams too.
func (a *App) hints(draining bool) ingest.Hinter {
	a.bm.mu.Lock()
	loads := append([]balance.Load(nil), a.bm.loads...)
	a.bm.mu.Unlock()
	if len(loads) < 2 {
		return nil
	}
	for i := range loads {
		if loads[i].ID == a.cfg.ID {
			loads[i].Draining = loads[i].Draining || draining
		}
	}
	return balance.NewHints(a.cfg.Balance, time.Now(), a.cfg.ID, loads, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
}
