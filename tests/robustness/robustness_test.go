// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/tests/binaries"
)

// TestRobustnessShortSeed is CI's run of the suite: two minutes of faults
// at 600 nodes from a fixed seed (NODEPULSE_ROBUSTNESS_SEED overrides it,
// to replay a failure of `make robustness` here), every invariant checked.
// The seed draws nine of the eleven fault kinds, among them a partition
// and a reporter killed long enough for evictions. Seed 20264587 draws
// etcd member loss right after a reporter's pods were evicted and
// replaced, and in about one run of four caught the taint eviction acting
// on a stale view (docs/robustness.md, "Findings"; fixed, and it passes
// now), but no partition, so CI keeps this seed; replay that one with
// NODEPULSE_ROBUSTNESS_SEED=20264587.
func TestRobustnessShortSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd, collectors, monitors and simulators for ~3 minutes")
	}
	cfg := DefaultConfig()
	cfg.BinDir = binaries.Dir(t)
	// Kept when the test fails: the logs, records and etcd data are what
	// a violation is triaged from.
	out, err := os.MkdirTemp("", "nodepulse-robustness-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OutDir = out
	cfg.Duration = 2 * time.Minute
	cfg.Nodes = 600
	cfg.Seed = 20276941
	// Away from the ports of `make robustness` and the other e2e tests.
	cfg.BasePort = 24400
	if s := os.Getenv("NODEPULSE_ROBUSTNESS_SEED"); s != "" {
		var err error
		if cfg.Seed, err = parseSeed(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s, err := Run(ctx, cfg, os.Stdout)
	if err != nil {
		t.Fatalf("%v (logs in %s)", err, out)
	}
	if !s.Failed() {
		os.RemoveAll(out)
		return
	}
	t.Logf("logs, records and etcd data kept in %s", out)
	t.Fatalf("invariants violated with seed %d; reproduce: NODEPULSE_ROBUSTNESS_SEED=%d go test -run TestRobustnessShortSeed ./robustness/ (in tests/)", cfg.Seed, cfg.Seed)
}
