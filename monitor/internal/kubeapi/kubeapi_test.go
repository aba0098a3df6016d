// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
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
}

func (f *fakeLive) Node(string) liveness.Node { return liveness.Node{} }
func (f *fakeLive) SendCommand(_ context.Context, name, _ string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, name)
	return "c1", true, nil
}

type follower struct{}

func (follower) Facts(string, map[string]string) api.NodeFacts { return api.NodeFacts{} }
func (follower) Leader(context.Context) string                 { return "" }

type env struct {
	store *memstore.Store
	cache *cache.Cache
	url   string
}

// start serves the API over the real service implementations, a real
// watch cache and the in-memory store, on a real socket.
func start(t *testing.T, token string) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ms := memstore.New(memstore.Config{})
	c := cache.New(ms, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	b := Backends{
		Nodes:     api.New(ms, c, follower{}, &fakeLive{}, zap.NewNop(), nil),
		Pods:      api.NewPodServer(ms, c, nil, admission.DefaultConfig(), zap.NewNop(), nil),
		Workloads: api.NewWorkloadServer(ms, c, zap.NewNop(), nil),
		Budgets:   api.NewBudgetServer(ms, c, zap.NewNop(), nil),
		Policy:    authz.Policy{Plaintext: true, OperatorToken: token},
	}
	pollEvery, bookmarkEvery = 10*time.Millisecond, 50*time.Millisecond
	srv, err := New(b, zap.NewNop(), "127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); cancel(); <-done; _ = ms.Close() })
	for !c.Synced() {
		time.Sleep(time.Millisecond)
	}
	return &env{store: ms, cache: c, url: hs.URL}
}

func (e *env) put(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: nodemodel.Timestamp(time.Now().Add(-time.Hour))},
		Spec: &nodev1.NodeSpec{}}
	st := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.True, LastTransitionTime: nodemodel.Timestamp(time.Now())}},
		NodeInfo: &nodev1.NodeSystemInfo{ReporterVersion: "v9", OsImage: "Debian"}}
	if _, err := e.store.Apply(context.Background(), nil, nodestore.Put(nodestore.Nodes, name, meta), nodestore.Put(nodestore.Statuses, name, st)); err != nil {
		t.Fatal(err)
	}
	e.sync()
}

func (e *env) sync() {
	want := e.store.Revision()
	for e.cache.Revision() < want {
		time.Sleep(time.Millisecond)
	}
}

// client is client-go's typed clientset, which asks for protobuf first.
func (e *env) client(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: e.url, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (e *env) raw(t *testing.T, method, path, accept, ctype, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestReadsInProtobufAndTables(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", map[string]string{"node-role.kubernetes.io/control-plane": ""})
	e.put(t, "b", nil)
	ctx := context.Background()
	cs := e.client(t, "")
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Continue == "" || list.ResourceVersion == "" {
		t.Fatalf("first page: %d items, continue %q, rv %q", len(list.Items), list.Continue, list.ResourceVersion)
	}
	next, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1, Continue: list.Continue})
	if err != nil || len(next.Items) != 1 || next.Items[0].Name != "b" {
		t.Fatalf("second page: %v %v", next, err)
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "foo=bar"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unknown field selector: %v, want 400", err)
	}
	resp, _ := e.raw(t, "GET", "/api/v1/nodes", "application/vnd.kubernetes.protobuf", "", "")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("protobuf list: %d %q", resp.StatusCode, ct)
	}
	_, body := e.raw(t, "GET", "/api/v1/nodes", "application/json;as=Table;v=v1;g=meta.k8s.io", "", "")
	var tb metav1.Table
	if err := json.Unmarshal(body, &tb); err != nil || len(tb.Rows) != 2 {
		t.Fatalf("table: %v %s", err, body)
	}
	if tb.Rows[0].Cells[1] != "Ready" || tb.Rows[0].Cells[2] != "control-plane" || tb.ResourceVersion == "" {
		t.Fatalf("row a: %v (rv %q)", tb.Rows[0].Cells, tb.ResourceVersion)
	}
	if len(tb.ColumnDefinitions) != 10 || tb.ColumnDefinitions[5].Priority != 1 {
		t.Fatalf("columns: %+v", tb.ColumnDefinitions)
	}
}

func TestTaintsKeepTheirOrderThroughEveryPatchType(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx := context.Background()
	nodes := e.client(t, "").CoreV1().Nodes()
	patches := []struct {
		typ  types.PatchType
		body string
	}{
		{types.StrategicMergePatchType, `{"spec":{"taints":[{"key":"first","effect":"NoSchedule"}]}}`},
		// kubectl taint: the new one first, then the old ones.
		{types.StrategicMergePatchType, `{"spec":{"taints":[{"key":"second","value":"v","effect":"NoSchedule"},{"key":"first","effect":"NoSchedule"}]}}`},
		{types.MergePatchType, `{"metadata":{"labels":{"team":"blue"}}}`},
		{types.JSONPatchType, `[{"op":"add","path":"/metadata/annotations","value":{"note":"hi"}}]`},
	}
	for _, p := range patches {
		if _, err := nodes.Patch(ctx, "a", p.typ, []byte(p.body), metav1.PatchOptions{FieldManager: "test"}); err != nil {
			t.Fatalf("%s %s: %v", p.typ, p.body, err)
		}
	}
	apply := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"applied":"yes"}}}`
	if _, err := nodes.Patch(ctx, "a", types.ApplyPatchType, []byte(apply), metav1.PatchOptions{FieldManager: "test-apply"}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	n, err := nodes.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Key != "second" || n.Spec.Taints[1].Key != "first" {
		t.Fatalf("taints %+v, want second then first", n.Spec.Taints)
	}
	if n.Labels["team"] != "blue" || n.Labels["applied"] != "yes" || n.Annotations["note"] != "hi" {
		t.Fatalf("metadata: %v %v", n.Labels, n.Annotations)
	}
	// What an operator may not change is refused with the field, and
	// nothing stored changes.
	_, err = nodes.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"podCIDR":"10.0.0.0/24"},"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Forbidden") {
		t.Fatalf("spec change: %v, want 422 naming spec", err)
	}
	if n2, _ := nodes.Get(ctx, "a", metav1.GetOptions{}); n2.Labels["x"] != "" {
		t.Fatal("a refused patch changed the labels")
	}
	_, err = nodes.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"}}`), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale resourceVersion: %v, want 409", err)
	}
	_, err = nodes.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"spec":{"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a lifecycle taint by hand: %v, want 422", err)
	}
}

func TestStrictFieldValidationAndBodyLimits(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	resp, body := e.raw(t, "PATCH", "/api/v1/nodes/a?fieldValidation=Strict", "application/json", "application/merge-patch+json", `{"spec":{"bogus":1}}`)
	// The generic patch handler's own answer (kube-apiserver's): 422
	// naming the unknown field.
	if resp.StatusCode != 422 || !strings.Contains(string(body), `unknown field \"spec.bogus\"`) {
		t.Fatalf("strict: %d %s", resp.StatusCode, body)
	}
	resp, body = e.raw(t, "PATCH", "/api/v1/nodes/a?fieldValidation=Warn", "application/json", "application/merge-patch+json", `{"spec":{"bogus":1}}`)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Warning"), "unknown field") {
		t.Fatalf("warn: %d %q %s", resp.StatusCode, resp.Header.Get("Warning"), body)
	}
	big := `{"metadata":{"annotations":{"x":"` + strings.Repeat("a", 3<<20) + `"}}}`
	resp, _ = e.raw(t, "PATCH", "/api/v1/nodes/a", "application/json", "application/merge-patch+json", big)
	if resp.StatusCode != 413 {
		t.Fatalf("3 MiB body: %d, want 413", resp.StatusCode)
	}
	resp, _ = e.raw(t, "POST", "/api/v1/namespaces/default/pods", "application/json", "application/json", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}`)
	if resp.StatusCode != 400 {
		t.Fatalf("a Node posted to pods: %d, want 400", resp.StatusCode)
	}
}

func TestPodsCreateDeleteAndEvictionRefusal(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx := context.Background()
	cs := e.client(t, "")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Labels: map[string]string{"app": "other"}}, Spec: corev1.PodSpec{NodeName: "a"}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create (protobuf body): %v", err)
	}
	// A running pod the budget covers, as its node reported it.
	running := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: "p", Namespace: "default", Uid: "u-p", Labels: map[string]string{"app": "web"}, CreationTimestamp: nodemodel.Timestamp(time.Now())},
		Spec: &podv1.PodSpec{NodeName: "a"}, Status: &podv1.PodStatus{Phase: "Running"}}
	if _, err := e.store.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "default/p", running)); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: nil, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	pdb.Spec.MinAvailable = intOrStr(one)
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create budget: %v", err)
	}
	e.sync()
	resp, body := e.raw(t, "POST", "/api/v1/namespaces/default/pods/p/eviction", "application/json", "application/json",
		`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"default"}}`)
	var st metav1.Status
	_ = json.Unmarshal(body, &st)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" || st.Message != "Cannot evict pod as it would violate the pod's disruption budget." {
		t.Fatalf("eviction: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "DisruptionBudget" || !strings.Contains(st.Details.Causes[0].Message, "web-pdb") || st.Details.RetryAfterSeconds != 0 {
		t.Fatalf("eviction details: %+v", st.Details)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete (protobuf DeleteOptions): %v", err)
	}
	e.sync()
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	if _, ok := e.cache.Pod("default", "p"); ok {
		t.Fatal("pod still cached")
	}
}

func TestDeleteNode(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx := context.Background()
	nodes := e.client(t, "").CoreV1().Nodes()
	bad := types.UID("nope")
	if err := nodes.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &bad}}); !apierrors.IsConflict(err) {
		t.Fatalf("uid precondition: %v, want 409", err)
	}
	if err := nodes.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.sync()
	if _, err := nodes.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestAuthorizationAndSelfReviews(t *testing.T) {
	e := start(t, "s3cret")
	e.put(t, "a", nil)
	ctx := context.Background()
	anon, op := e.client(t, ""), e.client(t, "s3cret")
	if _, err := anon.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("anonymous read on a plaintext server: %v", err)
	}
	_, err := anon.CoreV1().Nodes().Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:anonymous" cannot patch resource "nodes"`) {
		t.Fatalf("anonymous patch: %v, want 403 naming the user", err)
	}
	if _, err := op.CoreV1().Nodes().Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("operator patch: %v", err)
	}
	can := func(cs *kubernetes.Clientset, verb string) bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	if !can(anon, "list") || can(anon, "delete") || !can(op, "delete") {
		t.Fatal("can-i answers differ from the policy")
	}
	who, err := op.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != authz.TokenOperator {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	rules, err := anon.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil || len(rules.Status.ResourceRules) != 3 || strings.Join(rules.Status.ResourceRules[2].Verbs, ",") != "get,list,watch" {
		t.Fatalf("rules: %+v %v", rules, err)
	}
}

func TestWatchStreamingListAndChanges(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	yes := true
	w, err := e.client(t, "").CoreV1().Nodes().Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() watch.Event {
		select {
		case ev := <-w.ResultChan():
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return watch.Event{}
	}
	if ev := next(); ev.Type != watch.Added || ev.Object.(*corev1.Node).Name != "a" {
		t.Fatalf("first event %v", ev.Type)
	}
	if ev := next(); ev.Type != watch.Bookmark || ev.Object.(*corev1.Node).Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("second event %v, want the initial-events-end bookmark", ev.Type)
	}
	e.put(t, "b", nil)
	for {
		ev := next()
		if ev.Type == watch.Bookmark {
			continue
		}
		if ev.Type != watch.Added || ev.Object.(*corev1.Node).Name != "b" {
			t.Fatalf("change: %v", ev.Type)
		}
		return
	}
}

func intOrStr(v int32) *intstr.IntOrString { x := intstr.FromInt32(v); return &x }

func TestOwnersCreateScaleDelete(t *testing.T) {
	e := start(t, "")
	ctx := context.Background()
	rsc := e.client(t, "").AppsV1().ReplicaSets("default")
	two := int32(2)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.ReplicaSetSpec{Replicas: &two,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}}}
	if _, err := rsc.Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := rsc.Create(ctx, rs, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create again: %v, want 409 AlreadyExists", err)
	}
	e.sync()
	sc, err := rsc.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 2 || sc.Status.Selector != "app=web" {
		t.Fatalf("scale: %+v %v", sc, err)
	}
	sc.Spec.Replicas = 5
	if _, err := rsc.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	e.sync()
	if got, err := rsc.Get(ctx, "web", metav1.GetOptions{}); err != nil || *got.Spec.Replicas != 5 {
		t.Fatalf("after scale: %v %v", got, err)
	}
	if _, err := rsc.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("scale from a stale version: %v, want 409", err)
	}
	if err := rsc.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e.sync()
	if _, err := rsc.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestCreateNode(t *testing.T) {
	e := start(t, "")
	ctx := context.Background()
	nodes := e.client(t, "").CoreV1().Nodes()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ahead", Labels: map[string]string{"rack": "r1"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "new", Effect: corev1.TaintEffectNoSchedule}}}}
	got, err := nodes.Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got.UID == "" || got.CreationTimestamp.IsZero() || got.Labels["rack"] != "r1" || len(got.Spec.Taints) == 0 || got.Spec.Taints[0].Key != "new" {
		t.Fatalf("created: %+v", got)
	}
	if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("again: %v, want 409 AlreadyExists", err)
	}
	bad := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}
	if _, err := nodes.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("bad name: %v, want 422", err)
	}
}

// TestPodStatusWrites: pods/status takes PUT and patches of the status
// alone (spec and metadata stay as stored), refuses a stale
// resourceVersion with 409, and the READY column counts what was written.
func TestPodStatusWrites(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx := context.Background()
	cs := e.client(t, "")
	pods := cs.CoreV1().Pods("default")
	created, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "c1", Image: "i"}, {Name: "c2", Image: "i"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.sync()
	p := created.DeepCopy()
	p.Labels = map[string]string{"app": "changed"}
	p.Spec.NodeName = "elsewhere"
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c1", Ready: true}, {Name: "c2", Ready: false}}}
	got, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status (protobuf body): %v", err)
	}
	if got.Status.Phase != corev1.PodRunning || len(got.Status.ContainerStatuses) != 2 || got.Labels["app"] != "web" || got.Spec.NodeName != "a" {
		t.Fatalf("after update: phase %q, %d container statuses, labels %v, node %q: want the status written and spec and metadata as stored",
			got.Status.Phase, len(got.Status.ContainerStatuses), got.Labels, got.Spec.NodeName)
	}
	e.sync()
	// The stale version of the first write is a conflict, not a silent
	// overwrite.
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v, want 409 Conflict", err)
	}
	running := `{"running":{"startedAt":"2026-12-07T10:00:00Z"}}`
	patch := `{"status":{"containerStatuses":[{"name":"c1","ready":true,"state":` + running + `},{"name":"c2","ready":true,"state":` + running + `}]}}`
	if _, err := pods.Patch(ctx, "w", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("strategic merge patch of status: %v", err)
	}
	e.sync()
	resp, body := e.raw(t, "GET", "/api/v1/namespaces/default/pods/w", "application/json;as=Table;v=v1;g=meta.k8s.io", "", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"2/2"`) {
		t.Fatalf("table after the patch: %d %s, want READY 2/2", resp.StatusCode, body)
	}
	if cur, ok := e.cache.Pod("default", "w"); !ok || cur.Pod.GetStatus().GetPhase() != "Running" {
		t.Fatalf("stored pod after the patch: %v %v, want phase Running kept", cur, ok)
	}
}

// TestPodLabelsAndAnnotations: a pod's labels and annotations change
// through PUT and every patch type (kubectl label, annotate, edit); a
// changed spec is 422 naming spec and a stale resourceVersion 409, and
// neither changes what is stored.
func TestPodLabelsAndAnnotations(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx := context.Background()
	pods := e.client(t, "").CoreV1().Pods("default")
	created, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.sync()
	for _, c := range []struct {
		typ   types.PatchType
		patch string
	}{
		{types.MergePatchType, `{"metadata":{"labels":{"tier":"front"}}}`},
		{types.StrategicMergePatchType, `{"metadata":{"annotations":{"note":"hello"}}}`},
		{types.JSONPatchType, `[{"op":"add","path":"/metadata/labels/rack","value":"r1"}]`},
	} {
		if _, err := pods.Patch(ctx, "l", c.typ, []byte(c.patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s patch: %v", c.typ, err)
		}
		e.sync()
	}
	got, err := pods.Get(ctx, "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["app"] != "web" || got.Labels["tier"] != "front" || got.Labels["rack"] != "r1" || got.Annotations["note"] != "hello" {
		t.Fatalf("after the patches: labels %v annotations %v", got.Labels, got.Annotations)
	}
	if l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "tier=front"}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list by the new label: %v %v", l, err)
	}
	moved := got.DeepCopy()
	moved.Spec.NodeName = "b"
	if _, err := pods.Update(ctx, moved, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec") {
		t.Fatalf("a PUT that moves the pod: %v, want 422 naming spec", err)
	}
	stale := created.DeepCopy()
	stale.Labels = map[string]string{"app": "stale"}
	if _, err := pods.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("a PUT with the first resourceVersion: %v, want 409", err)
	}
	bad := got.DeepCopy()
	bad.Labels["bad key!"] = "x"
	if _, err := pods.Update(ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.labels") {
		t.Fatalf("a bad label: %v, want 422 naming metadata.labels", err)
	}
	e.sync()
	after, err := pods.Get(ctx, "l", metav1.GetOptions{})
	if err != nil || after.ResourceVersion != got.ResourceVersion || after.Spec.NodeName != "a" || after.Labels["app"] != "web" {
		t.Fatalf("refused writes changed the pod: %+v %v", after, err)
	}
}

// TestServerSideApplyConflicts: managedFields are kept, so an apply by one
// field manager of a label another manager applied is 409 Conflict naming
// that manager, --force-conflicts takes it over, and both are served.
func TestServerSideApplyConflicts(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil)
	ctx := context.Background()
	nodes := e.client(t, "").CoreV1().Nodes()
	apply := func(manager, team string, force bool) error {
		body := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"team":"` + team + `"}}}`
		_, err := nodes.Patch(ctx, "a", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: manager, Force: &force})
		e.sync()
		return err
	}
	if err := apply("alice", "blue", false); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	err := apply("bob", "red", false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "alice"`) || !strings.Contains(err.Error(), ".metadata.labels.team") {
		t.Fatalf("bob applies alice's label: %v, want 409 naming alice and the field", err)
	}
	if n, _ := nodes.Get(ctx, "a", metav1.GetOptions{}); n.Labels["team"] != "blue" {
		t.Fatalf("the refused apply changed the label: %v", n.Labels)
	}
	if err := apply("bob", "red", true); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	n, err := nodes.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || n.Labels["team"] != "red" {
		t.Fatalf("after the forced apply: %v %v", n, err)
	}
	managers := map[string]string{}
	for _, m := range n.ManagedFields {
		if m.FieldsV1 != nil {
			managers[m.Manager] = m.FieldsV1.GetRawString()
		}
	}
	if !strings.Contains(managers["bob"], `"f:team"`) || strings.Contains(managers["alice"], `"f:team"`) {
		t.Fatalf("managedFields after the forced apply: %v, want bob owning the label and alice not", managers)
	}
	// An Update by a third manager (kubectl label) is recorded too.
	if _, err := nodes.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"rack":"r1"}}}`), metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	e.sync()
	if err := apply("alice", "blue", false); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "bob"`) {
		t.Fatalf("alice applies bob's label back: %v, want 409 naming bob", err)
	}

	// kubectl apply --server-side of objects that do not exist creates
	// them, owned by the applier; the pod's labels then conflict as the
	// node's do.
	force := false
	created, err := nodes.Patch(ctx, "spare", types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"spare","labels":{"team":"blue"}}}`),
		metav1.PatchOptions{FieldManager: "alice", Force: &force})
	if err != nil || created.UID == "" || len(created.ManagedFields) != 1 || created.ManagedFields[0].Manager != "alice" {
		t.Fatalf("apply of a new node: %+v %v, want it created and owned by alice", created, err)
	}
	pods := e.client(t, "").CoreV1().Pods("default")
	podBody := func(app string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ap","labels":{"app":"` + app + `"}},"spec":{"nodeName":"a","containers":[{"name":"c","image":"i"}]}}`)
	}
	if _, err := pods.Patch(ctx, "ap", types.ApplyPatchType, podBody("web"), metav1.PatchOptions{FieldManager: "alice", Force: &force}); err != nil {
		t.Fatalf("apply of a new pod: %v", err)
	}
	e.sync()
	if _, err := pods.Patch(ctx, "ap", types.ApplyPatchType, podBody("db"), metav1.PatchOptions{FieldManager: "bob", Force: &force}); !apierrors.IsConflict(err) {
		t.Fatalf("bob applies alice's pod label: %v, want 409", err)
	}
}
