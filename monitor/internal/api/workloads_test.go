// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

const (
	rsKind  = appsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET
	stsKind = appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET
	dsKind  = appsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET
)

func template(app string) (*nodev1.LabelSelector, *podv1.PodTemplateSpec) {
	return &nodev1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		&podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": app}}}
}

func newRS(ns, name string, replicas *int32) *appsv1.Workload {
	sel, tmpl := template(name)
	return &appsv1.Workload{Kind: &appsv1.Workload_ReplicaSet{ReplicaSet: &appsv1.ReplicaSet{
		Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "a"}},
		Spec:     &appsv1.ReplicaSetSpec{Replicas: replicas, Selector: sel, Template: tmpl}}}}
}

func newSTS(ns, name string) *appsv1.Workload {
	sel, tmpl := template(name)
	return &appsv1.Workload{Kind: &appsv1.Workload_StatefulSet{StatefulSet: &appsv1.StatefulSet{
		Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name},
		Spec:     &appsv1.StatefulSetSpec{Replicas: proto.Int32(2), Selector: sel, Template: tmpl, ServiceName: name}}}}
}

func newDS(ns, name string) *appsv1.Workload {
	sel, tmpl := template(name)
	return &appsv1.Workload{Kind: &appsv1.Workload_DaemonSet{DaemonSet: &appsv1.DaemonSet{
		Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name},
		Spec:     &appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}}}
}

func workloadMeta(w *appsv1.Workload) *nodev1.ObjectMeta {
	switch k := w.GetKind().(type) {
	case *appsv1.Workload_ReplicaSet:
		return k.ReplicaSet.GetMetadata()
	case *appsv1.Workload_StatefulSet:
		return k.StatefulSet.GetMetadata()
	case *appsv1.Workload_DaemonSet:
		return k.DaemonSet.GetMetadata()
	}
	return nil
}

func workloadNames(ws []*appsv1.Workload) string {
	var out []string
	for _, w := range ws {
		out = append(out, workloadMeta(w).GetNamespace()+"/"+workloadMeta(w).GetName())
	}
	return strings.Join(out, ",")
}

func TestWorkloadServiceCRUD(t *testing.T) {
	e := start(t, opts{})
	cl := appsv1.NewWorkloadServiceClient(e.dial(t, nil))
	ctx := context.Background()

	r, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newRS("default", "web", nil)})
	if err != nil {
		t.Fatal(err)
	}
	rs := r.GetWorkload().GetReplicaSet()
	md := rs.GetMetadata()
	if md.GetUid() == "" || md.GetCreationTimestamp() == nil || md.GetGeneration() != 1 || md.GetResourceVersion() == "" || rs.GetSpec().GetReplicas() != 1 ||
		rs.GetStatus() == nil || rs.GetStatus().GetObservedGeneration() != 0 {
		t.Fatalf("created ReplicaSet lacks uid/creation/generation/resourceVersion/default replicas: %v", rs)
	}
	_, err = cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newRS("default", "web", proto.Int32(2))})
	wantCode(t, err, codes.AlreadyExists, "workload.replicaSet.metadata.name")
	s, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newSTS("default", "db")})
	if err != nil {
		t.Fatal(err)
	}
	if p := s.GetWorkload().GetStatefulSet().GetSpec().GetPodManagementPolicy(); p != "OrderedReady" {
		t.Fatalf("podManagementPolicy default = %q", p)
	}
	if _, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newDS("kube-system", "agent")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newRS("batch", "api", proto.Int32(0))}); err != nil {
		t.Fatal(err)
	}

	g, err := cl.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web"})
	if err != nil || g.GetWorkload().GetReplicaSet().GetMetadata().GetUid() != md.GetUid() {
		t.Fatalf("get after create: %v %v", g, err)
	}
	_, err = cl.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Kind: stsKind, Namespace: "default", Name: "web"})
	wantCode(t, err, codes.NotFound, "")
	_, err = cl.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Namespace: "default", Name: "web"})
	wantCode(t, err, codes.InvalidArgument, "kind")
	_, err = cl.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Kind: rsKind, Namespace: "Bad_NS", Name: "web"})
	wantCode(t, err, codes.InvalidArgument, "namespace")

	l, err := cl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{})
	if err != nil || workloadNames(l.GetWorkloads()) != "batch/api,default/web,default/db,kube-system/agent" || l.GetResourceVersion() == "" {
		t.Fatalf("list all = %s %v", workloadNames(l.GetWorkloads()), err)
	}
	l, _ = cl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{Kind: rsKind, Namespace: "default"})
	if workloadNames(l.GetWorkloads()) != "default/web" {
		t.Fatalf("list rs in default = %s", workloadNames(l.GetWorkloads()))
	}
	l, _ = cl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{LabelSelector: "team=a"})
	if workloadNames(l.GetWorkloads()) != "batch/api,default/web" {
		t.Fatalf("list team=a = %s", workloadNames(l.GetWorkloads()))
	}
	// Pages cross kinds.
	var paged []string
	for tok := ""; ; {
		p, err := cl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{PageSize: 3, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, workloadNames(p.GetWorkloads()))
		if tok = p.GetNextPageToken(); tok == "" {
			break
		}
	}
	if strings.Join(paged, "|") != "batch/api,default/web,default/db|kube-system/agent" {
		t.Fatalf("pages = %v", paged)
	}

	// Scale: generation grows only on a change.
	sc, err := cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Replicas: 3})
	if err != nil || sc.GetWorkload().GetReplicaSet().GetSpec().GetReplicas() != 3 || sc.GetWorkload().GetReplicaSet().GetMetadata().GetGeneration() != 2 {
		t.Fatalf("scale to 3 = %v %v", sc, err)
	}
	sc2, err := cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Replicas: 3})
	if err != nil || sc2.GetWorkload().GetReplicaSet().GetMetadata().GetGeneration() != 2 ||
		sc2.GetWorkload().GetReplicaSet().GetMetadata().GetResourceVersion() != sc.GetWorkload().GetReplicaSet().GetMetadata().GetResourceVersion() {
		t.Fatalf("scale to the same count changed it: %v %v", sc2, err)
	}
	if sc, err := cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: stsKind, Namespace: "default", Name: "db", Replicas: 0}); err != nil ||
		sc.GetWorkload().GetStatefulSet().GetSpec().GetReplicas() != 0 || sc.GetWorkload().GetStatefulSet().GetMetadata().GetGeneration() != 2 {
		t.Fatalf("scale sts to 0 = %v %v", sc, err)
	}
	_, err = cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Replicas: -1})
	wantCode(t, err, codes.InvalidArgument, "replicas")
	_, err = cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: dsKind, Namespace: "kube-system", Name: "agent", Replicas: 1})
	wantCode(t, err, codes.InvalidArgument, "kind")
	_, err = cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Replicas: 5, ResourceVersion: "1"})
	wantCode(t, err, codes.Aborted, "resourceVersion")
	_, err = cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "nope", Replicas: 1})
	wantCode(t, err, codes.NotFound, "")

	// Delete, with a uid precondition.
	_, err = cl.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Uid: "other"})
	wantCode(t, err, codes.Aborted, "uid")
	d, err := cl.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Uid: md.GetUid()})
	if err != nil || d.GetWorkload().GetReplicaSet().GetMetadata().GetName() != "web" || d.GetWorkload().GetReplicaSet().GetSpec().GetReplicas() != 3 {
		t.Fatalf("delete = %v %v", d, err)
	}
	_, err = cl.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web"})
	wantCode(t, err, codes.NotFound, "")
	_, err = cl.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web"})
	wantCode(t, err, codes.NotFound, "")
}

func TestWorkloadValidationNamesTheField(t *testing.T) {
	e := start(t, opts{})
	cl := appsv1.NewWorkloadServiceClient(e.dial(t, nil))
	ctx := context.Background()
	mismatch := newRS("default", "web", nil)
	mismatch.GetReplicaSet().Spec.Template.Metadata.Labels = map[string]string{"app": "other"}
	neg := newRS("default", "web", proto.Int32(-2))
	badSTS := newSTS("default", "db")
	badSTS.GetStatefulSet().Spec.PodManagementPolicy = "Serial"
	noSel := newDS("default", "agent")
	noSel.GetDaemonSet().Spec.Selector = nil
	for _, tc := range []struct {
		w     *appsv1.Workload
		field string
	}{
		{&appsv1.Workload{}, "workload"},
		{mismatch, "workload.replicaSet.spec.template.metadata.labels"},
		{neg, "workload.replicaSet.spec.replicas"},
		{badSTS, "workload.statefulSet.spec.podManagementPolicy"},
		{noSel, "workload.daemonSet.spec.selector"},
	} {
		_, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: tc.w})
		wantCode(t, err, codes.InvalidArgument, tc.field)
	}
	_, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: mismatch})
	if !strings.Contains(err.Error(), "`selector` does not match template `labels`") {
		t.Fatalf("mismatch error = %v", err)
	}
	if l, _ := cl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{}); len(l.GetWorkloads()) != 0 {
		t.Fatalf("invalid input stored: %s", workloadNames(l.GetWorkloads()))
	}
}

func TestWatchWorkloads(t *testing.T) {
	e := start(t, opts{})
	cl := appsv1.NewWorkloadServiceClient(e.dial(t, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newRS("default", "web", nil)}); err != nil {
		t.Fatal(err)
	}
	w, err := cl.WatchWorkloads(ctx, &appsv1.WatchWorkloadsRequest{Kind: rsKind})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Recv()
	if err != nil || ev.GetType() != "ADDED" || workloadMeta(ev.GetWorkload()).GetName() != "web" {
		t.Fatalf("first event = %v %v", ev, err)
	}
	// A StatefulSet and a budget are not ReplicaSets: the watcher sees only
	// the scale and the delete.
	if _, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newSTS("default", "db")}); err != nil {
		t.Fatal(err)
	}
	pdbs := policyv1.NewDisruptionBudgetServiceClient(e.dial(t, nil))
	if _, err := pdbs.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: newPDB("default", "web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Replicas: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	ev, err = w.Recv()
	if err != nil || ev.GetType() != "MODIFIED" || ev.GetWorkload().GetReplicaSet().GetSpec().GetReplicas() != 4 {
		t.Fatalf("second event = %v %v", ev, err)
	}
	mod := ev.GetResourceVersion()
	ev, err = w.Recv()
	if err != nil || ev.GetType() != "DELETED" || workloadMeta(ev.GetWorkload()).GetName() != "web" {
		t.Fatalf("third event = %v %v", ev, err)
	}
	// Resume after the scale, all kinds: only the delete follows.
	w2, err := cl.WatchWorkloads(ctx, &appsv1.WatchWorkloadsRequest{ResourceVersion: mod})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = w2.Recv()
	if err != nil || ev.GetType() != "DELETED" || ev.GetWorkload().GetReplicaSet() == nil {
		t.Fatalf("resumed event = %v %v", ev, err)
	}
	// Every kind from the start: the StatefulSet, not the budget.
	w3, err := cl.WatchWorkloads(ctx, &appsv1.WatchWorkloadsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = w3.Recv()
	if err != nil || ev.GetType() != "ADDED" || ev.GetWorkload().GetStatefulSet() == nil {
		t.Fatalf("all kinds = %v %v", ev, err)
	}
}

func newPDB(ns, name string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name},
		Spec: &policyv1.PodDisruptionBudgetSpec{MinAvailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: 2}},
			Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
}

func TestDisruptionBudgetService(t *testing.T) {
	e := start(t, opts{})
	cl := policyv1.NewDisruptionBudgetServiceClient(e.dial(t, nil))
	ctx := context.Background()
	r, err := cl.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: newPDB("default", "web")})
	if err != nil {
		t.Fatal(err)
	}
	md := r.GetPodDisruptionBudget().GetMetadata()
	if md.GetUid() == "" || md.GetGeneration() != 1 || md.GetResourceVersion() == "" || r.GetPodDisruptionBudget().GetStatus().GetDisruptionsAllowed() != 0 {
		t.Fatalf("created = %v", r.GetPodDisruptionBudget())
	}
	_, err = cl.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: newPDB("default", "web")})
	wantCode(t, err, codes.AlreadyExists, "podDisruptionBudget.metadata.name")
	pct := newPDB("prod", "api")
	pct.Spec.MinAvailable = nil
	pct.Spec.MaxUnavailable = &policyv1.IntOrString{Value: &policyv1.IntOrString_StrValue{StrValue: "25%"}}
	if _, err := cl.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: pct}); err != nil {
		t.Fatal(err)
	}
	both := newPDB("prod", "both")
	both.Spec.MaxUnavailable = &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: 1}}
	_, err = cl.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: both})
	wantCode(t, err, codes.InvalidArgument, "podDisruptionBudget.spec")
	badPct := newPDB("prod", "bad")
	badPct.Spec.MinAvailable = &policyv1.IntOrString{Value: &policyv1.IntOrString_StrValue{StrValue: "half"}}
	_, err = cl.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: badPct})
	wantCode(t, err, codes.InvalidArgument, "podDisruptionBudget.spec.minAvailable")

	g, err := cl.GetPodDisruptionBudget(ctx, &policyv1.GetPodDisruptionBudgetRequest{Namespace: "prod", Name: "api"})
	if err != nil || g.GetPodDisruptionBudget().GetSpec().GetMaxUnavailable().GetStrValue() != "25%" {
		t.Fatalf("get = %v %v", g, err)
	}
	l, err := cl.ListPodDisruptionBudgets(ctx, &policyv1.ListPodDisruptionBudgetsRequest{})
	if err != nil || len(l.GetPodDisruptionBudgets()) != 2 || l.GetPodDisruptionBudgets()[0].GetMetadata().GetName() != "web" {
		t.Fatalf("list = %v %v", l, err)
	}
	l, _ = cl.ListPodDisruptionBudgets(ctx, &policyv1.ListPodDisruptionBudgetsRequest{Namespace: "prod"})
	if len(l.GetPodDisruptionBudgets()) != 1 {
		t.Fatalf("list prod = %v", l)
	}
	if _, err := cl.DeletePodDisruptionBudget(ctx, &policyv1.DeletePodDisruptionBudgetRequest{Namespace: "prod", Name: "api"}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.GetPodDisruptionBudget(ctx, &policyv1.GetPodDisruptionBudgetRequest{Namespace: "prod", Name: "api"})
	wantCode(t, err, codes.NotFound, "")
}

func TestOwnerWritesNeedTheOperator(t *testing.T) {
	e := start(t, opts{token: "s3cret"})
	cl := appsv1.NewWorkloadServiceClient(e.dial(t, nil))
	pdbs := policyv1.NewDisruptionBudgetServiceClient(e.dial(t, nil))
	ctx := context.Background()
	_, err := cl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: newRS("default", "web", nil)})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = pdbs.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: newPDB("default", "web")})
	wantCode(t, err, codes.PermissionDenied, "")
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if _, err := cl.CreateWorkload(good, &appsv1.CreateWorkloadRequest{Workload: newRS("default", "web", nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{}); err != nil {
		t.Fatalf("read without token: %v", err)
	}
	_, err = cl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web", Replicas: 2})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = cl.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: rsKind, Namespace: "default", Name: "web"})
	wantCode(t, err, codes.PermissionDenied, "")
}
