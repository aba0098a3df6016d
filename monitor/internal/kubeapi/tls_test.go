// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// TestMTLSIdentities: with TLS, a certificate is a Kubernetes user (CN,
// groups from O) judged by the same policy as the gRPC door: an operator
// patches, a node reads, writes the status of its own pods and is refused
// every other change (NodeRestriction), a client without a certificate is
// 401.
func TestMTLSIdentities(t *testing.T) {
	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Nodes: []string{"a"}, Operators: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	e := start(t, "")
	e.put(t, "a", nil)
	for _, pod := range []struct{ name, node string }{{"on-a", "a"}, {"on-b", "b"}} {
		p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: pod.name, Namespace: "default", Uid: "u-" + pod.name, CreationTimestamp: nodemodel.Timestamp(time.Now())},
			Spec: &podv1.PodSpec{NodeName: pod.node}, Status: &podv1.PodStatus{Phase: "Pending"}}
		if _, err := e.store.Apply(context.Background(), nil, nodestore.Put(nodestore.Pods, "default/"+pod.name, p)); err != nil {
			t.Fatal(err)
		}
	}
	e.sync()
	srvTLS, err := tlsconfig.Config{CertFile: p("server.crt"), KeyFile: p("server.key"), CAFile: p("ca.crt")}.Server()
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Backends{
		Nodes: api.New(e.store, e.cache, follower{}, &fakeLive{}, zap.NewNop(), nil), Pods: api.NewPodServer(e.store, e.cache, nil, admission.DefaultConfig(), zap.NewNop(), nil),
		Workloads: api.NewWorkloadServer(e.store, e.cache, zap.NewNop(), nil), Budgets: api.NewBudgetServer(e.store, e.cache, zap.NewNop(), nil),
		Policy: authz.Policy{},
	}, zap.NewNop(), "127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln, srvTLS) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + ln.Addr().String()

	client := func(name string) *http.Client {
		c := tlsconfig.Config{CAFile: p("ca.crt"), ServerName: "localhost"}
		if name != "" {
			c.CertFile, c.KeyFile = p(name+".crt"), p(name+".key")
		}
		tc, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	}
	do := func(c *http.Client, method, path, body string) (int, string, error) {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/merge-patch+json")
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	node, op := client("node-a"), client("operator-alice")
	labels, running := `{"metadata":{"labels":{"by":"alice"}}}`, `{"status":{"phase":"Running"}}`
	for _, c := range []struct {
		who                string
		c                  *http.Client
		method, path, body string
		want               int
		says               string
	}{
		{"node", node, "GET", "/api/v1/nodes/a", "", 200, ""},
		{"node", node, "PATCH", "/api/v1/nodes/a", labels, 403, "nodes change only the status of their pods"},
		{"operator", op, "PATCH", "/api/v1/nodes/a", labels, 200, ""},
		{"node", node, "PATCH", "/api/v1/namespaces/default/pods/on-a/status", running, 200, `"phase":"Running"`},
		{"node", node, "PATCH", "/api/v1/namespaces/default/pods/on-b/status", running, 403,
			`node \"a\" can only update pod status for pods with spec.nodeName set to itself`},
		{"node", node, "DELETE", "/api/v1/namespaces/default/pods/on-a", "", 403, "nodes change only the status of their pods"},
		{"operator", op, "PATCH", "/api/v1/namespaces/default/pods/on-b/status", running, 200, `"phase":"Running"`},
		// kubectl auth can-i --list, as the node: the same rules.
		{"node", node, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
			`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"default"}}`, 201,
			`{"verbs":["update","patch"],"apiGroups":[""],"resources":["pods/status"]}`},
	} {
		code, body, err := do(c.c, c.method, c.path, c.body)
		if err != nil || code != c.want || !strings.Contains(body, c.says) {
			t.Fatalf("%s %s %s: %d %v %s, want %d saying %s", c.who, c.method, c.path, code, err, body, c.want, c.says)
		}
	}
	// The server asks for a certificate but does not require one at the
	// handshake (health probes): without one the API answers 401.
	if code, _, err := do(client(""), "GET", "/api/v1/nodes", ""); err == nil && code != 401 {
		t.Fatalf("a client without a certificate: %d, want 401 or a refused handshake", code)
	}
}
