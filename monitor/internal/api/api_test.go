// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/zones"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/services/grpcserver"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

type fakeLive struct {
	mu   sync.Mutex
	sent []string
}

func (f *fakeLive) Node(string) liveness.Node { return liveness.Node{} }
func (f *fakeLive) AllStale() bool            { return false }
func (f *fakeLive) SendCommand(_ context.Context, name, _ string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "detached" {
		return "", false, liveness.ErrNotAttached
	}
	f.sent = append(f.sent, name)
	return "c1", true, nil
}

// followerView is the lifecycle controller of a replica that does not lead.
type followerView struct{}

func (followerView) Facts(string, map[string]string) NodeFacts { return NodeFacts{} }
func (followerView) Leader(context.Context) string             { return "" }

type env struct {
	store *memstore.Store
	cache *cache.Cache
	addr  string
	live  *fakeLive
}

type opts struct {
	tls   tlsconfig.Config
	token string
	hist  int
}

func start(t *testing.T, o opts) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ms := memstore.New(memstore.Config{})
	c := cache.New(ms, cache.Config{ProgressInterval: time.Second, History: o.hist}, zap.NewNop())
	go func() { _ = c.Run(ctx) }()
	live := &fakeLive{}
	gc := grpcserver.Config{ListenAddress: "127.0.0.1:0", TLS: o.tls, MaxRecvMsgSize: 1 << 20, MaxConcurrentStreams: 100,
		KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, MinClientPingInterval: time.Second, DrainTimeout: time.Second}
	gc.TLS.Insecure = o.tls.CertFile == ""
	auth := authz.GRPC{Policy: authz.Policy{Plaintext: gc.TLS.Insecure, OperatorToken: o.token}, Log: zap.NewNop()}
	srv, err := grpcserver.New(gc, zap.NewNop(), nil, grpcserver.Options{Unary: []grpc.UnaryServerInterceptor{auth.Unary()}, Stream: []grpc.StreamServerInterceptor{auth.Stream()}})
	if err != nil {
		t.Fatal(err)
	}
	nodev1.RegisterNodeServiceServer(srv.Server, New(ms, c, followerView{}, live, zap.NewNop(), nil))
	podv1.RegisterPodServiceServer(srv.Server, NewPodServer(ms, c, nil, admission.DefaultConfig(), zap.NewNop(), nil))
	appsv1.RegisterWorkloadServiceServer(srv.Server, NewWorkloadServer(ms, c, zap.NewNop(), nil))
	policyv1.RegisterDisruptionBudgetServiceServer(srv.Server, NewBudgetServer(ms, c, zap.NewNop(), nil))
	done := make(chan struct{})
	go func() { _ = srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = ms.Close() })
	for !c.Synced() {
		time.Sleep(time.Millisecond)
	}
	return &env{store: ms, cache: c, addr: srv.Addr().String(), live: live}
}

func (e *env) client(t *testing.T, creds credentials.TransportCredentials) nodev1.NodeServiceClient {
	return nodev1.NewNodeServiceClient(e.dial(t, creds))
}

// dial connects to the env's server, plaintext unless creds are given.
func (e *env) dial(t *testing.T, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func (e *env) put(t *testing.T, name string, labels map[string]string, ready string, unschedulable bool) {
	t.Helper()
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: nodemodel.Timestamp(time.Now())},
		Spec: &nodev1.NodeSpec{Unschedulable: unschedulable}}
	st := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: ready, LastTransitionTime: nodemodel.Timestamp(time.Now())}}}
	if _, err := e.store.Apply(context.Background(), nil, nodestore.Put(nodestore.Nodes, name, meta), nodestore.Put(nodestore.Statuses, name, st)); err != nil {
		t.Fatal(err)
	}
}

// waitCache polls until the cache reflects the store (no sleeps as sync).
func (e *env) waitCache(t *testing.T) {
	t.Helper()
	want := e.store.Revision()
	deadline := time.Now().Add(10 * time.Second)
	for e.cache.Revision() < want {
		if time.Now().After(deadline) {
			t.Fatalf("cache stuck at %d, store at %d", e.cache.Revision(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func wantCode(t *testing.T, err error, code codes.Code, field string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("code %v (%v), want %v", st.Code(), err, code)
	}
	if field != "" && !strings.HasPrefix(st.Message(), field+":") {
		t.Fatalf("message %q does not start with the field %q", st.Message(), field)
	}
}

func names(ns []*nodev1.Node) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.GetMetadata().GetName())
	}
	return strings.Join(out, ",")
}

func TestGetAndList(t *testing.T) {
	e := start(t, opts{})
	ctx := context.Background()
	e.put(t, "a", map[string]string{"zone": "x", "gpu": "1"}, nodemodel.True, false)
	e.put(t, "b", map[string]string{"zone": "y"}, nodemodel.Unknown, true)
	e.put(t, "c", map[string]string{"zone": "z", "spot": "true"}, nodemodel.False, false)
	e.waitCache(t)
	cl := e.client(t, nil)

	if r, err := cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: "a"}); err != nil || r.GetNode().GetMetadata().GetName() != "a" {
		t.Fatalf("GetNode: %v %v", r, err)
	}
	_, err := cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: "missing"})
	wantCode(t, err, codes.NotFound, "")
	_, err = cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: "Bad_Name"})
	wantCode(t, err, codes.InvalidArgument, "name")

	for _, tc := range []struct{ sel, cond, want string }{
		{"", "", "a,b,c"},
		{"zone=x", "", "a"},
		{"zone==x", "", "a"},
		{"zone!=x", "", "b,c"},
		{"zone in (x, z)", "", "a,c"},
		{"zone notin (x,z)", "", "b"},
		{"gpu", "", "a"},
		{"!spot", "", "a,b"},
		{"zone in (x,y,z),!gpu", "", "b,c"},
		{"", "Ready=Unknown", "b"},
		{"", "Ready!=True", "b,c"},
		{"!spot", "Ready!=True", "b"},
	} {
		r, err := cl.ListNodes(ctx, &nodev1.ListNodesRequest{LabelSelector: tc.sel, ConditionSelector: tc.cond})
		if err != nil {
			t.Fatalf("%q %q: %v", tc.sel, tc.cond, err)
		}
		if got := names(r.GetNodes()); got != tc.want {
			t.Errorf("selector %q conditions %q: got %s, want %s", tc.sel, tc.cond, got, tc.want)
		}
	}
	tr := true
	if r, _ := cl.ListNodes(ctx, &nodev1.ListNodesRequest{Unschedulable: &tr}); names(r.GetNodes()) != "b" {
		t.Errorf("unschedulable filter: %s", names(r.GetNodes()))
	}
	_, err = cl.ListNodes(ctx, &nodev1.ListNodesRequest{LabelSelector: "zone in (x"})
	wantCode(t, err, codes.InvalidArgument, "labelSelector")
	_, err = cl.ListNodes(ctx, &nodev1.ListNodesRequest{ConditionSelector: "Ready=Maybe"})
	wantCode(t, err, codes.InvalidArgument, "conditionSelector")

	// Pagination walks every node exactly once.
	var all []string
	tok := ""
	for {
		r, err := cl.ListNodes(ctx, &nodev1.ListNodesRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, names(r.GetNodes()))
		if tok = r.GetNextPageToken(); tok == "" {
			break
		}
	}
	if strings.Join(all, "|") != "a,b|c" {
		t.Errorf("pages %v", all)
	}
	_, err = cl.ListNodes(ctx, &nodev1.ListNodesRequest{PageToken: "!!"})
	wantCode(t, err, codes.InvalidArgument, "pageToken")
}

func recv(t *testing.T, s nodev1.NodeService_WatchNodesClient) *nodev1.WatchNodesResponse {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestWatchNodes(t *testing.T) {
	e := start(t, opts{hist: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.put(t, "a", map[string]string{"role": "web"}, nodemodel.True, false)
	e.waitCache(t)
	cl := e.client(t, nil)
	s, err := cl.WatchNodes(ctx, &nodev1.WatchNodesRequest{LabelSelector: "role=web"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, s); ev.GetType() != "ADDED" || ev.GetNode().GetMetadata().GetName() != "a" {
		t.Fatalf("first event %v", ev)
	}
	if _, err := cl.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	ev := recv(t, s)
	if ev.GetType() != "MODIFIED" || !ev.GetNode().GetSpec().GetUnschedulable() {
		t.Fatalf("after cordon: %v", ev)
	}
	rv := ev.GetResourceVersion()
	e.put(t, "b", map[string]string{"role": "db"}, nodemodel.True, false) // filtered out
	e.put(t, "c", map[string]string{"role": "web"}, nodemodel.True, false)
	if ev := recv(t, s); ev.GetType() != "ADDED" || ev.GetNode().GetMetadata().GetName() != "c" {
		t.Fatalf("want c ADDED, got %v", ev)
	}
	if _, err := cl.DeleteNode(ctx, &nodev1.DeleteNodeRequest{Name: "c"}); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, s); ev.GetType() != "DELETED" || ev.GetNode().GetMetadata().GetName() != "c" {
		t.Fatalf("want c DELETED, got %v", ev)
	}
	// Resume after the cordon: the same changes again, in order.
	s2, err := cl.WatchNodes(ctx, &nodev1.WatchNodesRequest{LabelSelector: "role=web", ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, s2); ev.GetType() != "ADDED" || ev.GetNode().GetMetadata().GetName() != "c" {
		t.Fatalf("resumed watch: %v", ev)
	}
	// History is 3 changes: a version from before them is gone.
	for i := range 4 {
		e.put(t, "d", map[string]string{"i": string(rune('0' + i))}, nodemodel.True, false)
	}
	e.waitCache(t)
	s3, err := cl.WatchNodes(ctx, &nodev1.WatchNodesRequest{ResourceVersion: rv})
	if err == nil {
		_, err = s3.Recv()
	}
	wantCode(t, err, codes.OutOfRange, "")
}

func TestAdminChanges(t *testing.T) {
	e := start(t, opts{})
	ctx := context.Background()
	e.put(t, "a", nil, nodemodel.True, false)
	e.waitCache(t)
	cl := e.client(t, nil)

	_, err := cl.AddTaint(ctx, &nodev1.AddTaintRequest{Name: "a", Taint: &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}})
	wantCode(t, err, codes.InvalidArgument, "taint.key")
	_, err = cl.AddTaint(ctx, &nodev1.AddTaintRequest{Name: "a", Taint: &nodev1.Taint{Key: "dedicated", Effect: "Sometimes"}})
	wantCode(t, err, codes.InvalidArgument, "taint.effect")
	_, err = cl.AddTaint(ctx, &nodev1.AddTaintRequest{Name: "a", Taint: &nodev1.Taint{Key: "bad key", Effect: nodemodel.NoSchedule}})
	wantCode(t, err, codes.InvalidArgument, "taint.key")

	r, err := cl.AddTaint(ctx, &nodev1.AddTaintRequest{Name: "a", Taint: &nodev1.Taint{Key: "maintenance", Value: "yes", Effect: nodemodel.NoExecute}})
	if err != nil {
		t.Fatal(err)
	}
	if ts := r.GetNode().GetSpec().GetTaints(); len(ts) != 1 || ts[0].GetTimeAdded() == nil {
		t.Fatalf("taints %v (NoExecute needs timeAdded)", ts)
	}
	// Same key and effect replaces.
	r, err = cl.AddTaint(ctx, &nodev1.AddTaintRequest{Name: "a", Taint: &nodev1.Taint{Key: "maintenance", Value: "no", Effect: nodemodel.NoExecute}})
	if err != nil || len(r.GetNode().GetSpec().GetTaints()) != 1 || r.GetNode().GetSpec().GetTaints()[0].GetValue() != "no" {
		t.Fatalf("replace: %v %v", r, err)
	}
	_, err = cl.RemoveTaint(ctx, &nodev1.RemoveTaintRequest{Name: "a", Key: "other"})
	wantCode(t, err, codes.NotFound, "key")
	_, err = cl.RemoveTaint(ctx, &nodev1.RemoveTaintRequest{Name: "a", Key: nodemodel.TaintNotReady, Effect: nodemodel.NoSchedule})
	wantCode(t, err, codes.FailedPrecondition, "key")
	if r, err := cl.RemoveTaint(ctx, &nodev1.RemoveTaintRequest{Name: "a", Key: "maintenance"}); err != nil || len(r.GetNode().GetSpec().GetTaints()) != 0 {
		t.Fatalf("remove: %v %v", r, err)
	}
	if r, err := cl.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: "a"}); err != nil || !r.GetNode().GetSpec().GetUnschedulable() {
		t.Fatalf("cordon: %v %v", r, err)
	}
	if r, err := cl.UncordonNode(ctx, &nodev1.UncordonNodeRequest{Name: "a"}); err != nil || r.GetNode().GetSpec().GetUnschedulable() {
		t.Fatalf("uncordon: %v %v", r, err)
	}
	_, err = cl.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: "nope"})
	wantCode(t, err, codes.NotFound, "")

	if r, err := cl.RequestStatusUpdate(ctx, &nodev1.RequestStatusUpdateRequest{Name: "a"}); err != nil || r.GetCollector() != "c1" || !r.GetDelivered() {
		t.Fatalf("request status: %v %v", r, err)
	}

	if _, err := cl.DeleteNode(ctx, &nodev1.DeleteNodeRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []nodestore.Kind{nodestore.Nodes, nodestore.Statuses} {
		if _, err := e.store.Get(ctx, k, "a"); err == nil {
			t.Errorf("%s/a survived DeleteNode", k)
		}
	}
}

func TestPlaintextOperatorToken(t *testing.T) {
	e := start(t, opts{token: "s3cret"})
	e.put(t, "a", nil, nodemodel.True, false)
	e.waitCache(t)
	cl := e.client(t, nil)
	ctx := context.Background()
	if _, err := cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: "a"}); err != nil {
		t.Fatalf("read without token: %v", err)
	}
	_, err := cl.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: "a"})
	wantCode(t, err, codes.PermissionDenied, "")
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope")
	_, err = cl.CordonNode(bad, &nodev1.CordonNodeRequest{Name: "a"})
	wantCode(t, err, codes.PermissionDenied, "")
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if _, err := cl.CordonNode(good, &nodev1.CordonNodeRequest{Name: "a"}); err != nil {
		t.Fatalf("with token: %v", err)
	}
}

func TestMTLSRoles(t *testing.T) {
	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Nodes: []string{"a"}, Operators: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	e := start(t, opts{tls: tlsconfig.Config{CertFile: p("server.crt"), KeyFile: p("server.key"), CAFile: p("ca.crt")}})
	e.put(t, "a", nil, nodemodel.True, false)
	e.waitCache(t)
	client := func(name string) nodev1.NodeServiceClient {
		tc, err := tlsconfig.Config{CertFile: p(name + ".crt"), KeyFile: p(name + ".key"), CAFile: p("ca.crt"), ServerName: "localhost"}.Client()
		if err != nil {
			t.Fatal(err)
		}
		return e.client(t, credentials.NewTLS(tc))
	}
	ctx := context.Background()
	node, op := client("node-a"), client("operator-alice")
	if _, err := node.GetNode(ctx, &nodev1.GetNodeRequest{Name: "a"}); err != nil {
		t.Fatalf("node read: %v", err)
	}
	_, err := node.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: "a"})
	wantCode(t, err, codes.PermissionDenied, "")
	if !strings.Contains(status.Convert(err).Message(), "node:a") {
		t.Errorf("denial does not name the caller: %v", err)
	}
	if _, err := op.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: "a"}); err != nil {
		t.Fatalf("operator cordon: %v", err)
	}
	comp := client("server") // the component certificate
	_, err = comp.AddTaint(ctx, &nodev1.AddTaintRequest{Name: "a", Taint: &nodev1.Taint{Key: "k", Effect: nodemodel.NoSchedule}})
	wantCode(t, err, codes.PermissionDenied, "")

	// NodeRestriction through the gRPC door, as through the Kubernetes
	// API (kubeapi's TestMTLSIdentities): a node writes the status of the
	// pods bound to it and of no other.
	for _, pod := range []struct{ name, node string }{{"on-a", "a"}, {"on-b", "b"}} {
		p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: pod.name, Namespace: "default", Uid: "u-" + pod.name, CreationTimestamp: nodemodel.Timestamp(time.Now())},
			Spec: &podv1.PodSpec{NodeName: pod.node}, Status: &podv1.PodStatus{Phase: "Pending"}}
		if _, err := e.store.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "default/"+pod.name, p)); err != nil {
			t.Fatal(err)
		}
	}
	e.waitCache(t)
	tc, err := tlsconfig.Config{CertFile: p("node-a.crt"), KeyFile: p("node-a.key"), CAFile: p("ca.crt"), ServerName: "localhost"}.Client()
	if err != nil {
		t.Fatal(err)
	}
	nodePods := podv1.NewPodServiceClient(e.dial(t, credentials.NewTLS(tc)))
	running := &podv1.PodStatus{Phase: "Running"}
	if _, err := nodePods.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "on-a", Status: running}); err != nil {
		t.Fatalf("node a writes the status of its own pod: %v", err)
	}
	_, err = nodePods.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "on-b", Status: running})
	wantCode(t, err, codes.PermissionDenied, "")
	if msg := status.Convert(err).Message(); msg != `node "a" can only update pod status for pods with spec.nodeName set to itself` {
		t.Fatalf("refusal %q, want NodeRestriction's words", msg)
	}
	if pe, _ := e.cache.Pod("default", "on-b"); pe.Pod.GetStatus().GetPhase() != "Pending" {
		t.Fatalf("the refused write changed pod on-b: phase %q", pe.Pod.GetStatus().GetPhase())
	}
	_, err = nodePods.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "on-a"})
	wantCode(t, err, codes.PermissionDenied, "")
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "nodes change only the status of their pods") {
		t.Fatalf("refusal %q", msg)
	}
}

func TestParseSelectorErrors(t *testing.T) {
	for _, s := range []string{"a in (x", "a) b", "a notin x", "k=v=w=", "bad key=1", "k in (a,b"} {
		if _, err := ParseSelector("labelSelector", s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestExplainWords(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 3, 30, 0, time.Local)
	n := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1", Labels: map[string]string{nodemodel.LabelZone: "eu-1a"}},
		Spec: &nodev1.NodeSpec{Taints: []*nodev1.Taint{{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoSchedule}}},
		Status: &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.Unknown,
			Reason: nodemodel.ReasonNodeStatusUnknown, LastTransitionTime: nodemodel.Timestamp(time.Date(2026, 7, 1, 12, 3, 10, 0, time.Local))}}}}
	lease := &nodev1.Lease{Spec: &nodev1.LeaseSpec{RenewTime: nodemodel.Timestamp(time.Date(2026, 7, 1, 12, 2, 30, 0, time.Local))}}
	f := NodeFacts{Leading: true, Known: true, Zone: "\x00eu-1a", ZoneState: zones.Normal, ZoneQPS: 0.1,
		Queued: true, QueueLen: 1, QueuedAt: now, NextToken: 4 * time.Second}
	sum, details := Explain(now, n, lease, liveness.Node{}, f, "")
	if sum != "Unknown since 12:03:10 because the lease stopped at 12:02:30" {
		t.Errorf("summary %q", sum)
	}
	all := strings.Join(details, "\n")
	if !strings.Contains(all, "unreachable:NoExecute queued in zone eu-1a") || !strings.Contains(all, "rate 0.1/s") {
		t.Errorf("details:\n%s", all)
	}
	if strings.Contains(all, "node clock") {
		t.Errorf("a skew nobody measured is explained:\n%s", all)
	}
	_, details = Explain(now, n, lease, liveness.Node{ClockSkew: -time.Hour, ClockSkewAt: now}, f, "")
	if all := strings.Join(details, "\n"); !strings.Contains(all, "node clock 1h0m0s behind its collector's at its latest status report; its liveness is judged by the control plane's clocks") {
		t.Errorf("the skew is not explained:\n%s", all)
	}
}
