// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestMonitorDrain drains a node on a real etcd through NodeService
// (spec §15): a ReplicaSet of 3 on n1 under minAvailable=2. The test plays
// the ReplicaSet controller and the reporters: a Terminating pod's
// replacement is created Ready on n2 and the old pod is then confirmed
// gone. The drain evicts one pod at a time (the others refused and
// retried) and finishes; a second drain with a budget that never allows
// stops at its --timeout, leaving the node cordoned.
func TestMonitorDrain(t *testing.T) {
	c := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	f.add("n1", true)
	f.add("n2", true)
	f.add("n3", true)
	m := startMonitor(t, c, store.Prefix(), "monitor-a")
	waitFor(t, 30*time.Second, "monitor-a to lead", m.app.Leading)
	cc, err := grpc.NewClient(m.app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	pods := podv1.NewPodServiceClient(cc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	three := int32(3)
	if _, err := store.Apply(ctx, nil, nodestore.Put(nodestore.ReplicaSets, "default/web", &appsv1.ReplicaSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web", Uid: "web-uid"}, Spec: &appsv1.ReplicaSetSpec{Replicas: &three}})); err != nil {
		t.Fatal(err)
	}
	create := func(name, node string) {
		t.Helper()
		p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Uid: "web-uid", Controller: true}}},
			Spec: &podv1.PodSpec{NodeName: node}}
		if _, err := pods.CreatePod(ctx, &podv1.CreatePodRequest{Pod: p}); err != nil {
			t.Fatal(err)
		}
		st := &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}}
		if _, err := pods.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: name, Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		create(n, "n1")
	}
	budget := func(min int32) {
		t.Helper()
		if _, err := store.Apply(ctx, nil, nodestore.Put(nodestore.PodDisruptionBudgets, "default/web", &policyv1.PodDisruptionBudget{
			Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web", Uid: "pdb-uid", Generation: 1},
			Spec: &policyv1.PodDisruptionBudgetSpec{Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				MinAvailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: min}}},
		})); err != nil {
			t.Fatal(err)
		}
	}
	budget(2)

	// The ReplicaSet controller and the reporters, played by the test.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		seen := map[string]bool{}
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			r, err := pods.ListPods(ctx, &podv1.ListPodsRequest{NodeName: "n1"})
			if err != nil {
				continue
			}
			for _, p := range r.GetPods() {
				name := p.GetMetadata().GetName()
				if p.GetMetadata().GetDeletionTimestamp() == nil || seen[name] {
					continue
				}
				seen[name] = true
				create(name+"-r", "n2")
				zero := int64(0)
				_, _ = pods.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: name, GracePeriodSeconds: &zero, Uid: p.GetMetadata().GetUid()})
			}
		}
	})

	drain := func(req *nodev1.DrainNodeRequest) ([]string, *nodev1.DrainNodeResponse_Done) {
		t.Helper()
		s, err := m.client.DrainNode(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for {
			r, err := s.Recv()
			if errors.Is(err, io.EOF) || err != nil {
				t.Fatalf("stream ended without Done: %v; steps %q", err, steps)
			}
			if d := r.GetDone(); d != nil {
				return steps, d
			}
			steps = append(steps, r.GetPod().GetMessage()+r.GetCordoned())
		}
	}
	start := time.Now()
	steps, done := drain(&nodev1.DrainNodeRequest{Name: "n1", IgnoreDaemonsets: true, DeleteEmptydirData: true})
	if !done.GetDrained() || done.GetMessage() != "node/n1 drained" {
		t.Fatalf("done = %v; steps:\n%s", done, strings.Join(steps, "\n"))
	}
	joined := strings.Join(steps, "\n")
	for _, want := range []string{"evicting pod default/web-a", "pod/web-a evicted", "pod/web-b evicted", "pod/web-c evicted",
		"(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in:\n%s", want, joined)
		}
	}
	t.Logf("drained n1 in %v", time.Since(start))

	// n2 now holds three pods; a budget of 3 never allows one to go.
	budget(3)
	steps, done = drain(&nodev1.DrainNodeRequest{Name: "n2", Timeout: durationpb.New(2 * time.Second)})
	if done.GetDrained() || !strings.Contains(done.GetMessage(), "global timeout reached: 2s") {
		t.Fatalf("done = %v; steps %q", done, steps)
	}
	if n := getNode(t, m, "n2"); !n.GetSpec().GetUnschedulable() {
		t.Fatal("n2 not left cordoned")
	}
	r, err := pods.ListPods(ctx, &podv1.ListPodsRequest{NodeName: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.GetPods() {
		if p.GetMetadata().GetDeletionTimestamp() != nil {
			t.Fatalf("pod %s evicted past the budget", p.GetMetadata().GetName())
		}
	}
}
