// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// BenchmarkListPage times one page of 500 nodes out of
// NODEPULSE_KUBEAPI_BENCH_NODES (default 10,000) through the whole server
// (HTTP, the generic handlers, the storage, the encoder), as kubectl asks
// for it (a Table in JSON) and as client-go's typed client does
// (protobuf). The page is from the middle of the fleet.
func BenchmarkListPage(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("NODEPULSE_KUBEAPI_BENCH_NODES")); err == nil && v > 0 {
		n = v
	}
	t := &testing.T{}
	e := start(t, "")
	now := nodemodel.Timestamp(time.Now())
	for i := 0; i < n; i += 50 {
		var ops []nodestore.Op
		for j := i; j < min(n, i+50); j++ {
			name := fmt.Sprintf("node-%06d", j)
			ops = append(ops, nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: name, CreationTimestamp: now,
				Labels: map[string]string{"kubernetes.io/hostname": name}}, Spec: &nodev1.NodeSpec{}}),
				nodestore.Put(nodestore.Statuses, name, &nodev1.NodeStatus{
					Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
					Addresses:  []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}},
					Capacity:   map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110"},
					NodeInfo:   &nodev1.NodeSystemInfo{ReporterVersion: "v1", OsImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0"}}))
		}
		if _, err := e.store.Apply(context.Background(), nil, ops...); err != nil {
			b.Fatal(err)
		}
	}
	e.sync()
	if kc := os.Getenv("NODEPULSE_KUBECTL"); kc != "" {
		cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: l, cluster: {server: %q}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: l, context: {cluster: l, user: u}}]\ncurrent-context: l\n", e.url)
		f := b.TempDir() + "/kc"
		_ = os.WriteFile(f, []byte(cfg), 0o600)
		for _, args := range [][]string{{"get", "nodes", "--no-headers"}, {"get", "nodes", "-o", "name"}, {"get", "nodes", "--no-headers", "-v=6"}} {
			t0 := time.Now()
			out, err := exec.Command(kc, append([]string{"--kubeconfig", f, "--cache-dir", b.TempDir()}, args...)...).CombinedOutput()
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("kubectl %v: %s, %d bytes", args, time.Since(t0), len(out))
			if args[len(args)-1] == "-v=6" {
				_ = os.WriteFile("/tmp/kubectl-v6.log", out, 0o600)
			}
		}
	}
	cont := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("node-%06d", n/2)))
	for _, c := range []struct{ name, accept string }{
		{"table-json", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
		{"protobuf", "application/vnd.kubernetes.protobuf,application/json"},
		{"json", "application/json"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("GET", e.url+"/api/v1/nodes?limit=500&continue="+cont, nil)
				req.Header.Set("Accept", c.accept)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				nb, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				b.SetBytes(nb)
			}
		})
	}
}
