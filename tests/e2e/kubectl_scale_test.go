// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/tests/binaries"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
	"github.com/nodepulse/nodepulse/tests/procutil"
)

// TestKubectlGetNodesAtScale measures `kubectl get nodes` (default chunks
// of 500) and the monitor's RSS with the Kubernetes API on, at
// NODEPULSE_KUBEAPI_NODES nodes written straight into an embedded etcd
// (docs/benchmarks.md). Skipped unless the variable is set:
//
//	make build kubectl && NODEPULSE_BIN_DIR=bin NODEPULSE_KUBEAPI_NODES=100000 \
//	  go test ./tests/e2e -run TestKubectlGetNodesAtScale -v -timeout 30m
func TestKubectlGetNodesAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NODEPULSE_KUBEAPI_NODES"))
	if n <= 0 {
		t.Skip("set NODEPULSE_KUBEAPI_NODES to run")
	}
	kubectl := kubectlBin(t)
	bin := binaries.Dir(t)
	c := etcdtest.Start(t)
	st := etcdtest.NewStoreWith(t, c, etcdstore.Config{Prefix: "/nodepulse/"}) // the monitor's default
	ctx := context.Background()
	t0 := time.Now()
	now := nodemodel.Timestamp(time.Now())
	const perTxn = 50 // two ops a node, under etcd's 128 operations a transaction
	for i := 0; i < n; i += perTxn {
		var ops []nodestore.Op
		for j := i; j < min(n, i+perTxn); j++ {
			name := fmt.Sprintf("node-%06d", j)
			ops = append(ops,
				nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name, CreationTimestamp: now,
					Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("z%d", j%3)}}, Spec: &nodev1.NodeSpec{}}),
				nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{
					Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
					Addresses:  []*nodev1.NodeAddress{{Type: "InternalIP", Address: fmt.Sprintf("10.%d.%d.%d", j>>16&255, j>>8&255, j&255)}},
					Capacity:   map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110"},
					NodeInfo:   &nodev1.NodeSystemInfo{ReporterVersion: "v1", OsImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0", OperatingSystem: "linux", Architecture: "amd64"}}))
		}
		if _, err := st.Apply(ctx, nil, ops...); err != nil {
			t.Fatalf("write nodes %d: %v", i, err)
		}
	}
	t.Logf("%d nodes written in %s", n, time.Since(t0).Round(time.Millisecond))

	ports := freePorts(t, 0, 1, 2)
	logDir := t.TempDir()
	mon, err := procutil.Start("monitor", logDir, filepath.Join(bin, "monitor"), "--grpc.insecure", "--collector.insecure",
		fmt.Sprintf("--grpc.listen-address=127.0.0.1:%d", ports), fmt.Sprintf("--admin.listen-address=127.0.0.1:%d", ports+1),
		"--kube-api.insecure", fmt.Sprintf("--kube-api.listen-address=127.0.0.1:%d", ports+2),
		"--etcd.endpoints="+strings.TrimPrefix(c.Endpoints[0], "http://"), "--log.level=warn",
		// The written nodes have no reporters: with the default grace periods the
		// leader would mark all of them Unknown during the measurement and its
		// writes would be timed with the lists.
		"--node-monitor-grace-period=1h", "--node-startup-grace-period=1h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.Stop(30 * time.Second) })
	t1 := time.Now()
	if err := mon.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports+1), 10*time.Minute); err != nil {
		t.Fatalf("monitor ready: %v\n%s", err, procutil.Tail(mon.Log, 40))
	}
	t.Logf("monitor ready in %s", time.Since(t1).Round(time.Millisecond))
	rss := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", mon.Pid()))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		return "?"
	}
	t.Logf("monitor RSS before kubectl: %s", rss())
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: l, cluster: {server: \"http://127.0.0.1:%d\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: l, context: {cluster: l, user: u}}]\ncurrent-context: l\n", ports+2)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1", ports+2)); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	for run := 1; run <= 3; run++ {
		t2 := time.Now()
		out, err := exec.Command(kubectl, "--kubeconfig", kc, "--cache-dir", cacheDir, "get", "nodes", "--no-headers").Output()
		if err != nil {
			t.Fatalf("kubectl get nodes: %v", err)
		}
		lines := strings.Count(string(out), "\n")
		if lines != n {
			t.Fatalf("kubectl printed %d nodes, want %d", lines, n)
		}
		t.Logf("run %d: kubectl get nodes (%d rows, chunks of 500): %s; monitor %s", run, lines, time.Since(t2).Round(time.Millisecond), rss())
	}
	// client-go's typed client: protobuf, pages of 500, each page timed.
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: fmt.Sprintf("http://127.0.0.1:%d", ports+2), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 3; run++ {
		var pages []time.Duration
		total, cont := 0, ""
		t3 := time.Now()
		for {
			tp := time.Now()
			l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
			if err != nil {
				t.Fatalf("protobuf list: %v", err)
			}
			pages = append(pages, time.Since(tp))
			total += len(l.Items)
			if cont = l.Continue; cont == "" {
				break
			}
		}
		if total != n {
			t.Fatalf("protobuf list: %d nodes, want %d", total, n)
		}
		slices.Sort(pages)
		t.Logf("run %d: client-go protobuf list (%d pages of 500): %s; page p50 %s, p99 %s, max %s; monitor %s", run, len(pages), time.Since(t3).Round(time.Millisecond),
			pages[len(pages)/2].Round(time.Microsecond), pages[len(pages)*99/100].Round(time.Microsecond), pages[len(pages)-1].Round(time.Microsecond), rss())
	}
	// A watch of every node while nothing changes: what the monitor spends
	// over 20 s with it open, against 20 s without.
	cpu := func() time.Duration {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", mon.Pid()))
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	idle := func() time.Duration {
		c0 := cpu()
		time.Sleep(20 * time.Second) // a measurement window, not a wait for a condition
		return cpu() - c0
	}
	without := idle()
	wctx, wcancel := context.WithCancel(ctx)
	w, err := cs.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{ResourceVersion: list0RV(t, cs), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	var events atomic.Int64
	go func() {
		for range w.ResultChan() {
			events.Add(1)
		}
	}()
	with := idle()
	wcancel()
	t.Logf("monitor CPU over 20 s, nothing changing: %s without a watch, %s with a watch of all %d nodes open (%d events)", without, with, n, events.Load())
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", mon.Pid()))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			t.Logf("monitor peak RSS: %s", strings.Join(strings.Fields(l), " "))
		}
	}
}

// list0RV is the node list's version now (a one-item page).
func list0RV(t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	l, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}
