// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// Short timings for the monitor tests: nodes renew every second, the grace
// period is six renewals, a dead leader's session expires after 2s.
const (
	monGrace  = 6 * time.Second
	monPeriod = 300 * time.Millisecond
	monTTL    = 2 * time.Second
)

// etcdProxy forwards TCP to etcd so a test can cut one monitor off from
// etcd (a partition, or a crash as etcd sees it) without touching others.
type etcdProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newEtcdProxy(t *testing.T, target string) *etcdProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &etcdProxy{ln: ln, target: strings.TrimPrefix(target, "http://")}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *etcdProxy) Addr() string { return "http://" + p.ln.Addr().String() }

func (p *etcdProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); u.Close() }()
		go func() { _, _ = io.Copy(c, u); c.Close() }()
	}
}

// Cut drops every connection and refuses new ones.
func (p *etcdProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal accepts connections again.
func (p *etcdProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

type monitor struct {
	app    *app.App
	cancel context.CancelFunc
	done   chan struct{}
	proxy  *etcdProxy
	client nodev1.NodeServiceClient
}

// startMonitor runs a monitor in-process, reaching etcd through its own
// proxy, with the fleet's prefix; mods adjust its configuration.
func startMonitor(t *testing.T, c *etcdtest.Cluster, prefix, id string, mods ...func(*app.Config)) *monitor {
	t.Helper()
	p := newEtcdProxy(t, c.Endpoints[0])
	cfg := app.DefaultConfig()
	cfg.ID = id
	cfg.Etcd.Endpoints = []string{p.Addr()}
	cfg.Etcd.Prefix = prefix
	cfg.Etcd.DialTimeout = 2 * time.Second
	cfg.Etcd.RequestTimeout = time.Second
	cfg.GRPC.ListenAddress = "127.0.0.1:0"
	cfg.GRPC.TLS.Insecure = true
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.Lifecycle.GracePeriod = monGrace
	cfg.MonitorPeriod = monPeriod
	cfg.ElectionTTL = monTTL
	cfg.ProgressInterval = 500 * time.Millisecond
	cfg.WatchStaleAfter = 2 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	// Compaction is member-wide and the member is shared (etcdtest.Shared);
	// tests that compact start their own member and turn it on.
	cfg.CompactionInterval = 0
	for _, mod := range mods {
		mod(&cfg)
	}
	a, err := app.New(cfg, zap.NewNop(), admin.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{app: a, cancel: cancel, done: make(chan struct{}), proxy: p}
	go func() { _ = a.Run(ctx); close(m.done) }()
	t.Cleanup(m.stop)
	cc, err := grpc.NewClient(a.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	m.client = nodev1.NewNodeServiceClient(cc)
	return m
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}

// metric reads one unlabelled sample from the monitor's /metrics.
func (m *monitor) metric(t *testing.T, name string) float64 {
	t.Helper()
	return scrape(t, m.app.AdminAddr(), name)
}

// scrape reads one unlabelled sample from the /metrics of the admin server
// at addr (0 when absent).
func scrape(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

// passes counts the monitor's completed health passes.
func (m *monitor) passes(t *testing.T) float64 {
	return m.metric(t, "nodepulse_monitor_health_pass_duration_seconds_count")
}

// waitFor polls cond every 20ms until it holds or the deadline passes. The
// deadlines are generous: they bound a hang, they do not measure anything.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fleet writes nodes straight into etcd and renews their leases there every
// second (the Kubernetes-style heartbeat path, no collector needed).
type fleet struct {
	t     *testing.T
	store nodestore.Store
	mu    sync.Mutex
	alive map[string]bool
}

func newFleet(t *testing.T, store nodestore.Store) *fleet {
	f := &fleet{t: t, store: store, alive: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			f.renew(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fleet) renew(ctx context.Context) {
	f.mu.Lock()
	var ops []nodestore.Op
	for n, ok := range f.alive {
		if ok {
			ops = append(ops, nodestore.Put(nodestore.Leases, n, &nodev1.Lease{Spec: &nodev1.LeaseSpec{HolderIdentity: n, LeaseDurationSeconds: 4,
				RenewTime: nodemodel.Timestamp(time.Now())}}))
		}
	}
	f.mu.Unlock()
	if len(ops) > 0 {
		_, _ = f.store.Apply(ctx, nil, ops...)
	}
}

func (f *fleet) add(name string, alive bool) {
	now := time.Now()
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name, CreationTimestamp: nodemodel.Timestamp(now),
		Labels: map[string]string{nodemodel.LabelZone: "z1"}}}
	var conds []*nodev1.NodeCondition
	for _, typ := range nodemodel.ReporterConditions {
		st := nodemodel.False
		if typ == nodemodel.Ready {
			st = nodemodel.True
		}
		conds = append(conds, &nodev1.NodeCondition{Type: typ, Status: st, Reason: "Kubelet", LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)})
	}
	if _, err := f.store.Apply(context.Background(), nil, nodestore.Put(nodestore.Nodes, name, meta),
		nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{Conditions: conds})); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.alive[name] = alive
	f.mu.Unlock()
	f.renew(context.Background())
}

func readyOf(n *nodev1.Node) *nodev1.NodeCondition {
	return nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready)
}

func getNode(t *testing.T, m *monitor, name string) *nodev1.Node {
	t.Helper()
	r, err := m.client.GetNode(context.Background(), &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return nil
	}
	return r.GetNode()
}
