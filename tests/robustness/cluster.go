// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodepulse/nodepulse/tests/procutil"
)

// component is one restartable process of the cluster.
type component struct {
	name  string // etcd-0, collector-1, monitor-0, fleet-a, ...
	kind  string // etcd, collector, monitor, fleet
	bin   string
	ready string // URL answering 200 once it serves
	// args builds the arguments of incarnation inc (1, 2, ...): monitors
	// and collectors take a new identity each time, so the checker can
	// tell a restarted process from its predecessor.
	args func(inc int) []string

	mu      sync.Mutex
	proc    *procutil.Proc
	inc     int
	stopped bool // SIGSTOPped
}

func (c *component) start(ctx context.Context, logDir string, wait bool) error {
	c.mu.Lock()
	c.inc++
	name := fmt.Sprintf("%s.%d", c.name, c.inc)
	p, err := procutil.Start(name, logDir, c.bin, c.args(c.inc)...)
	if err == nil {
		c.proc, c.stopped = p, false
	}
	c.mu.Unlock()
	if err != nil || !wait || c.ready == "" {
		return err
	}
	return p.WaitHTTP(ctx, c.ready, 90*time.Second)
}

// kill sends SIGKILL (a crash: no shutdown work at all).
func (c *component) kill() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p == nil {
		return
	}
	if c.stopped {
		_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	}
	p.Kill()
}

func (c *component) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil || c.proc.Exited() {
		return
	}
	_ = c.proc.Cmd.Process.Signal(sig)
	c.stopped = sig == syscall.SIGSTOP
}

// alive reports whether the current incarnation runs (stopped or not).
func (c *component) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc != nil && !c.proc.Exited()
}

func (c *component) stop() {
	c.mu.Lock()
	p, stopped := c.proc, c.stopped
	c.mu.Unlock()
	if p == nil {
		return
	}
	if stopped {
		_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	}
	p.Stop(5 * time.Second)
}

// cluster is every process of a run and the proxy.
type cluster struct {
	cfg        Config
	logDir     string
	etcds      []*component
	collectors []*component
	monitors   []*component
	fleets     []*component // fleet-a (direct), fleet-b (through the proxy)
	reporters  []*component // r-0, r-1, ...: real reporters with pods
	proxy      *proxy

	etcdEndpoints string
	monitorAddrs  []string
	fleetControl  []string
	recordFiles   []string
	groupNodes    []int
	groupPrefix   []string
}

func port(base, off int) string { return fmt.Sprintf("127.0.0.1:%d", base+off) }

// newCluster describes the processes; nothing starts yet.
func newCluster(cfg Config, bin, out string) (*cluster, error) {
	cl := &cluster{cfg: cfg, logDir: filepath.Join(out, "logs")}
	if err := os.MkdirAll(cl.logDir, 0o755); err != nil {
		return nil, err
	}
	b := cfg.BasePort
	var peers, clients []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("etcd-%d=http://%s", i, port(b, 2*i+1)))
		clients = append(clients, port(b, 2*i))
	}
	cl.etcdEndpoints = strings.Join(clients, ",")
	for i := range 3 {
		client, peer := "http://"+port(b, 2*i), "http://"+port(b, 2*i+1)
		dataDir := filepath.Join(out, fmt.Sprintf("etcd-%d", i))
		cl.etcds = append(cl.etcds, &component{name: fmt.Sprintf("etcd-%d", i), kind: "etcd", bin: filepath.Join(bin, "etcd"),
			ready: client + "/health",
			args: func(int) []string {
				// A restarted member finds its data directory and rejoins:
				// --initial-cluster-state is read only for an empty one.
				return []string{"--name=" + fmt.Sprintf("etcd-%d", i), "--data-dir=" + dataDir,
					"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
					"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
					"--initial-cluster=" + strings.Join(peers, ","), "--initial-cluster-state=new",
					"--initial-cluster-token=nodepulse-robustness", "--max-txn-ops=512", "--log-level=error",
					// Short raft timers: a lost leader is replaced in about a
					// second, as on a LAN.
					"--heartbeat-interval=100", "--election-timeout=1000"}
			}})
	}
	for i := range cfg.Collectors {
		grpcAddr, admin := port(b, 10+i), port(b, 20+i)
		cl.collectors = append(cl.collectors, &component{name: fmt.Sprintf("collector-%d", i), kind: "collector",
			bin: filepath.Join(bin, "collector"), ready: "http://" + admin + "/readyz",
			args: func(inc int) []string {
				return []string{"--grpc.insecure", "--grpc.listen-address=" + grpcAddr, "--admin.listen-address=" + admin,
					"--collector.advertise-address=" + grpcAddr, fmt.Sprintf("--collector.id=collector-%d.%d", i, inc),
					"--collector.session-ttl=6s", "--etcd.endpoints=" + cl.etcdEndpoints, "--log.level=warn"}
			}})
	}
	for i := range 2 {
		grpcAddr, admin := port(b, 30+i), port(b, 40+i)
		cl.monitorAddrs = append(cl.monitorAddrs, grpcAddr)
		cl.monitors = append(cl.monitors, &component{name: fmt.Sprintf("monitor-%d", i), kind: "monitor",
			bin: filepath.Join(bin, "monitor"), ready: "http://" + admin + "/readyz",
			args: func(inc int) []string {
				return []string{"--grpc.insecure", "--collector.insecure", "--grpc.listen-address=" + grpcAddr,
					"--admin.listen-address=" + admin, fmt.Sprintf("--monitor.id=monitor-%d.%d", i, inc),
					"--etcd.endpoints=" + cl.etcdEndpoints, "--node-monitor-grace-period=" + cfg.Grace.String(),
					"--monitor.election-ttl=6s",
					fmt.Sprintf("--default-not-ready-toleration-seconds=%d", int(cfg.Toleration.Seconds())),
					fmt.Sprintf("--default-unreachable-toleration-seconds=%d", int(cfg.Toleration.Seconds())),
					// The recorder watches etcd from revision 1: keep the
					// history for the whole run.
					"--etcd.compaction-interval=24h", "--log.level=warn"}
			}})
	}
	var direct []string
	for i := range cfg.Collectors {
		direct = append(direct, port(b, 10+i))
	}
	cl.proxy = newProxy()
	var proxied []string
	for i := range cfg.Collectors {
		proxied = append(proxied, port(b, 60+i))
	}
	nb := max(cfg.Nodes/4, 1)
	cl.groupNodes = []int{cfg.Nodes - nb, nb}
	cl.groupPrefix = []string{"a-", "b-"}
	for g, name := range []string{"fleet-a", "fleet-b"} {
		addrs := direct
		if g == 1 {
			addrs = proxied
		}
		admin, control := port(b, 50+g), port(b, 55+g)
		rec := filepath.Join(out, name+".jsonl")
		cl.fleetControl = append(cl.fleetControl, control)
		cl.recordFiles = append(cl.recordFiles, rec)
		n, prefix := cl.groupNodes[g], cl.groupPrefix[g]
		cl.fleets = append(cl.fleets, &component{name: name, kind: "fleet", bin: filepath.Join(bin, "fleetsim"),
			ready: "http://" + admin + "/metrics",
			args: func(int) []string {
				args := []string{fmt.Sprintf("--nodes=%d", n), "--name-prefix=" + prefix, "--connections=" + fmt.Sprint(max(n/100, 2)),
					fmt.Sprintf("--node-lease-duration-seconds=%d", cfg.LeaseSeconds), "--ramp-rate=1000",
					"--collector.addresses=" + strings.Join(addrs, ","), "--collector.insecure",
					"--admin.listen-address=" + admin, "--control.listen-address=" + control,
					"--record.file=" + rec, "--leave-on-exit=false", "--log.level=warn"}
				if g == 0 {
					// A tenth of group a runs on wrong clocks for the whole
					// run (ADR 0036): none of them may be marked for it.
					args = append(args, "--clock-skews="+standingSkews, "--clock-skew-every=10")
				}
				return args
			}})
	}
	for i := range cfg.Reporters {
		admin := port(b, 65+i)
		cl.reporters = append(cl.reporters, &component{name: fmt.Sprintf("r-%d", i), kind: "reporter",
			bin: filepath.Join(bin, "reporter"), ready: "http://" + admin + "/readyz",
			args: func(int) []string {
				return []string{fmt.Sprintf("--node-name=r-%d", i), "--collector.addresses=" + strings.Join(direct, ","),
					"--collector.insecure", "--admin.listen-address=" + admin, "--region=rob", fmt.Sprintf("--zone=r-%d", i),
					fmt.Sprintf("--node-lease-duration-seconds=%d", cfg.LeaseSeconds), "--pod-reconcile-period=2s", "--log.level=warn"}
			}})
	}
	return cl, nil
}

// nodes is the number of nodes of the whole cluster.
func (cl *cluster) nodes() int { return cl.cfg.Nodes + len(cl.reporters) }

func (cl *cluster) all() []*component {
	var out []*component
	out = append(out, cl.etcds...)
	out = append(out, cl.collectors...)
	out = append(out, cl.monitors...)
	out = append(out, cl.fleets...)
	return append(out, cl.reporters...)
}

// startEtcd starts the three members together (each waits for a quorum).
func (cl *cluster) startEtcd(ctx context.Context) error {
	for _, c := range cl.etcds {
		if err := c.start(ctx, cl.logDir, false); err != nil {
			return err
		}
	}
	for _, c := range cl.etcds {
		if err := c.proc.WaitHTTP(ctx, c.ready, 90*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// startRest starts the collectors, the proxy, the monitors and the fleets.
func (cl *cluster) startRest(ctx context.Context) error {
	for _, c := range cl.collectors {
		if err := c.start(ctx, cl.logDir, true); err != nil {
			return err
		}
	}
	for i := range cl.collectors {
		if err := cl.proxy.listen(ctx, port(cl.cfg.BasePort, 60+i), port(cl.cfg.BasePort, 10+i)); err != nil {
			return err
		}
	}
	for _, c := range cl.monitors {
		if err := c.start(ctx, cl.logDir, true); err != nil {
			return err
		}
	}
	for _, c := range append(append([]*component(nil), cl.fleets...), cl.reporters...) {
		if err := c.start(ctx, cl.logDir, true); err != nil {
			return err
		}
	}
	return nil
}

// stopAll stops every process, fleets first.
func (cl *cluster) stopAll() {
	all := cl.all()
	for i := len(all) - 1; i >= 0; i-- {
		all[i].stop()
	}
	cl.proxy.close()
}

// standingSkews are the clocks a tenth of group a runs on, from a year
// behind to a year ahead (fleetsim --clock-skews).
const standingSkews = "-8760h,-10m,-2m,2m,1h,8760h"
