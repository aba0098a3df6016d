// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// readyPod creates a Running, Ready pod of app=web owned by a ReplicaSet.
func readyPod(t *testing.T, e *env, cl podv1.PodServiceClient, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", name, "n1", "ReplicaSet", map[string]string{"app": "web"})}); err != nil {
		t.Fatal(err)
	}
	st := &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}}
	if _, err := cl.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: name, Status: st}); err != nil {
		t.Fatal(err)
	}
}

// TestEvictPodStatus: the gRPC side of an eviction: success, a refusal as
// ResourceExhausted with RetryInfo and the cause, two budgets as
// FailedPrecondition, bad input named.
func TestEvictPodStatus(t *testing.T) {
	e := start(t, opts{})
	cl := e.pods(t, nil)
	ctx := context.Background()
	e.put(t, "n1", nil, nodemodel.True, false)
	readyPod(t, e, cl, "web-a")
	readyPod(t, e, cl, "web-b")
	// A budget as the controller left it: one disruption allowed.
	pdb := &policyv1.PodDisruptionBudget{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web", Generation: 1},
		Spec: &policyv1.PodDisruptionBudgetSpec{Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MinAvailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: 1}}},
		Status: &policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2},
	}
	if _, err := e.store.Apply(ctx, nil, nodestore.Put(nodestore.PodDisruptionBudgets, "default/web", pdb)); err != nil {
		t.Fatal(err)
	}
	r, err := cl.EvictPod(ctx, &podv1.EvictPodRequest{Namespace: "default", Name: "web-a"})
	if err != nil || r.GetGone() || r.GetPod().GetMetadata().GetDeletionTimestamp() == nil {
		t.Fatalf("evict web-a: %v %v", r, err)
	}
	_, err = cl.EvictPod(ctx, &podv1.EvictPodRequest{Namespace: "default", Name: "web-b"})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 1 healthy pods") {
		t.Fatalf("second eviction: %v", err)
	}
	var retry, info bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration() > 0
		case *errdetails.ErrorInfo:
			info = d.GetReason() == "DisruptionBudget" && d.GetMetadata()["budget"] == "web"
		}
	}
	if !retry || !info {
		t.Fatalf("details = %v", st.Details())
	}
	pdb.Metadata.Name = "web2"
	if _, err := e.store.Apply(ctx, nil, nodestore.Put(nodestore.PodDisruptionBudgets, "default/web2", pdb)); err != nil {
		t.Fatal(err)
	}
	_, err = cl.EvictPod(ctx, &podv1.EvictPodRequest{Namespace: "default", Name: "web-b"})
	if s := status.Convert(err); s.Code() != codes.FailedPrecondition || !strings.Contains(s.Message(), "more than one PodDisruptionBudget") {
		t.Fatalf("two budgets: %v", err)
	}
	_, err = cl.EvictPod(ctx, &podv1.EvictPodRequest{Namespace: "default", Name: "gone"})
	wantCode(t, err, codes.NotFound, "")
	_, err = cl.EvictPod(ctx, &podv1.EvictPodRequest{Namespace: "Bad_NS", Name: "x"})
	wantCode(t, err, codes.InvalidArgument, "namespace")
}

// TestDrainNodeStream: a node with a bare pod refuses without force
// (node left cordoned); with force it drains (the pod, unscheduled by the
// test's reporter, is deleted with grace 0 so it is gone at once).
func TestDrainNodeStream(t *testing.T) {
	e := start(t, opts{})
	pods := e.pods(t, nil)
	nodes := e.client(t, nil)
	ctx := context.Background()
	e.put(t, "n1", nil, nodemodel.True, false)
	if _, err := pods.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "bare", "n1", "", nil)}); err != nil {
		t.Fatal(err)
	}
	lines := func(req *nodev1.DrainNodeRequest) ([]string, *nodev1.DrainNodeResponse_Done) {
		t.Helper()
		s, err := nodes.DrainNode(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for {
			r, err := s.Recv()
			if errors.Is(err, io.EOF) {
				t.Fatalf("no Done; got %q", out)
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := r.GetDone(); d != nil {
				return out, d
			}
			out = append(out, r.String())
		}
	}
	_, done := lines(&nodev1.DrainNodeRequest{Name: "n1"})
	if done.GetDrained() || !strings.Contains(done.GetMessage(), "cannot delete Pods that declare no controller (use --force to override): default/bare") {
		t.Fatalf("done = %v", done)
	}
	n, err := nodes.GetNode(ctx, &nodev1.GetNodeRequest{Name: "n1"})
	if err != nil || !n.GetNode().GetSpec().GetUnschedulable() {
		t.Fatalf("node not cordoned: %v %v", n, err)
	}
	zero := int64(0)
	out, done := lines(&nodev1.DrainNodeRequest{Name: "n1", Force: true, GracePeriodSeconds: &zero})
	if !done.GetDrained() || done.GetMessage() != "node/n1 drained" || len(out) < 3 {
		t.Fatalf("done = %v, steps %q", done, out)
	}
	if _, err := pods.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: "bare"}); status.Code(err) != codes.NotFound {
		t.Fatalf("bare pod still there: %v", err)
	}
	s, _ := nodes.DrainNode(ctx, &nodev1.DrainNodeRequest{Name: "nope"})
	_, err = s.Recv()
	wantCode(t, err, codes.NotFound, "")
}
