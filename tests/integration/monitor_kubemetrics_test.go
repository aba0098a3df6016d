// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
	"github.com/nodepulse/nodepulse/tests/promtext"
)

// TestMonitorKubeStateMetrics runs two monitors on etcd with four nodes:
// one Ready, one that stopped renewing (Unknown, tainted unreachable), one
// cordoned and one tainted through the API. The leader's
// /metrics/kube-state carries the kube-state-metrics series of each with
// kube-state-metrics' values; the follower's carries none
// (--metrics.kube-state=leader), so a sum over both replicas counts every
// node once. Neither's /metrics carries any: a scrape of the process's own
// metrics must not pay for every node.
func TestMonitorKubeStateMetrics(t *testing.T) {
	c := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	start := time.Now()
	f.add("ready", true)
	f.add("lost", false)
	f.add("cordoned", true)
	f.add("tainted", true)
	// The Ready node reports what a reporter reports beyond its
	// conditions: system info, addresses and resources.
	e, err := store.Get(context.Background(), nodestore.Statuses, "ready")
	if err != nil {
		t.Fatal(err)
	}
	st := e.Value.(*nodev1.NodeStatus)
	st.NodeInfo = &nodev1.NodeSystemInfo{KernelVersion: "6.8.0-test", OsImage: "Test Linux", ContainerRuntimeVersion: "containerd://1.7.27",
		ReporterVersion: "v1.2.3", SystemUuid: "uuid-ready"}
	st.Addresses = []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.1.2.3"}, {Type: "Hostname", Address: "ready"}}
	st.Capacity = map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
	st.Allocatable = map[string]string{"cpu": "3500m", "memory": "7Gi", "pods": "110", "ephemeral-storage": "90Gi"}
	// The lost node renewed once, then stopped.
	lostLease := &nodev1.Lease{Spec: &nodev1.LeaseSpec{HolderIdentity: "lost", LeaseDurationSeconds: 4, RenewTime: nodemodel.Timestamp(start)}}
	if _, err := store.Apply(context.Background(), nil, nodestore.Put(nodestore.Statuses, "ready", st), nodestore.Put(nodestore.Leases, "lost", lostLease)); err != nil {
		t.Fatal(err)
	}

	a := startMonitor(t, c, store.Prefix(), "monitor-a")
	waitFor(t, 30*time.Second, "monitor-a to lead", a.app.Leading)
	b := startMonitor(t, c, store.Prefix(), "monitor-b")
	if _, err := a.client.CordonNode(context.Background(), &nodev1.CordonNodeRequest{Name: "cordoned"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.AddTaint(context.Background(), &nodev1.AddTaintRequest{Name: "tainted",
		Taint: &nodev1.Taint{Key: "dedicated", Value: "gpu", Effect: nodemodel.NoSchedule}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the lost node to be Unknown and tainted unreachable:NoExecute", func() bool {
		n := getNode(t, a, "lost")
		return readyOf(n).GetStatus() == nodemodel.Unknown && nodemodel.HasTaint(n.GetSpec().GetTaints(), nodemodel.TaintUnreachable, nodemodel.NoExecute)
	})

	var got promtext.Samples
	waitFor(t, 10*time.Second, "the leader's scrape to show the cordon and the taint", func() bool {
		got = scrapeAll(t, a, app.KubeStatePath)
		return value(got, "kube_node_spec_unschedulable", `node="cordoned"`) == 1 &&
			value(got, "kube_node_spec_taint", `effect="NoSchedule",key="dedicated",node="tainted",value="gpu"`) == 1
	})
	scrapedAt := time.Now()

	// Conditions: 1 for the status the node has, 0 for the other two.
	for node, ready := range map[string]string{"ready": "true", "cordoned": "true", "tainted": "true", "lost": "unknown"} {
		for _, s := range []string{"true", "false", "unknown"} {
			want := 0.0
			if s == ready {
				want = 1
			}
			labels := fmt.Sprintf(`condition="Ready",node=%q,status=%q`, node, s)
			if v := value(got, "kube_node_status_condition", labels); v != want {
				t.Errorf("kube_node_status_condition{%s} = %v, want %v", labels, v, want)
			}
		}
	}
	// The lost node's other conditions are Unknown too (spec §6.2).
	if v := value(got, "kube_node_status_condition", `condition="MemoryPressure",node="lost",status="unknown"`); v != 1 {
		t.Errorf("lost node's MemoryPressure unknown = %v, want 1", v)
	}
	for node, want := range map[string]float64{"ready": 0, "lost": 0, "cordoned": 1, "tainted": 0} {
		if v := value(got, "kube_node_spec_unschedulable", fmt.Sprintf("node=%q", node)); v != want {
			t.Errorf("kube_node_spec_unschedulable{node=%q} = %v, want %v", node, v, want)
		}
	}
	// Taints: the lost node carries the controller's, the tainted one the
	// operator's, the cordoned one the unschedulable taint.
	for _, labels := range []string{
		`effect="NoExecute",key="node.kubernetes.io/unreachable",node="lost",value=""`,
		`effect="NoSchedule",key="node.kubernetes.io/unreachable",node="lost",value=""`,
		`effect="NoSchedule",key="dedicated",node="tainted",value="gpu"`,
		`effect="NoSchedule",key="node.kubernetes.io/unschedulable",node="cordoned",value=""`,
	} {
		if v := value(got, "kube_node_spec_taint", labels); v != 1 {
			t.Errorf("kube_node_spec_taint{%s} = %v, want 1", labels, v)
		}
	}
	for _, s := range got["kube_node_spec_taint"] {
		if strings.Contains(s.Labels, `node="ready"`) {
			t.Errorf("the Ready node has a taint: %s", s.Labels)
		}
	}
	info := `container_runtime_version="containerd://1.7.27",internal_ip="10.1.2.3",kernel_version="6.8.0-test",kubelet_version="v1.2.3",` +
		`kubeproxy_version="deprecated",node="ready",os_image="Test Linux",pod_cidr="",provider_id="",system_uuid="uuid-ready"`
	if v := value(got, "kube_node_info", info); v != 1 {
		t.Errorf("kube_node_info{%s} = %v, want 1; have %v", info, v, got["kube_node_info"])
	}
	for _, r := range []struct {
		metric, labels string
		want           float64
	}{
		{"kube_node_status_capacity", `node="ready",resource="cpu",unit="core"`, 4},
		{"kube_node_status_capacity", `node="ready",resource="memory",unit="byte"`, 8 << 30},
		{"kube_node_status_capacity", `node="ready",resource="pods",unit="integer"`, 110},
		{"kube_node_status_capacity", `node="ready",resource="ephemeral_storage",unit="byte"`, 100 << 30},
		{"kube_node_status_allocatable", `node="ready",resource="cpu",unit="core"`, 3.5},
		{"kube_node_status_allocatable", `node="ready",resource="memory",unit="byte"`, 7 << 30},
	} {
		if v := value(got, r.metric, r.labels); v != r.want {
			t.Errorf("%s{%s} = %v, want %v", r.metric, r.labels, v, r.want)
		}
	}
	for _, node := range []string{"ready", "lost", "cordoned", "tainted"} {
		created := value(got, "kube_node_created", fmt.Sprintf("node=%q", node))
		if created < float64(start.Unix()) || created > float64(scrapedAt.Unix()) {
			t.Errorf("kube_node_created{node=%q} = %v, not between %d and %d", node, created, start.Unix(), scrapedAt.Unix())
		}
	}
	// Lease renewals: the live nodes renewed within the last seconds, the
	// lost one once, when it was added, a grace period and more ago.
	lease := func(node string) float64 {
		return value(got, "kube_lease_renew_time", fmt.Sprintf(`lease=%q,namespace="kube-node-lease"`, node))
	}
	if r := lease("ready"); r < float64(scrapedAt.Add(-5*time.Second).Unix()) || r > float64(scrapedAt.Unix()) {
		t.Errorf("ready's lease renewed at %v, scraped at %d", r, scrapedAt.Unix())
	}
	if r := lease("lost"); r != float64(start.Unix()) || r > float64(scrapedAt.Add(-monGrace).Unix()+1) {
		t.Errorf("lost's lease renewed at %v: want its one renewal at %d, a grace period before the scrape at %d", r, start.Unix(), scrapedAt.Unix())
	}

	// The follower exports none of it; its own metrics are still there.
	for name := range scrapeAll(t, b, app.KubeStatePath) {
		if strings.HasPrefix(name, "kube_") {
			t.Errorf("the follower exports %s", name)
		}
	}
	for _, m := range []*monitor{a, b} {
		own := scrapeAll(t, m, "/metrics")
		if len(own["nodepulse_monitor_leader"]) == 0 {
			t.Error("a monitor's /metrics has no nodepulse_monitor_leader")
		}
		for name := range own {
			if strings.HasPrefix(name, "kube_") {
				t.Errorf("/metrics carries %s (it belongs on %s)", name, app.KubeStatePath)
			}
		}
	}
}

func scrapeAll(t *testing.T, m *monitor, path string) promtext.Samples {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := promtext.Scrape(ctx, http.DefaultClient, "http://"+m.app.AdminAddr()+path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// value of the sample of name whose labels are exactly labels (-1 when
// absent, so a missing series never passes for a 0).
func value(s promtext.Samples, name, labels string) float64 {
	for _, x := range s[name] {
		if x.Labels == labels {
			return x.Value
		}
	}
	return -1
}
