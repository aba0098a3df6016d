// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/tests/procutil"
)

type config struct {
	binDir         string
	dataDir        string
	nodeName       string
	etcdPort       int
	basePort       int
	gracePeriod    time.Duration
	refresh        time.Duration
	table          bool
	extraCollector flagenv.StringList
	extraMonitor   flagenv.StringList
	extraReporter  flagenv.StringList
}

const synopsis = `localstack — run the whole nodepulse pipeline on this machine (what 'make run' starts).

Usage: localstack [flags]

Starts etcd (127.0.0.1:<etcd-port>), a collector (gRPC 127.0.0.1:9090, admin :9190),
a monitor (gRPC 127.0.0.1:9091, admin :9191, Kubernetes-compatible API in plaintext
127.0.0.1:9093 for kubectl) and a reporter for this machine (admin
:9192), with the default --base-port, in
plaintext development mode, then shows the nodes as the monitor serves them.
Ctrl-C stops everything.`

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("localstack", flag.ContinueOnError)
	host, _ := os.Hostname()
	fs.StringVar(&c.binDir, "bin-dir", "bin", "directory holding the etcd, collector, monitor and reporter binaries")
	fs.StringVar(&c.dataDir, "data-dir", ".run", "directory for etcd data (removed on exit), <name>.pid files (removed on exit) and logs (kept)")
	fs.StringVar(&c.nodeName, "node-name", strings.ToLower(host), "node name of this machine's reporter")
	fs.IntVar(&c.etcdPort, "etcd-port", 2379, "etcd client port (the peer port is one above)")
	fs.IntVar(&c.basePort, "base-port", 9090, "collector gRPC port; monitor gRPC is +1, admin ports are +100 (collector, monitor, reporter)")
	fs.DurationVar(&c.gracePeriod, "grace-period", 0, "monitor grace period (0 keeps the monitor's default)")
	fs.DurationVar(&c.refresh, "refresh", 2*time.Second, "how often the node table is refreshed")
	fs.BoolVar(&c.table, "table", true, "show the live node table")
	fs.Var(&c.extraCollector, "collector-args", "extra comma-separated flags for the collector")
	fs.Var(&c.extraMonitor, "monitor-args", "extra comma-separated flags for the monitor")
	fs.Var(&c.extraReporter, "reporter-args", "extra comma-separated flags for the reporter")
	err := flagenv.Parse(fs, "LOCALSTACK", synopsis, args, nil)
	return c, err
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port %d is in use (another nodepulse or etcd running?): %w", port, err)
	}
	return ln.Close()
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	bin := func(n string) string { return filepath.Join(cfg.binDir, n) }
	for _, n := range []string{"etcd", "collector", "monitor", "reporter"} {
		if _, err := os.Stat(bin(n)); err != nil {
			return fmt.Errorf("missing binary %s (run 'make build' first): %w", bin(n), err)
		}
	}
	bp := cfg.basePort
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	for _, p := range []int{cfg.etcdPort, cfg.etcdPort + 1, bp, bp + 1, bp + 100, bp + 101, bp + 102} {
		if err := portFree(p); err != nil {
			return err
		}
	}
	logDir := filepath.Join(cfg.dataDir, "logs")
	etcdDir := filepath.Join(cfg.dataDir, "etcd")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	_ = os.RemoveAll(etcdDir)
	defer os.RemoveAll(etcdDir)

	var procs []*procutil.Proc
	stopAll := func() {
		fmt.Fprintln(out, "\nstopping: reporter, monitor, collector, etcd")
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(10 * time.Second)
		}
	}
	defer stopAll()

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.etcdPort+1)
	steps := []struct {
		name, ready string
		args        []string
	}{
		{"etcd", etcdURL + "/health", []string{"--name=local", "--data-dir=" + etcdDir,
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=local=" + peerURL, "--log-level=warn"}},
		{"collector", "http://" + addr(bp+100) + "/readyz", append([]string{"--grpc.insecure", "--grpc.listen-address=" + addr(bp),
			"--admin.listen-address=" + addr(bp+100), "--etcd.endpoints=" + addr(cfg.etcdPort), "--log.format=console"}, cfg.extraCollector...)},
		{"monitor", "http://" + addr(bp+101) + "/readyz", append([]string{"--grpc.insecure", "--collector.insecure", "--grpc.listen-address=" + addr(bp+1),
			"--admin.listen-address=" + addr(bp+101), "--etcd.endpoints=" + addr(cfg.etcdPort), "--log.format=console",
			"--kube-api.insecure", "--kube-api.listen-address=" + addr(bp+3)}, monitorArgs(cfg)...)},
		{"reporter", "http://" + addr(bp+102) + "/readyz", append([]string{"--collector.insecure", "--collector.addresses=" + addr(bp),
			"--admin.listen-address=" + addr(bp+102), "--node-name=" + cfg.nodeName, "--log.format=console"}, reporterArgs(cfg)...)},
	}
	for _, s := range steps {
		// Own process group: the terminal's Ctrl-C reaches only us, and we
		// stop the children in a safe order; they die with us (Pdeathsig).
		p, err := procutil.Start(s.name, logDir, bin(s.name), s.args...)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		// A pid file per process, so a demo can signal exactly this stack's
		// reporter (kill -STOP "$(cat .run/reporter.pid)") and not every
		// reporter on the machine, as a pattern would.
		pidFile := filepath.Join(cfg.dataDir, s.name+".pid")
		if err := os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n", p.Pid()), 0o644); err != nil {
			return fmt.Errorf("pid file: %w", err)
		}
		defer os.Remove(pidFile)
		t0 := time.Now()
		if err := p.WaitHTTP(ctx, s.ready, 60*time.Second); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fmt.Fprintf(out, "%-9s ready in %5s  (pid %d, log %s)\n", s.name, time.Since(t0).Round(time.Millisecond), p.Pid(), p.Log)
		if s.name == "reporter" {
			fmt.Fprintf(out, "all ready (pids:%s)\n", pids(procs))
		}
	}
	fmt.Fprintf(out, `
nodepulse is up. Try, in another terminal:
  bin/nodepulse --server %[2]s get nodes -o wide
  bin/nodepulse --server %[2]s describe node %[1]s
  grpcurl -plaintext %[2]s list
  grpcurl -plaintext -d '{"name":"%[1]s"}' %[2]s nodepulse.node.v1.NodeService/GetNode
  curl -s %[3]s/metrics | grep nodepulse_
Ctrl-C stops everything.

`, cfg.nodeName, addr(bp+1), addr(bp+100))

	died := make(chan *procutil.Proc, len(procs))
	for _, p := range procs {
		go func() {
			<-p.Done()
			died <- p
		}()
	}
	var tableErr chan error
	if cfg.table {
		tableErr = make(chan error, 1)
		go func() { tableErr <- showTable(ctx, out, addr(bp+1), cfg.refresh) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-died:
		return fmt.Errorf("%s exited unexpectedly (%v); last log lines:\n%s", p.Name, p.Err(), procutil.Tail(p.Log, 30))
	case err := <-tableErr:
		return err
	}
}

func monitorArgs(c config) []string {
	args := append([]string(nil), c.extraMonitor...)
	if c.gracePeriod > 0 {
		args = append(args, "--node-monitor-grace-period="+c.gracePeriod.String())
	}
	return args
}

func pids(ps []*procutil.Proc) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, " %s=%d", p.Name, p.Pid())
	}
	return b.String()
}

// reporterArgs passes the extra reporter flags. A short --grace-period also
// shortens the reporter's lease (renewals every lease/4), because a grace
// period below the default 10s renew interval would flap healthy nodes to
// Unknown between renewals.
func reporterArgs(c config) []string {
	args := append([]string(nil), c.extraReporter...)
	if c.gracePeriod > 0 && c.gracePeriod < 40*time.Second && !strings.Contains(strings.Join(args, " "), "node-lease-duration-seconds") {
		secs := max(1, int(c.gracePeriod/time.Second))
		args = append(args, fmt.Sprintf("--node-lease-duration-seconds=%d", secs))
	}
	return args
}
