// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package robustness is nodepulse's randomized fault suite, modelled on
// etcd's robustness tests: it runs the real binaries (a three-member etcd,
// collectors, two monitors, two simulated fleets, one of them behind a
// TCP proxy it controls) under a seeded random schedule of faults, records
// what every side saw (the simulators' durable acks, every write to etcd,
// every node transition the monitors served) and then checks invariants on
// the record (docs/robustness.md, docs/adr/0026-robustness-checker.md).
// Linux only.
package robustness

import (
	"flag"
	"fmt"
	"time"
)

// Config of a run.
type Config struct {
	BinDir string
	OutDir string
	// Duration of the fault schedule (the warm-up and the settling after it
	// come on top).
	Duration time.Duration
	Seed     uint64
	// Nodes in all; a quarter of them reach the collectors through the
	// suite's proxy (the partitionable group).
	Nodes int
	// Grace is the monitors' --node-monitor-grace-period; nodes renew every
	// LeaseSeconds/4.
	Grace        time.Duration
	LeaseSeconds int
	// Bound is how long past grace a node that stopped renewing may take
	// to be marked Unknown (the sweep, the batched fenced write and the
	// recorder's etcd watch lie in between). 10 s: on 2 shared cores at a
	// load average of ~40, a 2,000-node run saw a third of a killed
	// 1,500-node fleet's marks reach the recorder 5-10 s past grace, though
	// the leader's log shows every one decided within 0.1 s of it.
	Bound time.Duration
	// Collectors: 2 or 3.
	Collectors int
	// Reporters: real bin/reporter processes (nodes r-0, r-1, ...), each in
	// a zone of its own, whose pods the suite creates and the monitors
	// evict.
	Reporters int
	// Toleration: the monitors' default not-ready and unreachable
	// toleration seconds, so a reporter killed for longer than grace +
	// toleration sees its pods evicted within a fault's hold.
	Toleration time.Duration
	// BasePort: every port the suite uses is BasePort + a small offset.
	BasePort int
	// Quiet suppresses the per-fault log lines.
	Quiet bool
}

// DefaultConfig is `make robustness`: ten minutes at 2,000 nodes.
func DefaultConfig() Config {
	return Config{BinDir: "bin", OutDir: ".run/robustness", Duration: 10 * time.Minute, Nodes: 2000,
		Grace: 10 * time.Second, LeaseSeconds: 8, Bound: 10 * time.Second, Collectors: 2, Reporters: 3,
		Toleration: 5 * time.Second, BasePort: 23400}
}

// RegisterFlags adds the suite's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.BinDir, "bin-dir", d.BinDir, "directory with etcd, collector, monitor, fleetsim and reporter")
	fs.StringVar(&c.OutDir, "out", d.OutDir, "directory for logs, etcd data and the record (emptied first)")
	fs.DurationVar(&c.Duration, "duration", d.Duration, "how long faults are injected (warm-up and settling come on top, about a minute)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the fault schedule (0: a random one, printed first)")
	fs.IntVar(&c.Nodes, "nodes", d.Nodes, "simulated nodes in all; a quarter reach the collectors through the suite's proxy")
	fs.DurationVar(&c.Grace, "grace", d.Grace, "monitor grace period")
	fs.IntVar(&c.LeaseSeconds, "lease-seconds", d.LeaseSeconds, "node lease duration; nodes renew every quarter of it")
	fs.DurationVar(&c.Bound, "bound", d.Bound, "how long past grace a node that stopped renewing may stay unmarked")
	fs.IntVar(&c.Collectors, "collectors", d.Collectors, "number of collectors (2 or 3)")
	fs.IntVar(&c.Reporters, "reporters", d.Reporters, "real reporter processes with pods (0-9)")
	fs.DurationVar(&c.Toleration, "toleration", d.Toleration, "monitors' default not-ready/unreachable toleration (whole seconds)")
	fs.IntVar(&c.BasePort, "base-port", d.BasePort, "first of the ~70 loopback ports the suite uses")
	fs.BoolVar(&c.Quiet, "quiet", false, "do not print each fault as it is injected")
}

func (c *Config) validate() error {
	if c.Nodes < 8 {
		return fmt.Errorf("--nodes must be at least 8, got %d", c.Nodes)
	}
	if c.Collectors < 2 || c.Collectors > 3 {
		return fmt.Errorf("--collectors must be 2 or 3, got %d", c.Collectors)
	}
	if c.Reporters < 0 || c.Reporters > 9 {
		return fmt.Errorf("--reporters must be 0 to 9, got %d", c.Reporters)
	}
	if time.Duration(c.LeaseSeconds)*time.Second/4 >= c.Grace/2 {
		return fmt.Errorf("renewals every %ds/4 leave a %s grace too little margin", c.LeaseSeconds, c.Grace)
	}
	return nil
}

// Reproduce is the command line that runs the same schedule again.
func (c *Config) Reproduce() string {
	return fmt.Sprintf("make robustness SEED=%d DURATION=%s NODES=%d", c.Seed, c.Duration, c.Nodes)
}

func parseSeed(s string) (uint64, error) {
	var v uint64
	if _, err := fmt.Sscan(s, &v); err != nil {
		return 0, fmt.Errorf("seed %q: %w", s, err)
	}
	return v, nil
}
