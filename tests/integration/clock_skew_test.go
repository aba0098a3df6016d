// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
	"github.com/nodepulse/nodepulse/tests/fleetsim"
)

// TestClockSkewDrill: 1,000 simulated nodes, one in ten with a clock off
// by −1 year, −10 min, −2 min, +2 min, +1 h or +1 year, through a real
// collector and monitor on etcd. For the whole hold no node is ever served
// anything but Ready, none gets a NoExecute taint (what evicts pods), and
// within one status interval of the fleet attaching every skewed node's
// skew is exported (nodepulse_node_clock_skew_seconds, within 2 s of its
// clock's offset; the others within 2 s of 0) and announced by one
// NodeClockSkew warning event. Before ADR 0036 the collector refused every
// renewal and status of such a node, and each went Unknown after the
// grace period.
//
// The hold is 30 s here (five grace periods of the suite's monitor);
// NODEPULSE_CLOCK_DRILL_HOLD=5m is the figure in docs/benchmarks.md.
func TestClockSkewDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1,000-node fleet")
	}
	hold := 30 * time.Second
	if v := os.Getenv("NODEPULSE_CLOCK_DRILL_HOLD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NODEPULSE_CLOCK_DRILL_HOLD: %v", err)
		}
		hold = d
	}
	const nodes, every, statusEvery = 1000, 10, 10 * time.Second
	year := 365 * 24 * time.Hour
	skews := []time.Duration{-year, -10 * time.Minute, -2 * time.Minute, 2 * time.Minute, time.Hour, year}

	c := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, c)
	col := startCollector(t, store, "", nil)
	m := startMonitor(t, c, store.Prefix(), "monitor-clock", func(c *app.Config) { c.Collector.TLS.Insecure = true }) // follows the collector's feed
	waitFor(t, 30*time.Second, "the monitor to lead", m.app.Leading)

	cfg := fleetsim.DefaultConfig()
	cfg.Nodes, cfg.NamePrefix, cfg.RampRate = nodes, "skew-", 2000
	cfg.StatusReportFrequency = statusEvery
	cfg.LeaseDurationSeconds = 4 // renewals every second: the suite's monitor has a 6 s grace period
	cfg.ClockSkews, cfg.ClockSkewEvery = skews, every
	cfg.Collector = grpcclient.Config{Addresses: col.GRPCAddr(), KeepaliveTime: grpcclient.DefaultKeepaliveTime, KeepaliveTimeout: grpcclient.DefaultKeepaliveTimeout}
	cfg.Collector.TLS.Insecure = true
	sim, err := fleetsim.New(cfg, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	start := time.Now()
	waitFor(t, 2*time.Minute, "the fleet to attach", func() bool { return col.Streams() == nodes })
	attached := time.Now()
	t.Logf("fleet of %d attached in %s", nodes, attached.Sub(start).Round(time.Millisecond))

	// Every skewed node's skew exported, within one status interval.
	var visibleAfter time.Duration
	var lastMiss string
	defer func() {
		if t.Failed() {
			t.Logf("last miss: %s; collector skews observed %v; lease series %d", lastMiss,
				scrape(t, col.AdminAddr(), "nodepulse_collector_clock_skew_seconds_count"), len(scrapeAll(t, m, app.KubeStatePath)["kube_lease_renew_time"]))
		}
	}()
	waitFor(t, statusEvery+10*time.Second, "every node's clock skew exported", func() bool {
		got := map[string]float64{}
		for _, s := range scrapeAll(t, m, app.KubeStatePath)["nodepulse_node_clock_skew_seconds"] {
			got[s.Labels] = s.Value
		}
		for i := range nodes {
			v, ok := got[fmt.Sprintf(`node="%s"`, sim.Name(i))]
			if !ok || math.Abs(v-cfg.ClockSkew(i).Seconds()) > 2 {
				lastMiss = fmt.Sprintf("%s: %v (exported %v) want %s; %d series", sim.Name(i), v, ok, cfg.ClockSkew(i), len(got))
				return false
			}
		}
		visibleAfter = time.Since(attached)
		return true
	})
	t.Logf("every node's skew exported %s after the fleet attached (status interval %s)", visibleAfter.Round(time.Millisecond), statusEvery)
	if visibleAfter > statusEvery+2*time.Second {
		t.Errorf("skews visible only %s after the fleet attached, more than a status interval (%s)", visibleAfter, statusEvery)
	}

	// The hold: every node Ready, no NoExecute taint, sampled every second.
	var notReady, tainted, samples int
	worst := map[string]string{}
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(time.Second) {
		samples++
		for _, n := range listAll(t, m) {
			name := n.GetMetadata().GetName()
			if r := readyOf(n); r.GetStatus() != nodemodel.True {
				notReady++
				worst[name] = fmt.Sprintf("Ready=%s (%s)", r.GetStatus(), r.GetReason())
			}
			for _, tn := range n.GetSpec().GetTaints() {
				if tn.GetEffect() == nodemodel.NoExecute {
					tainted++
					worst[name] = "tainted " + tn.GetKey()
				}
			}
		}
	}
	var evs []*nodev1.Event
	if r, err := m.client.ListEvents(context.Background(), &nodev1.ListEventsRequest{Kind: "Node", Limit: 5000}); err != nil {
		t.Fatal(err)
	} else {
		evs = r.GetEvents()
	}
	warned := map[string]int{}
	for _, e := range evs {
		if e.GetReason() == "NodeClockSkew" {
			warned[e.GetInvolvedObject().GetName()]++
		}
	}
	t.Logf("hold of %s, %d samples of %d nodes: %d not-Ready samples, %d NoExecute taints; %d nodes warned NodeClockSkew; monitor transitions True→Unknown %v",
		hold, samples, nodes, notReady, tainted, len(warned), scrape(t, m.app.AdminAddr(), `nodepulse_monitor_ready_transitions_total{from="True",to="Unknown"}`))
	if n := scrape(t, m.app.AdminAddr(), `nodepulse_monitor_ready_transitions_total{from="True",to="Unknown"}`); n != 0 {
		t.Errorf("%v True→Unknown transitions", n)
	}
	if notReady > 0 || tainted > 0 {
		var names []string
		for n, w := range worst {
			names = append(names, n+": "+w)
		}
		sort.Strings(names)
		t.Fatalf("false alarms on nodes with skewed clocks: %s", strings.Join(names[:min(len(names), 20)], "; "))
	}
	for i := range nodes {
		want := 0
		if cfg.ClockSkew(i) != 0 {
			want = 1
		}
		if got := warned[sim.Name(i)]; got != want {
			t.Errorf("node %s (clock %s off): %d NodeClockSkew events, want %d", sim.Name(i), cfg.ClockSkew(i), got, want)
		}
	}
}

// listAll lists every node through the monitor's NodeService, page by page.
func listAll(t *testing.T, m *monitor) []*nodev1.Node {
	t.Helper()
	var out []*nodev1.Node
	req := &nodev1.ListNodesRequest{PageSize: 5000}
	for {
		r, err := m.client.ListNodes(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.GetNodes()...)
		if r.GetNextPageToken() == "" {
			return out
		}
		req.PageToken = r.GetNextPageToken()
	}
}
