// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package gcboost raises the Go GC target while the collector works off a
// registration backlog, and lowers it again once the backlog is gone.
//
// Why: the collector runs at a low GC target (50 by default) so that
// 100,000 idle streams cost little memory. When a whole fleet re-registers
// at once (a collector restart), the heap grows from nothing to its full
// size while every registration allocates, and at a target of 50 the
// collector collected several times a minute, each cycle scanning the
// stacks of tens of thousands of stream goroutines: a third of its CPU,
// taken from the registrations the fleet was waiting for. A backlog is
// short-lived, so trading memory for CPU during it is cheap; in steady
// state the low target holds.
package gcboost

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/run"
)

// Config of the boost.
type Config struct {
	// Base is the GC target outside backlogs; Boost the target during one.
	// Boost ≤ Base disables the boost.
	Base, Boost int
	// Hold: the target returns to Base after this long without a backlog,
	// so a backlog that empties and refills does not flip it every tick.
	Hold time.Duration
	// Tick is how often the backlog is sampled.
	Tick time.Duration
}

// Booster samples a backlog signal and sets the GC target.
type Booster struct {
	cfg     Config
	backlog func() bool
	set     func(int) int // debug.SetGCPercent
	now     func() time.Time
	lg      *zap.Logger
	gauge   prometheus.Gauge

	boosted bool
	last    time.Time // the last sample that found a backlog
}

// New builds a Booster; set is debug.SetGCPercent outside tests.
func New(cfg Config, backlog func() bool, set func(int) int, now func() time.Time, lg *zap.Logger, reg prometheus.Registerer) (*Booster, error) {
	b := &Booster{cfg: cfg, backlog: backlog, set: set, now: now, lg: lg.Named("gcboost"),
		gauge: metric.Gauge("nodepulse_collector_gc_percent", "The Go GC target in force: --runtime.gc-percent, or --runtime.gc-percent-backlog while registrations are backlogged.")}
	b.gauge.Set(float64(cfg.Base))
	if err := metric.Register(reg, b.gauge); err != nil {
		return nil, err
	}
	return b, nil
}

// Enabled reports whether the boost can ever apply.
func (b *Booster) Enabled() bool { return b.cfg.Boost > b.cfg.Base && b.cfg.Base > 0 }

// Step samples the backlog once and changes the target when due.
func (b *Booster) Step() {
	now := b.now()
	if b.backlog() {
		b.last = now
		if !b.boosted {
			b.boosted = true
			b.set(b.cfg.Boost)
			b.gauge.Set(float64(b.cfg.Boost))
			b.lg.Info("registration backlog: GC target raised", zap.Int("gc_percent", b.cfg.Boost))
		}
		return
	}
	if b.boosted && now.Sub(b.last) >= b.cfg.Hold {
		b.boosted = false
		b.set(b.cfg.Base)
		b.gauge.Set(float64(b.cfg.Base))
		b.lg.Info("registration backlog gone: GC target restored", zap.Int("gc_percent", b.cfg.Base))
	}
}

// Run steps every Tick until ctx is done, then restores Base.
func (b *Booster) Run(ctx context.Context) error {
	if !b.Enabled() {
		<-ctx.Done()
		return nil
	}
	run.Every(ctx, b.cfg.Tick, b.Step)
	if b.boosted {
		b.set(b.cfg.Base)
	}
	return nil
}
