// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

type fakeLive struct {
	mu   sync.Mutex
	sent []string
	// renewed: live renewals by node, never stored.
	renewed map[string]time.Time
}

func (f *fakeLive) Node(name string) liveness.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return liveness.Node{RenewTime: f.renewed[name], ObservedAt: f.renewed[name]}
}

func (f *fakeLive) renew(name string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewed == nil {
		f.renewed = map[string]time.Time{}
	}
	f.renewed[name] = at
}
func (f *fakeLive) SendCommand(_ context.Context, name, _ string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, name)
	return "c1", true, nil
}

func (f *fakeLive) requested() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

type follower struct{}

func (follower) Facts(string, map[string]string) api.NodeFacts { return api.NodeFacts{} }
func (follower) Leader(context.Context) string                 { return "" }

type env struct {
	store *memstore.Store
	cache *cache.Cache
	live  *fakeLive
	url   string
}

// start serves the API over the real gRPC service implementations, a real
// watch cache and the in-memory store.
func start(t *testing.T, token string) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ms := memstore.New(memstore.Config{})
	c := cache.New(ms, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	live := &fakeLive{}
	b := Backends{
		Nodes:     api.New(ms, c, follower{}, live, zap.NewNop(), nil),
		Pods:      api.NewPodServer(ms, c, nil, admission.DefaultConfig(), zap.NewNop(), nil),
		Workloads: api.NewWorkloadServer(ms, c, zap.NewNop(), nil),
		Budgets:   api.NewBudgetServer(ms, c, zap.NewNop(), nil),
		Auth:      api.Authorizer{Plaintext: true, OperatorToken: token, Log: zap.NewNop()},
	}
	srv := New(b, zap.NewNop(), "127.0.0.1")
	// Lease and event watches compare snapshots; the tests do not wait a
	// second for each.
	srv.pollEvery, srv.bookmarkEvery = 10*time.Millisecond, 50*time.Millisecond
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); cancel(); <-done; _ = ms.Close() })
	for !c.Synced() {
		time.Sleep(time.Millisecond)
	}
	return &env{store: ms, cache: c, live: live, url: hs.URL}
}

func (e *env) put(t *testing.T, name string, labels map[string]string, ready string) {
	t.Helper()
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: nodemodel.Timestamp(time.Now().Add(-time.Hour))},
		Spec: &nodev1.NodeSpec{}}
	st := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: ready, LastTransitionTime: nodemodel.Timestamp(time.Now())}},
		NodeInfo: &nodev1.NodeSystemInfo{ReporterVersion: "v9", OsImage: "Debian"}}
	if _, err := e.store.Apply(context.Background(), nil, nodestore.Put(nodestore.Nodes, name, meta), nodestore.Put(nodestore.Statuses, name, st)); err != nil {
		t.Fatal(err)
	}
	want := e.store.Revision()
	for e.cache.Revision() < want {
		time.Sleep(time.Millisecond)
	}
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

func (e *env) do(t *testing.T, method, path, accept, ctype, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, b)
	}
	return v
}

func TestNodeTableAndList(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", map[string]string{"node-role.kubernetes.io/worker": "", "zone": "x"}, "True")
	e.put(t, "b", nil, "Unknown")
	e.put(t, "c", map[string]string{"zone": "y"}, "True")

	code, b := e.do(t, "GET", "/api/v1/nodes?limit=500", tableAccept, "", "")
	if code != 200 {
		t.Fatalf("list: %d %s", code, b)
	}
	tb := decode[metav1.Table](t, b)
	if tb.Kind != "Table" || tb.ResourceVersion == "" || len(tb.Rows) != 3 {
		t.Fatalf("table: kind %q rv %q rows %d", tb.Kind, tb.ResourceVersion, len(tb.Rows))
	}
	var cols []string
	for _, c := range tb.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		}
	}
	if got := strings.Join(cols, " "); got != "Name Status Roles Age Version" {
		t.Fatalf("columns %q", got)
	}
	if got := fmt.Sprint(tb.Rows[0].Cells[:3], " ", tb.Rows[1].Cells[1], " ", tb.Rows[0].Cells[4]); got != "[a Ready worker] NotReady v9" {
		t.Fatalf("cells %s", got)
	}

	// Paging: limit 2 then continue.
	code, b = e.do(t, "GET", "/api/v1/nodes?limit=2", "application/json", "", "")
	l := decode[corev1.NodeList](t, b)
	if code != 200 || len(l.Items) != 2 || l.Continue == "" || l.Kind != "NodeList" {
		t.Fatalf("page 1: %d items %d continue %q kind %q", code, len(l.Items), l.Continue, l.Kind)
	}
	_, b = e.do(t, "GET", "/api/v1/nodes?limit=2&continue="+l.Continue, "application/json", "", "")
	l2 := decode[corev1.NodeList](t, b)
	if len(l2.Items) != 1 || l2.Items[0].Name != "c" || l2.Continue != "" {
		t.Fatalf("page 2: %+v", l2.ListMeta)
	}

	// Selectors.
	_, b = e.do(t, "GET", "/api/v1/nodes?labelSelector=zone+in+(x,z)", "application/json", "", "")
	if l := decode[corev1.NodeList](t, b); len(l.Items) != 1 || l.Items[0].Name != "a" {
		t.Fatalf("label selector: %d items", len(l.Items))
	}
	_, b = e.do(t, "GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dc", "application/json", "", "")
	if l := decode[corev1.NodeList](t, b); len(l.Items) != 1 || l.Items[0].Name != "c" {
		t.Fatalf("field selector: %d items", len(l.Items))
	}
	code, b = e.do(t, "GET", "/api/v1/nodes?fieldSelector=foo%3Dbar", "application/json", "", "")
	if st := decode[metav1.Status](t, b); code != 400 || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, `"foo" is not a known field selector`) {
		t.Fatalf("bad field selector: %d %s", code, b)
	}
	code, b = e.do(t, "GET", "/api/v1/nodes/nope", "application/json", "", "")
	if st := decode[metav1.Status](t, b); code != 404 || st.Reason != metav1.StatusReasonNotFound || st.Message != `nodes "nope" not found` {
		t.Fatalf("not found: %d %s", code, b)
	}
	// Protobuf first, JSON allowed: JSON. Protobuf only: 406.
	if code, _ := e.do(t, "GET", "/api/v1/nodes/a", "application/vnd.kubernetes.protobuf,application/json", "", ""); code != 200 {
		t.Fatalf("protobuf with JSON fallback: %d", code)
	}
	if code, _ := e.do(t, "GET", "/api/v1/nodes/a", "application/vnd.kubernetes.protobuf", "", ""); code != 406 {
		t.Fatalf("protobuf only: %d", code)
	}
}

func TestNodePatchesAreServiceWrites(t *testing.T) {
	e := start(t, "s3cret")
	e.put(t, "a", nil, "True")
	auth := []string{"Authorization", "Bearer s3cret"}

	// Without the operator token a change is forbidden, as on gRPC.
	code, b := e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/strategic-merge-patch+json", `{"spec":{"unschedulable":true}}`)
	if code != 403 {
		t.Fatalf("unauthenticated patch: %d %s", code, b)
	}
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/strategic-merge-patch+json", `{"spec":{"unschedulable":true}}`, auth...)
	if n := decode[corev1.Node](t, b); code != 200 || !n.Spec.Unschedulable {
		t.Fatalf("cordon: %d %s", code, b)
	}
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/strategic-merge-patch+json",
		`{"spec":{"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]}}`, auth...)
	if code != 200 {
		t.Fatalf("taint: %d %s", code, b)
	}
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/merge-patch+json",
		`{"metadata":{"labels":{"team":"a"},"annotations":{"note":"x","kubelet.kubernetes.io/force-status-update":"1"}}}`, auth...)
	if code != 200 {
		t.Fatalf("label: %d %s", code, b)
	}
	// The writes are in the store's node record, as a gRPC cordon, taint
	// and metadata change would leave them.
	o, err := e.store.Get(context.Background(), nodestore.Nodes, "a")
	if err != nil {
		t.Fatal(err)
	}
	n := o.Value.(*nodev1.Node)
	if !n.GetSpec().GetUnschedulable() || len(n.GetSpec().GetTaints()) != 1 || n.GetMetadata().GetLabels()["team"] != "a" || n.GetMetadata().GetAnnotations()["note"] != "x" {
		t.Fatalf("stored node: %v", n)
	}
	if got := e.live.requested(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("force-status-update: status requests %v", got)
	}
	// Status belongs to the reporter: refused.
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/merge-patch+json", `{"status":{"nodeInfo":{"osImage":"x"}}}`, auth...)
	if code != 422 {
		t.Fatalf("status patch: %d %s", code, b)
	}
	// A stale resourceVersion in the patch conflicts.
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/merge-patch+json", `{"metadata":{"resourceVersion":"1","labels":{"x":"y"}}}`, auth...)
	if code != 409 {
		t.Fatalf("stale patch: %d %s", code, b)
	}
	// A controller-managed taint cannot be set by hand (the gRPC rule).
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/strategic-merge-patch+json",
		`{"spec":{"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}`, auth...)
	if code != 422 {
		t.Fatalf("controller taint: %d %s", code, b)
	}
}

func TestWatchNodes(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil, "True")
	_, b := e.do(t, "GET", "/api/v1/nodes", "application/json", "", "")
	rv := decode[corev1.NodeList](t, b).ResourceVersion

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := func(q string) *bufio.Scanner {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/v1/nodes?watch=true&"+q, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return bufio.NewScanner(resp.Body)
	}
	type ev struct {
		Type   string
		Object corev1.Node
	}
	next := func(sc *bufio.Scanner) ev {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("watch ended: %v", sc.Err())
		}
		return decode[ev](t, sc.Bytes())
	}
	resumed := events("resourceVersion=" + rv)
	initial := events("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	if got := next(initial); got.Type != "ADDED" || got.Object.Name != "a" {
		t.Fatalf("initial event %+v", got)
	}
	if got := next(initial); got.Type != "BOOKMARK" || got.Object.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("initial-events-end bookmark %+v", got)
	}
	e.put(t, "b", nil, "False")
	for _, sc := range []*bufio.Scanner{resumed, initial} {
		if got := next(sc); got.Type != "ADDED" || got.Object.Name != "b" || got.Object.ResourceVersion == "" {
			t.Fatalf("event after the list: %+v", got)
		}
	}
	code, b := e.do(t, "GET", "/api/v1/nodes?watch=1&sendInitialEvents=true", "application/json", "", "")
	if code != 422 {
		t.Fatalf("sendInitialEvents without resourceVersionMatch: %d %s", code, b)
	}
}

// TestNodePatchAllOrNothing: a patch one part of which is refused changes
// nothing (it is one compare-and-swap, every part checked first), and one
// that is accepted is one write however many parts it has.
func TestNodePatchAllOrNothing(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil, "True")
	stored := func() (*nodev1.Node, int64) {
		o, err := e.store.Get(context.Background(), nodestore.Nodes, "a")
		if err != nil {
			t.Fatal(err)
		}
		return o.Value.(*nodev1.Node), o.ModRevision
	}
	_, rev0 := stored()
	for _, bad := range []struct{ ctype, body string }{
		// Cordon and label with a controller-managed taint.
		{"application/strategic-merge-patch+json", `{"metadata":{"labels":{"team":"a"}},"spec":{"unschedulable":true,"taints":[{"key":"k","effect":"NoSchedule"},{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}`},
		// Cordon and taint with an invalid label.
		{"application/merge-patch+json", `{"metadata":{"labels":{"bad key!":"x"}},"spec":{"unschedulable":true,"taints":[{"key":"k","effect":"NoSchedule"}]}}`},
		// Cordon with a taint of an unknown effect.
		{"application/json-patch+json", `[{"op":"add","path":"/spec/unschedulable","value":true},{"op":"add","path":"/spec/taints","value":[{"key":"k","effect":"Sometimes"}]}]`},
	} {
		code, b := e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", bad.ctype, bad.body)
		if code != 422 {
			t.Fatalf("patch %s: %d %s", bad.body, code, b)
		}
		if n, rev := stored(); rev != rev0 || n.GetSpec().GetUnschedulable() || len(n.GetSpec().GetTaints()) != 0 || len(n.GetMetadata().GetLabels()) != 0 {
			t.Fatalf("refused patch %s changed the node (revision %d → %d): %v", bad.body, rev0, rev, n)
		}
	}
	code, b := e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/strategic-merge-patch+json",
		`{"metadata":{"labels":{"team":"a"},"annotations":{"note":"x"}},"spec":{"unschedulable":true,"taints":[{"key":"k","value":"v","effect":"NoExecute"}]}}`)
	if code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	n, rev := stored()
	if !n.GetSpec().GetUnschedulable() || len(n.GetSpec().GetTaints()) != 1 || n.GetSpec().GetTaints()[0].GetTimeAdded() == nil ||
		n.GetMetadata().GetLabels()["team"] != "a" || n.GetMetadata().GetAnnotations()["note"] != "x" {
		t.Fatalf("stored node: %v", n)
	}
	if rev != e.store.Revision() || rev != rev0+1 {
		t.Fatalf("the patch took %d writes (revision %d → %d)", rev-rev0, rev0, rev)
	}
	// Uncordon and remove the taint together.
	code, b = e.do(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/merge-patch+json", `{"spec":{"unschedulable":null,"taints":null}}`)
	if n, _ := stored(); code != 200 || n.GetSpec().GetUnschedulable() || len(n.GetSpec().GetTaints()) != 0 {
		t.Fatalf("uncordon and untaint: %d %s; stored %v", code, b, n)
	}
}
