// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/podsync"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// withPods starts a pod hub on the harness's store, as app wires it.
func withPods(t *testing.T, h *harness) {
	t.Helper()
	hub, err := podsync.New(h.store, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.srv.SetPods(hub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func storePod(t *testing.T, h *harness, ns, name, uid, node string, ready string) {
	t.Helper()
	p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name, Uid: uid}, Spec: &podv1.PodSpec{NodeName: node},
		Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: ready}}}}
	if _, err := h.mem.Apply(context.Background(), nil, nodestore.Put(nodestore.Pods, ns+"/"+name, p)); err != nil {
		t.Fatal(err)
	}
}

// openPods registers name asking for its pods and returns the stream and
// the first PodSync.
func (h *harness) openPods(t *testing.T, ctx context.Context, name string) (*client, *collectorv1.PodSync) {
	t.Helper()
	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, s: s}
	reg := register(name)
	reg.GetRegister().PodSync = true
	if a := c.do(reg); a.GetError() != nil {
		t.Fatalf("register refused: %v", a.GetError())
	}
	return c, c.podSync()
}

func (c *client) podSync() *collectorv1.PodSync {
	c.t.Helper()
	for {
		r, err := c.s.Recv()
		if err != nil {
			c.t.Fatalf("recv: %v", err)
		}
		if m := r.GetPodSync(); m != nil {
			return m
		}
	}
}

func podStatus(seq uint64, ns, name, uid, ready string) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Seq: seq, Message: &collectorv1.ReportRequest_PodStatus{PodStatus: &collectorv1.PodStatusUpdate{
		Namespace: ns, Name: name, Uid: uid, Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: ready}}}}}}
}

func wantRefused(t *testing.T, a *collectorv1.Ack, code codes.Code, field string) {
	t.Helper()
	e := a.GetError()
	if e == nil || codes.Code(e.GetCode()) != code || e.GetField() != field {
		t.Fatalf("ack = %v, want %s on %s", a, code, field)
	}
}

func TestPodWritesAreAuthorisedAndValidated(t *testing.T) {
	h := newHarness(t, nil)
	withPods(t, h)
	storePod(t, h, "ns", "mine", "u1", "n1", "False")
	storePod(t, h, "ns", "theirs", "u2", "n2", "False")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, first := h.openPods(t, ctx, "n1")
	if !first.GetFull() || len(first.GetPods()) != 1 || first.GetPods()[0].GetMetadata().GetName() != "mine" {
		t.Fatalf("first PodSync = %v, want the full list [mine]", first)
	}

	// Another node's pod: PermissionDenied, naming the field, nothing written.
	a := c.do(podStatus(2, "ns", "theirs", "u2", "True"))
	wantRefused(t, a, codes.PermissionDenied, "podStatus.name")
	if !strings.Contains(a.GetError().GetMessage(), "spec.nodeName") {
		t.Fatalf("refusal %q does not say why (spec.nodeName)", a.GetError().GetMessage())
	}
	// Invalid: InvalidArgument naming the field, the stream stays.
	wantRefused(t, c.do(podStatus(3, "a.b", "mine", "u1", "True")), codes.InvalidArgument, "podStatus.namespace")
	wantRefused(t, c.do(podStatus(4, "ns", "mine", "u1", "yes")), codes.InvalidArgument, "podStatus.status.conditions[0].status")
	// A replaced pod (another uid): Aborted.
	wantRefused(t, c.do(podStatus(5, "ns", "mine", "old", "True")), codes.Aborted, "podStatus.uid")
	// A node does not start deletions.
	del := &collectorv1.ReportRequest{Seq: 6, Message: &collectorv1.ReportRequest_PodDelete{PodDelete: &collectorv1.PodDelete{Namespace: "ns", Name: "mine", Uid: "u1"}}}
	wantRefused(t, c.do(del), codes.FailedPrecondition, "podDelete.name")

	// Its own pod: written, and the change comes back as a PodSync.
	if a := c.do(podStatus(7, "ns", "mine", "u1", "True")); a.GetError() != nil || !a.GetDurable() {
		t.Fatalf("own pod write: %v", a)
	}
	m := c.podSync()
	if m.GetFull() || len(m.GetPods()) != 1 || nodemodel.True != m.GetPods()[0].GetStatus().GetConditions()[0].GetStatus() {
		t.Fatalf("change = %v, want mine Ready=True", m)
	}
	o, _ := h.mem.Get(ctx, nodestore.Pods, "ns/theirs")
	if o.Value.(*podv1.Pod).GetStatus().GetConditions()[0].GetStatus() != "False" {
		t.Fatal("another node's pod was written")
	}
}

func TestPodWritesNeedPodSync(t *testing.T) {
	h := newHarness(t, nil)
	withPods(t, h)
	storePod(t, h, "ns", "mine", "u1", "n1", "False")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "n1")
	wantRefused(t, c.do(podStatus(2, "ns", "mine", "u1", "True")), codes.FailedPrecondition, "register.podSync")
}

func TestDeletedNodeEndsItsStream(t *testing.T) {
	h := newHarness(t, nil)
	withPods(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, first := h.openPods(t, ctx, "n1")
	if !first.GetFull() || len(first.GetPods()) != 0 {
		t.Fatalf("first PodSync = %v, want an empty full list", first)
	}
	if _, err := h.mem.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, "n1")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := c.s.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		st := status.Convert(err)
		if st.Code() != codes.NotFound || !strings.Contains(st.Message(), `node "n1" was deleted`) {
			t.Fatalf("stream ended with %v %q, want NotFound saying the node was deleted", st.Code(), st.Message())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a deleted node stayed open")
	}
	// Registering again creates a new node object.
	c2, _ := h.openPods(t, ctx, "n1")
	_ = c2
	o, err := h.mem.Get(ctx, nodestore.Nodes, "n1")
	if err != nil {
		t.Fatalf("node not registered again: %v", err)
	}
	if o.Value.(*nodev1.Node).GetMetadata().GetUid() == "" {
		t.Fatal("no uid")
	}
}
