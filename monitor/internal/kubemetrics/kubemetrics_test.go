// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubemetrics

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

type fakeSource []cache.Entry

func (f fakeSource) AppendEntries(dst []cache.Entry) ([]cache.Entry, int64) {
	return append(dst, f...), 1
}

type fakeLive map[string]time.Time

func (f fakeLive) Node(name string) liveness.Node { return liveness.Node{RenewTime: f[name]} }

func cond(typ, status string) *nodev1.NodeCondition {
	return &nodev1.NodeCondition{Type: typ, Status: status}
}

// testNode is a node as a reporter reports it: four conditions, six
// resources, an InternalIP, system info.
func testNode(name string, ready string, taints ...*nodev1.Taint) *nodev1.Node {
	res := map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"}
	return &nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: name, CreationTimestamp: nodemodel.Timestamp(time.Unix(1700000000, 0)),
			Labels: map[string]string{nodemodel.LabelZone: "z1", "nodepulse.io/pool": "gpu"}},
		Spec: &nodev1.NodeSpec{Taints: taints, ProviderId: "sim://" + name},
		Status: &nodev1.NodeStatus{
			Conditions: []*nodev1.NodeCondition{cond("MemoryPressure", "False"), cond("DiskPressure", "False"), cond("PIDPressure", "False"), cond("Ready", ready)},
			Capacity:   res, Allocatable: res,
			Addresses: []*nodev1.NodeAddress{{Type: "Hostname", Address: name}, {Type: "InternalIP", Address: "10.0.0.1"}},
			NodeInfo: &nodev1.NodeSystemInfo{KernelVersion: "6.8.0", OsImage: "Ubuntu 24.04", ContainerRuntimeVersion: "containerd://1.7.27",
				ReporterVersion: "v0.9.0", SystemUuid: "uuid-" + name},
		},
	}
}

func entry(n *nodev1.Node, renew time.Time) cache.Entry {
	e := cache.Entry{Name: n.GetMetadata().GetName(), Node: n}
	if !renew.IsZero() {
		e.Lease = &nodev1.Lease{Spec: &nodev1.LeaseSpec{RenewTime: nodemodel.Timestamp(renew)}}
	}
	return e
}

// gather renders what the collector exports in the text format, one
// sample per line, sorted.
func gather(t testing.TB, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

func TestCollectorSeries(t *testing.T) {
	renew := time.Unix(1700000500, 0)
	cordoned := testNode("b", "Unknown", &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute},
		&nodev1.Taint{Key: "dedicated", Value: "gpu", Effect: nodemodel.NoSchedule})
	cordoned.Spec.Unschedulable = true
	cordoned.Status.Capacity = map[string]string{"cpu": "1500m", "example.com/gpu": "2", "attachable-volumes-aws-ebs": "25", "kubernetes.io/odd": "1"}
	cordoned.Status.Allocatable = nil
	src := fakeSource{entry(testNode("a", "True"), renew), entry(cordoned, time.Time{})}
	// The feed's renewal is newer than a's checkpoint; b has only the feed.
	live := fakeLive{"a": renew.Add(7 * time.Second), "b": renew.Add(-time.Minute)}
	c, err := New(Config{Mode: ModeAll, NodeLabels: []string{"nodepulse.io/pool", nodemodel.LabelZone}}, src, live)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(gather(t, c), "\n")
	for _, want := range []string{
		`kube_node_status_condition{condition="Ready",node="a",status="true"} 1`,
		`kube_node_status_condition{condition="Ready",node="a",status="false"} 0`,
		`kube_node_status_condition{condition="Ready",node="a",status="unknown"} 0`,
		`kube_node_status_condition{condition="Ready",node="b",status="true"} 0`,
		`kube_node_status_condition{condition="Ready",node="b",status="unknown"} 1`,
		`kube_node_status_condition{condition="DiskPressure",node="b",status="false"} 1`,
		`kube_node_spec_unschedulable{node="a"} 0`,
		`kube_node_spec_unschedulable{node="b"} 1`,
		`kube_node_spec_taint{effect="NoExecute",key="node.kubernetes.io/unreachable",node="b",value=""} 1`,
		`kube_node_spec_taint{effect="NoSchedule",key="dedicated",node="b",value="gpu"} 1`,
		`kube_node_info{container_runtime_version="containerd://1.7.27",internal_ip="10.0.0.1",kernel_version="6.8.0",kubelet_version="v0.9.0",kubeproxy_version="deprecated",node="a",os_image="Ubuntu 24.04",pod_cidr="",provider_id="sim://a",system_uuid="uuid-a"} 1`,
		`kube_node_status_capacity{node="a",resource="cpu",unit="core"} 4`,
		`kube_node_status_capacity{node="a",resource="memory",unit="byte"} 1.7179869184e+10`,
		`kube_node_status_capacity{node="a",resource="pods",unit="integer"} 110`,
		`kube_node_status_capacity{node="a",resource="ephemeral_storage",unit="byte"} 1.073741824e+11`,
		`kube_node_status_capacity{node="a",resource="hugepages_2Mi",unit="byte"} 1.073741824e+09`,
		`kube_node_status_allocatable{node="a",resource="cpu",unit="core"} 4`,
		`kube_node_status_capacity{node="b",resource="cpu",unit="core"} 1.5`,
		`kube_node_status_capacity{node="b",resource="example_com_gpu",unit="integer"} 2`,
		`kube_node_status_capacity{node="b",resource="attachable_volumes_aws_ebs",unit="byte"} 25`,
		`kube_node_created{node="a"} 1.7e+09`,
		`kube_node_labels{label_nodepulse_io_pool="gpu",label_topology_kubernetes_io_zone="z1",node="a"} 1`,
		`kube_lease_renew_time{lease="a",namespace="kube-node-lease"} 1.700000507e+09`,
		`kube_lease_renew_time{lease="b",namespace="kube-node-lease"} 1.70000044e+09`,
	} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("missing %s", want)
		}
	}
	for _, absent := range []string{`resource="kubernetes_io_odd"`, `kube_node_status_allocatable{node="b"`} {
		if strings.Contains(got, absent) {
			t.Errorf("exported %s", absent)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
	// 3 per condition x 4, unschedulable, info, 6 capacity, 6 allocatable,
	// created, labels, lease for a; b: 12 + 1 + 2 taints + 1 + 3 + 1 + 1 + 1.
	if n := len(strings.Split(got, "\n")); n != 29+22 {
		t.Errorf("%d series, want %d", n, 29+22)
	}
}

func TestCollectorModes(t *testing.T) {
	src := fakeSource{entry(testNode("a", "True"), time.Now())}
	leading := false
	for _, tc := range []struct {
		mode    string
		leading bool
		want    bool
	}{{ModeLeader, false, false}, {ModeLeader, true, true}, {"", true, true}, {ModeAll, false, true}, {ModeOff, true, false}} {
		leading = tc.leading
		c, err := New(Config{Mode: tc.mode, Leading: func() bool { return leading }}, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(gather(t, c)) > 0; got != tc.want {
			t.Errorf("mode %q leading %v: exports %v, want %v", tc.mode, tc.leading, got, tc.want)
		}
	}
	if _, err := New(Config{Mode: "followers"}, src, nil); err == nil {
		t.Error("mode followers accepted")
	}
	if _, err := New(Config{NodeLabels: []string{"a.b/c", "a_b/c"}}, src, nil); err == nil {
		t.Error("two label keys exported under one name accepted")
	}
}

func TestUnitsAndNames(t *testing.T) {
	for r, want := range map[string]string{"cpu": "core", "memory": "byte", "ephemeral-storage": "byte", "storage": "byte", "pods": "integer",
		"hugepages-1Gi": "byte", "attachable-volumes-csi-x": "byte", "nvidia.com/gpu": "integer", "kubernetes.io/batch": "", "requests.x/y": "", "weird": ""} {
		if got := Unit(r); got != want {
			t.Errorf("Unit(%q) = %q, want %q", r, got, want)
		}
	}
	for k, want := range map[string]string{"topology.kubernetes.io/zone": "label_topology_kubernetes_io_zone", "beta.kubernetes.io/instanceType": "label_beta_kubernetes_io_instance_type"} {
		if got := LabelName("label", k); got != want {
			t.Errorf("LabelName(%q) = %q, want %q", k, got, want)
		}
	}
}

// fleet is n nodes as reporters report them; one in 100 tainted, one in
// 1000 cordoned.
func fleet(n int) (fakeSource, fakeLive) {
	src := make(fakeSource, n)
	live := fakeLive{}
	now := time.Now()
	for i := range src {
		name := fmt.Sprintf("node-%06d", i)
		var taints []*nodev1.Taint
		if i%100 == 0 {
			taints = append(taints, &nodev1.Taint{Key: "dedicated", Value: "gpu", Effect: nodemodel.NoSchedule})
		}
		nd := testNode(name, "True", taints...)
		nd.Spec.Unschedulable = i%1000 == 0
		src[i] = entry(nd, now)
		live[name] = now.Add(time.Second)
	}
	return src, live
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkScrape100k measures one scrape of a 100,000-node fleet: Gather
// on a registry holding only this collector, and the text encoding of the
// result (what promhttp does for a scraper that does not ask for gzip).
func BenchmarkScrape100k(b *testing.B) { benchScrape(b, 100_000) }

// BenchmarkScrape10k is the same at 10,000 nodes (quicker; for profiles).
func BenchmarkScrape10k(b *testing.B) { benchScrape(b, 10_000) }

func benchScrape(b *testing.B, nodes int) {
	src, live := fleet(nodes)
	c, err := New(Config{Mode: ModeAll}, src, live)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	gz := gzipSize(b, reg, nodes)
	var series, bytesOut int64
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		w := &countWriter{}
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
		series = 0
		for _, mf := range mfs {
			series += int64(len(mf.GetMetric()))
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
		bytesOut = w.n
	}
	// CPU seconds (user+system, the whole process: the GC's work included)
	// say more than wall time on a machine other work shares.
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(series), "series")
	b.ReportMetric(float64(bytesOut), "bytes/scrape")
	b.ReportMetric(float64(gz), "gzip-bytes/scrape")
}

// gzipSize is the size of one scrape gzipped (what Prometheus asks for),
// measured once; it also checks the cardinality: 28 series per node (see
// fleet), plus a taint on every hundredth.
func gzipSize(b *testing.B, reg *prometheus.Registry, nodes int) int64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	zc := &countWriter{}
	zw := gzip.NewWriter(zc)
	enc := expfmt.NewEncoder(zw, expfmt.NewFormat(expfmt.TypeTextPlain))
	series := 0
	for _, mf := range mfs {
		series += len(mf.GetMetric())
		if err := enc.Encode(mf); err != nil {
			b.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	if want := 28*nodes + nodes/100; series != want {
		b.Fatalf("%d series, want %d", series, want)
	}
	return zc.n
}

// TestSentSorted: every family reaches the registry already sorted by its
// label values (what keeps the registry's sort linear at 100,000 nodes),
// with conditions, taints and resources that do not come sorted.
func TestSentSorted(t *testing.T) {
	src, live := fleet(300)
	odd := testNode("node-000150", "False", &nodev1.Taint{Key: "z", Effect: "NoSchedule"}, &nodev1.Taint{Key: "a", Value: "v", Effect: "NoExecute"})
	odd.Status.Conditions = append([]*nodev1.NodeCondition{cond("Zeta", "True")}, odd.Status.Conditions...)
	src[150] = entry(odd, time.Now())
	c, err := New(Config{Mode: ModeAll, NodeLabels: []string{"nodepulse.io/pool", "a"}}, src, live)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan prometheus.Metric, 1<<16)
	c.Collect(ch)
	close(ch)
	byDesc := map[*prometheus.Desc][]*sample{}
	var order []*prometheus.Desc
	for m := range ch {
		s := m.(*sample)
		if len(byDesc[s.desc]) == 0 {
			order = append(order, s.desc)
		}
		byDesc[s.desc] = append(byDesc[s.desc], s)
	}
	if len(order) != 9 {
		t.Fatalf("%d families sent, want 9", len(order))
	}
	for _, d := range order {
		ss := byDesc[d]
		for i := 1; i < len(ss); i++ {
			if compareSamples(ss[i-1], ss[i]) >= 0 {
				t.Errorf("%s: sample %d not after sample %d: %v then %v", d, i, i-1, ss[i-1].labels, ss[i].labels)
				break
			}
		}
	}
}
