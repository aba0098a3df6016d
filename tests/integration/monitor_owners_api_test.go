// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestOwnersAPIOnTwoReplicas: owners and budgets written through one
// monitor replica are stored in etcd, served and watched by the other
// (every replica serves WorkloadService and DisruptionBudgetService from
// its watch cache), and scale and delete through the second reach the
// first's watchers.
func TestOwnersAPIOnTwoReplicas(t *testing.T) {
	c := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, c)
	a := startMonitor(t, c, store.Prefix(), "monitor-a")
	b := startMonitor(t, c, store.Prefix(), "monitor-b")
	dial := func(m *monitor) *grpc.ClientConn {
		cc, err := grpc.NewClient(m.app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ca, cb := dial(a), dial(b)
	wa, wb := appsv1.NewWorkloadServiceClient(ca), appsv1.NewWorkloadServiceClient(cb)
	pa, pb := policyv1.NewDisruptionBudgetServiceClient(ca), policyv1.NewDisruptionBudgetServiceClient(cb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Both report the new services SERVING once their caches have synced.
	for _, cc := range []*grpc.ClientConn{ca, cb} {
		h := healthpb.NewHealthClient(cc)
		for _, svc := range []string{appsv1.WorkloadService_ServiceDesc.ServiceName, policyv1.DisruptionBudgetService_ServiceDesc.ServiceName} {
			waitFor(t, 20*time.Second, svc+" serving", func() bool {
				r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
				return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
			})
		}
	}

	watch, err := wa.WatchWorkloads(ctx, &appsv1.WatchWorkloadsRequest{Kind: appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET})
	if err != nil {
		t.Fatal(err)
	}
	sel := &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"db"}}}}
	tmpl := &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": "db"}},
		Spec: &podv1.PodSpec{Volumes: []*podv1.Volume{{Name: "data", EmptyDir: &podv1.EmptyDirVolumeSource{}}}}}
	created, err := wa.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: &appsv1.Workload{Kind: &appsv1.Workload_StatefulSet{StatefulSet: &appsv1.StatefulSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "shop", Name: "db"},
		Spec:     &appsv1.StatefulSetSpec{Replicas: proto.Int32(2), Selector: sel, Template: tmpl, ServiceName: "db"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	uid := created.GetWorkload().GetStatefulSet().GetMetadata().GetUid()
	if _, err := pa.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: &policyv1.PodDisruptionBudget{
		Metadata: &nodev1.ObjectMeta{Namespace: "shop", Name: "db"},
		Spec: &policyv1.PodDisruptionBudgetSpec{Selector: sel,
			MaxUnavailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: 1}}}}}); err != nil {
		t.Fatal(err)
	}

	// The other replica serves what the first wrote, as stored in etcd.
	var got *appsv1.StatefulSet
	waitFor(t, 10*time.Second, "monitor-b to serve the StatefulSet", func() bool {
		r, err := wb.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Kind: appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET, Namespace: "shop", Name: "db"})
		got = r.GetWorkload().GetStatefulSet()
		return err == nil
	})
	if got.GetMetadata().GetUid() != uid || got.GetSpec().GetTemplate().GetSpec().GetVolumes()[0].GetEmptyDir() == nil || got.GetSpec().GetPodManagementPolicy() != "OrderedReady" {
		t.Fatalf("monitor-b serves %v", got)
	}
	o, err := store.Get(ctx, nodestore.StatefulSets, "shop/db")
	if err != nil || o.Value.(*appsv1.StatefulSet).GetMetadata().GetGeneration() != 1 {
		t.Fatalf("stored: %v %v", o, err)
	}
	waitFor(t, 10*time.Second, "monitor-b to serve the budget", func() bool {
		r, err := pb.GetPodDisruptionBudget(ctx, &policyv1.GetPodDisruptionBudgetRequest{Namespace: "shop", Name: "db"})
		return err == nil && r.GetPodDisruptionBudget().GetSpec().GetMaxUnavailable().GetIntValue() == 1
	})

	// Scale and delete through b; a's watcher sees both.
	sc, err := wb.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET, Namespace: "shop", Name: "db", Replicas: 3})
	if err != nil || sc.GetWorkload().GetStatefulSet().GetMetadata().GetGeneration() != 2 {
		t.Fatalf("scale: %v %v", sc, err)
	}
	_, err = wb.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET, Namespace: "shop", Name: "db", Uid: "not-" + uid})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("delete with a wrong uid: %v", err)
	}
	if _, err := wb.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET, Namespace: "shop", Name: "db", Uid: uid}); err != nil {
		t.Fatal(err)
	}
	var types []string
	var gen int64
	for len(types) < 3 {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch after %v: %v", types, err)
		}
		// The owner controller's status writes (spec §16) keep the
		// generation: only spec changes are counted here.
		g := ev.GetWorkload().GetStatefulSet().GetMetadata().GetGeneration()
		if ev.GetType() == "MODIFIED" && g == gen {
			continue
		}
		gen = g
		types = append(types, ev.GetType())
		if ev.GetType() == "MODIFIED" && ev.GetWorkload().GetStatefulSet().GetSpec().GetReplicas() != 3 {
			t.Fatalf("MODIFIED carries %v", ev.GetWorkload())
		}
	}
	if types[0] != "ADDED" || types[1] != "MODIFIED" || types[2] != "DELETED" {
		t.Fatalf("monitor-a's watcher saw %v", types)
	}
	if _, err := store.Get(ctx, nodestore.StatefulSets, "shop/db"); err == nil {
		t.Fatal("deleted StatefulSet still stored")
	}
}
