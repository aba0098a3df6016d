// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Run runs the suite once and returns its summary; an error means the run
// itself broke (a process would not start), not an invariant.
func Run(ctx context.Context, cfg Config, out *os.File) (*Summary, error) {
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()%1_000_000_000 + 1
	}
	// The seed first, so even a run that hangs can be reproduced.
	fmt.Fprintf(out, "robustness: seed %d (reproduce: %s)\n", cfg.Seed, cfg.Reproduce())
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	logf := func(format string, args ...any) {
		if !cfg.Quiet {
			fmt.Fprintf(out, "%7.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	outDir, err := filepath.Abs(cfg.OutDir)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(outDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "collector", "monitor", "fleetsim", "reporter"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("missing %s in %s (make build): %w", b, cfg.BinDir, err)
		}
	}
	cl, err := newCluster(cfg, cfg.BinDir, outDir)
	if err != nil {
		return nil, err
	}
	defer cl.stopAll()
	if err := cl.startEtcd(ctx); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(cl.etcdEndpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	rec := newRecorder()
	rctx, stopRec := context.WithCancel(ctx)
	defer stopRec()
	go rec.watchEtcd(rctx, cli)
	if err := cl.startRest(ctx); err != nil {
		return nil, err
	}
	for i, a := range cl.monitorAddrs {
		go rec.watchMonitor(rctx, i, a)
	}
	logf("cluster up: 3 etcd members, %d collectors, 2 monitors, fleets of %d (direct) and %d (proxied) nodes, %d reporters; logs in %s",
		cfg.Collectors, cl.groupNodes[0], cl.groupNodes[1], len(cl.reporters), cl.logDir)
	if err := cl.waitHealthy(ctx, 3*time.Minute); err != nil {
		return nil, err
	}
	rec.mu.Lock()
	logf("every node registered and Ready (recorder: %d nodes, revision %d); faults for %s", len(rec.nodes), rec.lastRev, cfg.Duration)
	rec.mu.Unlock()

	h := &history{cfg: cfg, sends: map[string][]send{}, rec: rec, expected: cl.nodes(),
		renew: time.Duration(cfg.LeaseSeconds) * time.Second / 4,
		groupOf: func(n string) int {
			var i int
			switch {
			case strings.HasPrefix(n, cl.groupPrefix[1]):
				return 1
			case strings.HasPrefix(n, "r-"):
				if _, err := fmt.Sscanf(n, "r-%d", &i); err == nil {
					return 2 + i
				}
			}
			return 0
		}}
	h.from = time.Now()
	fctx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	pool := &podPool{addrs: cl.monitorAddrs}
	h.faults = cl.inject(fctx, plan(cfg.Seed, cfg.Duration, cfg), logf, func() {
		// Every reporter node gets its pods back before the next fault.
		if err := pool.fill(fctx, rec, cfg.Reporters); err != nil && fctx.Err() == nil {
			logf("creating pods: %v", err)
		}
	})
	h.podsCreated = pool.created
	stopFaults()
	h.to = time.Now()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Heal whatever a cut-short fault left, then let the fleet settle:
	// every silent node renews again, every mark is lifted.
	cl.proxy.partition(false)
	for _, c := range cl.all() {
		if !c.alive() {
			if err := c.start(ctx, cl.logDir, true); err != nil {
				return nil, err
			}
		}
	}
	logf("faults done; settling")
	if err := cl.waitHealthy(ctx, 2*cfg.Grace+time.Minute); err != nil {
		logf("not settled: %v", err)
	}
	// Let the last writes reach the recorder: it has seen everything up
	// to a revision read now.
	if err := rec.catchUp(ctx, cli, 30*time.Second); err != nil {
		return nil, err
	}
	for _, a := range cl.monitorAddrs {
		m, err := served(ctx, a)
		if err != nil {
			return nil, err
		}
		h.served = append(h.served, m)
	}
	stopRec()
	for _, p := range cl.recordFiles {
		if _, err := readRecord(p, h.sends); err != nil {
			return nil, fmt.Errorf("record %s: %w", p, err)
		}
	}
	s := newSummary(cfg.Seed)
	check(h, s)
	s.Print(out)
	fmt.Fprintf(out, "run took %s; logs and records in %s\n", time.Since(start).Round(time.Second), outDir)
	if s.Failed() {
		fmt.Fprintf(out, "FAILED with seed %d; reproduce: %s\n", cfg.Seed, cfg.Reproduce())
	}
	return s, nil
}

// waitHealthy waits until both monitors serve every node Ready=True.
func (cl *cluster) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok := true
		for _, a := range cl.monitorAddrs {
			m, err := served(ctx, a)
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			ready := 0
			for _, st := range m {
				if st == "True" {
					ready++
				}
			}
			if ready != cl.nodes() {
				ok, last = false, fmt.Sprintf("%s serves %d of %d nodes Ready", a, ready, cl.nodes())
				break
			}
		}
		if ok {
			return nil
		}
		for _, c := range cl.all() {
			if !c.alive() {
				return fmt.Errorf("%s exited: %v", c.name, c.proc.DeadErr())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every node Ready after %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// catchUp waits until the recorder has seen etcd's current revision.
func (r *recorder) catchUp(ctx context.Context, cli *clientv3.Client, timeout time.Duration) error {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := cli.Get(gctx, "robustness-probe")
	cancel()
	if err != nil {
		return fmt.Errorf("read etcd's revision: %w", err)
	}
	want := resp.Header.Revision
	deadline := time.Now().Add(timeout)
	for r.revision() < want {
		// The revision may be a write outside the prefix (none here) or
		// a compaction; a quiet prefix never reaches it, so probe once.
		if time.Now().After(deadline) {
			return errors.New("the recorder's etcd watch fell behind")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
