// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/nodepulse/nodepulse/services/flagenv"
)

const synopsis = `robustness: nodepulse's randomized fault suite.

Usage:
  robustness --bin-dir bin --duration 10m --nodes 2000 [--seed N]

Starts a three-member etcd, collectors, two monitors, two simulated
fleets (one behind a proxy the suite can blackhole) and a few real
reporters whose pods it keeps topped up, injects a random
schedule of faults drawn from the seed (kill -9 and restart of any process,
SIGSTOP, etcd member loss, partitions, clock steps), records every durable
ack, every write to etcd (pods included) and every node transition the
monitors serve, and checks the invariants of docs/robustness.md. The seed is printed first;
the same seed gives the same schedule. Exit status 1 on any violation.`

// Main parses args (flags and NODEPULSE_ROBUSTNESS_* environment) and runs
// the suite: the whole robustness command.
func Main(ctx context.Context, args []string, out *os.File) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("robustness", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := flagenv.Parse(fs, "NODEPULSE_ROBUSTNESS", synopsis, args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	s, err := Run(ctx, cfg, out)
	if err != nil {
		return err
	}
	if s.Failed() {
		return fmt.Errorf("invariants violated with seed %d", s.Seed)
	}
	return nil
}
