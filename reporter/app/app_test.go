// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/reporter/collectortest"
	"github.com/nodepulse/nodepulse/reporter/probe"
	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// waitFor polls cond until it holds or the (generous) deadline passes: the
// tests run on loaded machines, so they never assert how fast things happen.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testConfig(addrs string) Config {
	cfg := DefaultConfig()
	cfg.NodeName = "node-a"
	cfg.NodeIP = ""
	cfg.Collector.Addresses = addrs
	cfg.Collector.TLS.Insecure = true
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.LeaseDurationSeconds = 4 // renew every second
	cfg.Zone, cfg.Region = "z1", "r1"
	cfg.RegisterWithTaints = []string{"dedicated=infra:NoSchedule"}
	return cfg
}

func TestRegisterLeaseStatusThenFailover(t *testing.T) {
	a, b := collectortest.Start(t, "A"), collectortest.Start(t, "B")
	cfg := testConfig(a.Addr() + "," + b.Addr())
	app, err := New(cfg, zap.NewNop(), admin.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()

	// Registration, then leases and a status on whichever collector the
	// balancer picked.
	var first, other *collectortest.Collector
	waitFor(t, "registration", func() bool {
		for _, c := range []*collectortest.Collector{a, b} {
			if n, ok := c.Node("node-a"); ok && n.Leases >= 2 && n.Statuses >= 1 {
				first = c
				return true
			}
		}
		return false
	})
	other = a
	if first == a {
		other = b
	}
	n, _ := first.Node("node-a")
	reg := n.Register
	if n.Named != "node-a" {
		t.Errorf("stream metadata %s = %q, want the node's name", identity.NodeMetadata, n.Named)
	}
	for k, v := range map[string]string{nodemodel.LabelHostname: "node-a", nodemodel.LabelOS: runtime.GOOS, nodemodel.LabelZone: "z1", nodemodel.LabelRegion: "r1"} {
		if reg.GetLabels()[k] != v {
			t.Errorf("label %s = %q, want %q", k, reg.GetLabels()[k], v)
		}
	}
	if len(reg.GetRegisterWithTaints()) != 1 || reg.GetRegisterWithTaints()[0].GetValue() != "infra" || reg.GetReporterId() == "" {
		t.Errorf("register = %v", reg)
	}
	st := n.LastStatus
	host := probe.New("/").Read()
	if got, want := st.GetCapacity()["cpu"], strconv.Itoa(host.NumCPU); got != want {
		t.Errorf("capacity cpu = %s, want %s", got, want)
	}
	if rd := nodemodel.FindCondition(st.GetConditions(), nodemodel.Ready); rd.GetStatus() != nodemodel.True {
		t.Errorf("Ready = %v", rd)
	}
	if st.GetNodeInfo().GetBootId() == "" || st.GetDaemonEndpoints().GetReporterEndpoint().GetPort() == 0 {
		t.Errorf("node info %v, endpoints %v", st.GetNodeInfo(), st.GetDaemonEndpoints())
	}
	resp, err := http.Get("http://" + app.AdminAddr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz = %d after registration", resp.StatusCode)
	}

	// Kill the collector holding the stream: the reporter must move to the
	// other one, register again and send a full status there.
	first.Stop()
	waitFor(t, "failover to the other collector", func() bool {
		n, ok := other.Node("node-a")
		return ok && n.Registers >= 1 && n.Statuses >= 1 && n.Leases >= 1
	})
	n, _ = other.Node("node-a")
	if n.LastStatus.GetCapacity()["memory"] == "" {
		t.Errorf("status after failover is not a full status: %v", n.LastStatus)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	waitFor(t, "leaving", func() bool { n, _ := other.Node("node-a"); return n.Leaving == 1 })
}

func TestMainHelpAndBadFlags(t *testing.T) {
	// --help prints usage and is not an error.
	if err := Main(t.Context(), []string{"--help"}); err != nil {
		t.Errorf("--help: %v", err)
	}
	for _, args := range [][]string{
		{"--eviction-hard", "memory.available>1"},
		{"--register-with-taints", "a=b:Sometimes", "--collector.insecure", "--admin.listen-address="},
		{"--node-ip", "not-an-ip"},
		{"--node-lease-duration-seconds", "0", "--collector.insecure", "--admin.listen-address="},
		{"stray"},
	} {
		err := Main(t.Context(), append(args, "--log.level=error"))
		if err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestUsageMentionsEnv(t *testing.T) {
	var buf bytes.Buffer
	cfg := DefaultConfig()
	fs := newService(&cfg, &buf).Flags
	fs.Usage()
	for _, want := range []string{"--node-name", "$NODEPULSE_NODE_NAME", "--collector.addresses", "--eviction-hard"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	// The simulator is the tests module's fleetsim, not part of the product.
	if strings.Contains(strings.ToLower(buf.String()), "simulat") {
		t.Errorf("usage mentions the simulator:\n%s", buf.String())
	}
}

// TestSimulateIsUnknown: "reporter simulate" is gone and says so instead of
// starting a reporter or failing on its flags.
func TestSimulateIsUnknown(t *testing.T) {
	err := Main(t.Context(), []string{"simulate", "--nodes=1", "--admin.listen-address="})
	if err == nil || !strings.Contains(err.Error(), `unknown command "simulate"`) {
		t.Fatalf("reporter simulate: got %v, want an unknown-command error", err)
	}
}
