// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
	"github.com/nodepulse/nodepulse/services/version"
)

// startMonitor runs a real monitor (gRPC on 127.0.0.1:0) over memstore.
func startMonitor(t *testing.T) (string, *memstore.Store) {
	return startMonitorTLS(t, tlsconfig.Config{Insecure: true})
}

// startMonitorTLS runs it with the gRPC server's TLS settings tc; the
// CLI's TLS flags, when tc is not plaintext, are those of the development
// CA's operator "admin" in tc's directory.
func startMonitorTLS(t *testing.T, tc tlsconfig.Config) (string, *memstore.Store) {
	t.Helper()
	ms := memstore.New(memstore.Config{})
	cfg := app.DefaultConfig()
	cfg.Store = ms
	cfg.GRPC.ListenAddress = "127.0.0.1:0"
	cfg.GRPC.TLS = tc
	var flags []string
	if !tc.Insecure {
		dir := filepath.Dir(tc.CAFile)
		flags = []string{"--tls-ca", tc.CAFile, "--tls-cert", filepath.Join(dir, "operator-admin.crt"), "--tls-key", filepath.Join(dir, "operator-admin.key")}
	}
	cfg.Admin.ListenAddress = ""
	cfg.MonitorPeriod = 200 * time.Millisecond
	a, err := app.New(cfg, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = ms.Close() })
	now := time.Now()
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "web-1", CreationTimestamp: nodemodel.Timestamp(now.Add(-90 * time.Minute)),
		Labels: map[string]string{nodemodel.LabelZone: "eu-1a", "role": "web"}}}
	st := &nodev1.NodeStatus{
		Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True, Reason: "KubeletReady", Message: "kubelet is posting ready status",
			LastHeartbeatTime: nodemodel.Timestamp(now), LastTransitionTime: nodemodel.Timestamp(now)}},
		Addresses: []*nodev1.NodeAddress{{Type: nodemodel.AddressInternalIP, Address: "10.0.0.7"}},
		Capacity:  map[string]string{"cpu": "4", "memory": "16Gi"},
		NodeInfo:  &nodev1.NodeSystemInfo{KernelVersion: "6.1.0", OsImage: "Debian GNU/Linux 12 (bookworm)", ReporterVersion: "v0.1.0"},
	}
	if _, err := ms.Apply(context.Background(), nil, nodestore.Put(nodestore.Nodes, "web-1", meta), nodestore.Put(nodestore.Statuses, "web-1", st),
		nodestore.Put(nodestore.Leases, "web-1", &nodev1.Lease{Spec: &nodev1.LeaseSpec{HolderIdentity: "web-1", RenewTime: nodemodel.Timestamp(now)}})); err != nil {
		t.Fatal(err)
	}
	addr := a.GRPCAddr()
	// Poll until the monitor serves the node.
	for deadline := time.Now().Add(20 * time.Second); ; {
		out, err := run(t, addr, append([]string{"get", "node", "web-1", "-o", "name"}, flags...)...)
		if err == nil && strings.TrimSpace(out) == "node/web-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitor never served the node: %v %s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr, ms
}

func run(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Main(context.Background(), append(args, "--server", addr), &out, &errOut)
	return out.String(), err
}

func mustRun(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := run(t, addr, args...)
	if err != nil {
		t.Fatalf("nodepulse %v: %v", args, err)
	}
	return out
}

func TestCLIAgainstRunningMonitor(t *testing.T) {
	addr, _ := startMonitor(t)

	out := mustRun(t, addr, "get", "nodes")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME STATUS AGE VERSION" {
		t.Fatalf("get nodes:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "web-1" || f[1] != "Ready" || f[2] != "90m" || f[3] != "v0.1.0" {
		t.Fatalf("row %q", lines[1])
	}
	wide := mustRun(t, addr, "get", "nodes", "-o", "wide", "-l", "role=web")
	for _, want := range []string{"INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "ZONE", "10.0.0.7", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "eu-1a"} {
		if !strings.Contains(wide, want) {
			t.Errorf("wide output lacks %q:\n%s", want, wide)
		}
	}
	if out := mustRun(t, addr, "get", "nodes", "-l", "role=db"); !strings.Contains(out, "No nodes found.") {
		t.Errorf("empty selection: %s", out)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, addr, "get", "nodes", "-o", "json")), &list); err != nil || list.Kind != "NodeList" || len(list.Items) != 1 {
		t.Fatalf("json list: %v %+v", err, list)
	}
	js := mustRun(t, addr, "get", "node", "web-1", "-o", "json")
	for _, want := range []string{`"lastHeartbeatTime"`, `"nodeInfo"`, `"creationTimestamp"`} {
		if !strings.Contains(js, want) {
			t.Errorf("json lacks %s:\n%s", want, js)
		}
	}
	if y := mustRun(t, addr, "get", "node", "web-1", "-o", "yaml"); !strings.Contains(y, "metadata:") || !strings.Contains(y, "name: web-1") {
		t.Errorf("yaml:\n%s", y)
	}

	d := mustRun(t, addr, "describe", "node", "web-1")
	for _, want := range []string{"Name:", "web-1", "Conditions:", "KubeletReady", "Addresses:", "10.0.0.7", "Capacity:", "Lease:", "HolderIdentity:", "Explanation:", "Ready since", "Events:"} {
		if !strings.Contains(d, want) {
			t.Errorf("describe lacks %q:\n%s", want, d)
		}
	}

	if out := mustRun(t, addr, "cordon", "web-1"); strings.TrimSpace(out) != "node/web-1 cordoned" {
		t.Errorf("cordon: %q", out)
	}
	if out := mustRun(t, addr, "get", "nodes"); !strings.Contains(out, "Ready,SchedulingDisabled") {
		t.Errorf("cordoned node status:\n%s", out)
	}
	if out := mustRun(t, addr, "uncordon", "web-1"); strings.TrimSpace(out) != "node/web-1 uncordoned" {
		t.Errorf("uncordon: %q", out)
	}
	mustRun(t, addr, "taint", "web-1", "dedicated=gpu:NoSchedule")
	if d := mustRun(t, addr, "describe", "node", "web-1"); !strings.Contains(d, "dedicated=gpu:NoSchedule") {
		t.Errorf("taint not shown:\n%s", d)
	}
	mustRun(t, addr, "taint", "web-1", "dedicated:NoSchedule-")
	if _, err := run(t, addr, "taint", "web-1", "node.kubernetes.io/unreachable:NoExecute"); err == nil || !strings.Contains(err.Error(), "taint.key") {
		t.Errorf("controller taint accepted: %v", err)
	}
	if _, err := run(t, addr, "get", "node", "nope"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("missing node: %v", err)
	}
	if out := mustRun(t, addr, "explain", "node", "web-1"); !strings.HasPrefix(out, "web-1: Ready since") {
		t.Errorf("explain: %s", out)
	}
}

func TestParseTaintArg(t *testing.T) {
	for _, tc := range []struct {
		in                 string
		key, value, effect string
		remove, bad        bool
	}{
		{in: "k=v:NoSchedule", key: "k", value: "v", effect: "NoSchedule"},
		{in: "k:NoExecute", key: "k", effect: "NoExecute"},
		{in: "k:NoSchedule-", key: "k", effect: "NoSchedule", remove: true},
		{in: "k-", key: "k", remove: true},
		{in: "k=v", bad: true},
		{in: "=v:NoSchedule", bad: true},
	} {
		tt, rm, err := ParseTaintArg(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if tc.bad {
			continue
		}
		if tt.GetKey() != tc.key || tt.GetValue() != tc.value || tt.GetEffect() != tc.effect || rm != tc.remove {
			t.Errorf("%q: got %v remove=%v", tc.in, tt, rm)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 330 * time.Second: "5m30s", 45 * time.Minute: "45m", 200 * time.Minute: "3h20m",
		30 * time.Hour: "30h", 77 * time.Hour: "3d5h", 45 * 24 * time.Hour: "45d", 800 * 24 * time.Hour: "2y",
	} {
		if got := HumanDuration(d); got != want {
			t.Errorf("%s: %s, want %s", d, got, want)
		}
	}
}

// --version and the version command print the build's version and need no
// monitor.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		if err := Main(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got := strings.TrimSpace(out.String()); got != version.String() {
			t.Errorf("%v printed %q, want %q", args, got, version.String())
		}
	}
}
