// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Fault kinds. Each names what it does to which component.
const (
	KillCollector    = "kill-collector"    // SIGKILL, restart after a hold
	SigstopCollector = "sigstop-collector" // SIGSTOP for a hold, SIGCONT
	KillMonitor      = "kill-monitor"
	SigstopMonitor   = "sigstop-monitor" // past the election TTL: a deposed leader wakes up
	KillEtcd         = "kill-etcd"       // one member; it rejoins from its data directory
	EtcdMemberLoss   = "etcd-member-loss"
	KillFleet        = "kill-fleet" // every node of one group crashes, and boots again after the hold
	SigstopFleet     = "sigstop-fleet"
	Partition        = "partition"     // the proxied group is blackholed from every collector
	ClockStep        = "clock-step"    // one group's clocks step by seconds to a year, and back after the hold
	KillReporter     = "kill-reporter" // a real reporter with pods; long enough holds get its pods evicted
)

// kinds in the order the summary lists them.
var kinds = []string{KillCollector, SigstopCollector, KillMonitor, SigstopMonitor, KillEtcd, EtcdMemberLoss,
	KillFleet, SigstopFleet, Partition, ClockStep, KillReporter}

// step is one planned fault; the plan depends on the seed only.
type step struct {
	kind   string
	target int // index among components of the kind (fleet: group)
	hold   time.Duration
	gap    time.Duration // quiet time after it is undone
	clock  time.Duration // clock-step: the step
}

// fault is a step as it happened.
type fault struct {
	step
	name       string // target component
	start, end time.Time
	err        error
}

// silences reports whether the fault stops the renewals of fleet group g
// (groups: 0 fleet-a, 1 fleet-b, 2+i reporter r-i).
func (f *fault) silences(g int) bool {
	switch f.kind {
	case KillFleet, SigstopFleet:
		return f.target == g
	case Partition:
		return g == 1
	case KillReporter:
		return g == 2+f.target
	}
	return false
}

// global reports whether the fault is in the control plane (collector,
// monitor, etcd) rather than in a fleet.
func (f *fault) global() bool {
	switch f.kind {
	case KillFleet, SigstopFleet, Partition, ClockStep, KillReporter:
		return false
	}
	return true
}

func (f *fault) String() string {
	s := fmt.Sprintf("%-17s %-12s hold %5s", f.kind, f.name, f.hold.Round(100*time.Millisecond))
	if f.kind == ClockStep {
		s += fmt.Sprintf(" step %+v", f.clock)
	}
	return s
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// plan draws the fault schedule for a run of length d from the seed.
func plan(seed uint64, d time.Duration, cfg Config) []step {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// A silence long enough to be judged, and then some. Not drawn from
	// --bound, so that a seed's schedule stays the same when it changes.
	long := 2*cfg.Grace + 5*time.Second
	var out []step
	for total := time.Duration(0); total < d; {
		s := step{kind: kinds[r.IntN(len(kinds))], gap: between(r, 2*time.Second, 6*time.Second)}
		if s.kind == KillReporter && cfg.Reporters == 0 {
			continue
		}
		switch s.kind {
		case KillCollector, SigstopCollector:
			s.target = r.IntN(cfg.Collectors)
			s.hold = between(r, 500*time.Millisecond, 8*time.Second)
		case KillMonitor:
			s.target = r.IntN(2)
			s.hold = between(r, 500*time.Millisecond, 5*time.Second)
		case SigstopMonitor:
			s.target = r.IntN(2)
			s.hold = between(r, 2*time.Second, 12*time.Second)
		case KillEtcd:
			s.target = r.IntN(3)
			s.hold = between(r, time.Second, 8*time.Second)
		case EtcdMemberLoss:
			s.target = r.IntN(3)
			s.hold = between(r, 5*time.Second, 20*time.Second)
		case KillFleet, SigstopFleet:
			s.target = r.IntN(2)
			s.hold = between(r, time.Second, long)
		case Partition:
			s.target = 1
			s.hold = between(r, 2*time.Second, long)
		case KillReporter:
			s.target = r.IntN(cfg.Reporters)
			s.hold = between(r, time.Second, 2*cfg.Grace+cfg.Toleration+10*time.Second)
		case ClockStep:
			s.target = r.IntN(2)
			s.hold = between(r, 5*time.Second, 20*time.Second)
			// Small steps (an NTP slew's size) and large ones (a clock set
			// by hand, a VM restored from a snapshot): neither is refused
			// or judged by (ADR 0036).
			switch r.IntN(4) {
			case 0:
				s.clock = between(r, time.Second, 3*time.Second).Round(100 * time.Millisecond)
			case 1:
				s.clock = between(r, 5*time.Minute, 15*time.Minute).Round(time.Second)
			case 2:
				s.clock = between(r, 30*time.Minute, 2*time.Hour).Round(time.Minute)
			default:
				s.clock = 365 * 24 * time.Hour
			}
			if r.IntN(2) == 0 {
				s.clock = -s.clock
			}
		}
		out = append(out, s)
		total += s.hold + s.gap
	}
	return out
}

// inject runs the plan against the cluster until it is done or ctx ends.
func (cl *cluster) inject(ctx context.Context, steps []step, logf func(string, ...any), before func()) []*fault {
	var done []*fault
	for _, s := range steps {
		if ctx.Err() != nil {
			break
		}
		before()
		f := &fault{step: s}
		f.start = time.Now()
		f.err = cl.apply(ctx, f)
		f.end = time.Now()
		done = append(done, f)
		if f.err != nil {
			logf("fault %s: %v", f, f.err)
		} else {
			logf("fault %s", f)
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.gap):
		}
	}
	return done
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// apply performs the fault, holds it and undoes it; end is when the
// component is back (restarted and ready, continued, healed).
func (cl *cluster) apply(ctx context.Context, f *fault) error {
	var c *component
	switch f.kind {
	case KillCollector, SigstopCollector:
		c = cl.collectors[f.target]
	case KillMonitor, SigstopMonitor:
		c = cl.monitors[f.target]
	case KillEtcd, EtcdMemberLoss:
		c = cl.etcds[f.target]
	case KillFleet, SigstopFleet, ClockStep:
		c = cl.fleets[f.target]
	case KillReporter:
		c = cl.reporters[f.target]
	case Partition:
		f.name = "fleet-b"
		cl.proxy.partition(true)
		sleep(ctx, f.hold)
		cl.proxy.partition(false)
		return nil
	}
	f.name = c.name
	switch f.kind {
	case KillCollector, KillMonitor, KillEtcd, KillFleet, KillReporter:
		c.kill()
		sleep(ctx, f.hold)
		// A restart outlives ctx: the suite must end with every process up.
		return c.start(context.WithoutCancel(ctx), cl.logDir, true)
	case SigstopCollector, SigstopMonitor, EtcdMemberLoss, SigstopFleet:
		c.signal(syscall.SIGSTOP)
		sleep(ctx, f.hold)
		c.signal(syscall.SIGCONT)
		return nil
	case ClockStep:
		if err := cl.fleetFault(f.target, fmt.Sprintf("clock %+v", f.clock)); err != nil {
			return err
		}
		sleep(ctx, f.hold)
		return cl.fleetFault(f.target, fmt.Sprintf("clock %+v", -f.clock))
	}
	return fmt.Errorf("unknown fault kind %q", f.kind)
}

// fleetFault posts a fault line to fleet group g's control API.
func (cl *cluster) fleetFault(g int, line string) error {
	resp, err := http.Post("http://"+cl.fleetControl[g]+"/faults", "text/plain", strings.NewReader(line))
	if err != nil {
		return fmt.Errorf("%s: %w", line, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", line, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
