// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

func (e *env) pods(t *testing.T, creds credentials.TransportCredentials) podv1.PodServiceClient {
	return podv1.NewPodServiceClient(e.dial(t, creds))
}

func newPod(ns, name, node, owner string, labels map[string]string) *podv1.Pod {
	p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: &podv1.PodSpec{NodeName: node}}
	if owner != "" {
		p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{Kind: owner, Name: name + "-owner", Controller: true}}
	}
	return p
}

func podNames(ps []*podv1.Pod) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
	}
	return strings.Join(out, ",")
}

func TestPodServiceCRUD(t *testing.T) {
	e := start(t, opts{})
	cl := e.pods(t, nil)
	ctx := context.Background()

	r, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "web-1", "n1", "ReplicaSet", map[string]string{"app": "web"})})
	if err != nil {
		t.Fatal(err)
	}
	p := r.GetPod()
	if p.GetMetadata().GetUid() == "" || p.GetMetadata().GetCreationTimestamp() == nil || p.GetMetadata().GetResourceVersion() == "" || p.GetStatus().GetPhase() != podutil.PhasePending {
		t.Fatalf("created pod lacks uid/creation/resourceVersion/phase: %v", p)
	}
	if tols := p.GetSpec().GetTolerations(); len(tols) != 2 || tols[0].GetTolerationSeconds() != 300 || tols[1].GetKey() != nodemodel.TaintUnreachable {
		t.Fatalf("default tolerations not applied: %v", tols)
	}
	// Read your write on the same replica.
	if g, err := cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: "web-1"}); err != nil || g.GetPod().GetMetadata().GetUid() != p.GetMetadata().GetUid() {
		t.Fatalf("get after create: %v %v", g, err)
	}
	_, err = cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "web-1", "n1", "", nil)})
	wantCode(t, err, codes.AlreadyExists, "pod.metadata.name")
	ds, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("kube-system", "agent-n1", "n1", "DaemonSet", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if tols := ds.GetPod().GetSpec().GetTolerations(); len(tols) != 6 || tols[0].TolerationSeconds != nil {
		t.Fatalf("DaemonSet tolerations = %v", tols)
	}
	for i := range 5 {
		if _, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("batch", "job-"+string(rune('a'+i)), "n2", "Job", map[string]string{"app": "batch"})}); err != nil {
			t.Fatal(err)
		}
	}

	// Lists: by namespace, node, selector, and pages.
	for _, c := range []struct {
		req  *podv1.ListPodsRequest
		want string
	}{
		{&podv1.ListPodsRequest{Namespace: "default"}, "default/web-1"},
		{&podv1.ListPodsRequest{NodeName: "n1"}, "default/web-1,kube-system/agent-n1"},
		{&podv1.ListPodsRequest{LabelSelector: "app=web"}, "default/web-1"},
		{&podv1.ListPodsRequest{NodeName: "n2", LabelSelector: "app in (batch)", Namespace: "batch"}, "batch/job-a,batch/job-b,batch/job-c,batch/job-d,batch/job-e"},
	} {
		l, err := cl.ListPods(ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := podNames(l.GetPods()); got != c.want {
			t.Errorf("list %v = %s, want %s", c.req, got, c.want)
		}
	}
	var all []*podv1.Pod
	tok := ""
	for {
		l, err := cl.ListPods(ctx, &podv1.ListPodsRequest{PageSize: 3, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l.GetPods()...)
		if tok = l.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(all) != 7 || podNames(all)[:11] != "batch/job-a" {
		t.Fatalf("paged list = %s", podNames(all))
	}

	// Status updates with and without a resource version precondition.
	st := &podv1.PodStatus{Phase: podutil.PhaseRunning, Conditions: []*podv1.PodCondition{{Type: podutil.Ready, Status: nodemodel.True}}}
	u, err := cl.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "web-1", Status: st, ResourceVersion: p.GetMetadata().GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetPod().GetStatus().GetPhase() != podutil.PhaseRunning || u.GetPod().GetSpec().GetNodeName() != "n1" {
		t.Fatalf("updated pod = %v", u.GetPod())
	}
	_, err = cl.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "web-1", Status: st, ResourceVersion: p.GetMetadata().GetResourceVersion()})
	wantCode(t, err, codes.Aborted, "resourceVersion")
	_, err = cl.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "nope", Status: st})
	wantCode(t, err, codes.NotFound, "")

	// Graceful delete (spec §12.2): the pod's own 30 s, the record stays
	// Terminating; asking again with the same or no grace changes nothing.
	if g := p.GetSpec().GetTerminationGracePeriodSeconds(); g != 30 {
		t.Fatalf("terminationGracePeriodSeconds defaulted to %d, want 30", g)
	}
	d, err := cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1"})
	if err != nil || d.GetGone() || d.GetPod().GetMetadata().GetDeletionTimestamp() == nil || d.GetPod().GetMetadata().GetDeletionGracePeriodSeconds() != 30 {
		t.Fatalf("graceful delete: %v %v", d, err)
	}
	g, err := cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: "web-1"})
	if err != nil || !g.GetPod().GetMetadata().GetDeletionTimestamp().AsTime().Equal(d.GetPod().GetMetadata().GetDeletionTimestamp().AsTime()) {
		t.Fatalf("get after a graceful delete: %v %v", g, err)
	}
	again, err := cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1"})
	if err != nil || again.GetGone() || again.GetPod().GetMetadata().GetResourceVersion() != g.GetPod().GetMetadata().GetResourceVersion() {
		t.Fatalf("second delete changed the pod: %v %v", again, err)
	}
	zero := int64(0)
	_, err = cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1", GracePeriodSeconds: &zero, Uid: "another"})
	wantCode(t, err, codes.Aborted, "uid")
	_, err = cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1", GracePeriodSeconds: &zero, ResourceVersion: p.GetMetadata().GetResourceVersion()})
	wantCode(t, err, codes.Aborted, "resourceVersion")
	_, err = cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1", ResourceVersion: "x"})
	wantCode(t, err, codes.InvalidArgument, "resourceVersion")
	d, err = cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1", GracePeriodSeconds: &zero, Uid: p.GetMetadata().GetUid()})
	if err != nil || !d.GetGone() || d.GetPod().GetStatus().GetPhase() != podutil.PhaseRunning {
		t.Fatalf("grace-0 delete: %v %v", d, err)
	}
	_, err = cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: "web-1"})
	wantCode(t, err, codes.NotFound, "")
	_, err = cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "web-1"})
	wantCode(t, err, codes.NotFound, "")
}

func TestPodServiceValidation(t *testing.T) {
	e := start(t, opts{})
	cl := e.pods(t, nil)
	ctx := context.Background()
	bad := func(mut func(p *podv1.Pod), field string) {
		t.Helper()
		p := newPod("default", "p", "n1", "", nil)
		mut(p)
		_, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: p})
		wantCode(t, err, codes.InvalidArgument, field)
	}
	bad(func(p *podv1.Pod) { p.Metadata.Name = "Bad_Name" }, "pod.metadata.name")
	bad(func(p *podv1.Pod) { p.Metadata.Namespace = "" }, "pod.metadata.namespace")
	bad(func(p *podv1.Pod) { p.Metadata.Namespace = "a.b" }, "pod.metadata.namespace")
	bad(func(p *podv1.Pod) { p.Metadata.Labels = map[string]string{"app": "bad value"} }, "pod.metadata.labels[app]")
	bad(func(p *podv1.Pod) { p.Spec.NodeName = "UPPER" }, "pod.spec.nodeName")
	bad(func(p *podv1.Pod) {
		p.Spec.Tolerations = []*nodev1.Toleration{{Key: "k", Operator: "In"}}
	}, "pod.spec.tolerations[0].operator")
	bad(func(p *podv1.Pod) {
		s := int64(5)
		p.Spec.Tolerations = []*nodev1.Toleration{{Key: "k", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: &s}}
	}, "pod.spec.tolerations[0].tolerationSeconds")
	bad(func(p *podv1.Pod) { p.Spec.Tolerations = []*nodev1.Toleration{{Operator: "Equal", Value: "x"}} }, "pod.spec.tolerations[0].key")
	bad(func(p *podv1.Pod) { p.Status = &podv1.PodStatus{Phase: "Sleeping"} }, "pod.status.phase")
	bad(func(p *podv1.Pod) {
		p.Status = &podv1.PodStatus{Conditions: []*podv1.PodCondition{{Type: "Ready", Status: "Maybe"}}}
	}, "pod.status.conditions[0].status")
	bad(func(p *podv1.Pod) { p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{Name: "x"}} }, "pod.metadata.ownerReferences[0].kind")
	bad(func(p *podv1.Pod) { p.Metadata.DeletionTimestamp = nodemodel.Timestamp(time.Now()) }, "pod.metadata.deletionTimestamp")
	bad(func(p *podv1.Pod) { g := int64(5); p.Metadata.DeletionGracePeriodSeconds = &g }, "pod.metadata.deletionGracePeriodSeconds")
	_, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{})
	wantCode(t, err, codes.InvalidArgument, "pod")
	_, err = cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: ""})
	wantCode(t, err, codes.InvalidArgument, "name")
	_, err = cl.ListPods(ctx, &podv1.ListPodsRequest{LabelSelector: "a in (b"})
	wantCode(t, err, codes.InvalidArgument, "labelSelector")
	_, err = cl.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "p", Status: &podv1.PodStatus{Phase: "x"}})
	wantCode(t, err, codes.InvalidArgument, "status.phase")
}

func TestWatchPodsResumes(t *testing.T) {
	e := start(t, opts{})
	cl := e.pods(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "a", "n1", "", nil)}); err != nil {
		t.Fatal(err)
	}
	w, err := cl.WatchPods(ctx, &podv1.WatchPodsRequest{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Recv()
	if err != nil || ev.GetType() != "ADDED" || ev.GetPod().GetMetadata().GetName() != "a" {
		t.Fatalf("first event %v %v", ev, err)
	}
	if _, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "elsewhere", "n2", "", nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "b", "n1", "", nil)}); err != nil {
		t.Fatal(err)
	}
	ev, err = w.Recv()
	if err != nil || ev.GetType() != "ADDED" || ev.GetPod().GetMetadata().GetName() != "b" {
		t.Fatalf("second event %v %v (the other node's pod must be filtered out)", ev, err)
	}
	rv := ev.GetResourceVersion()
	zero := int64(0) // a forced delete: removed at once
	if _, err := cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "a", GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// A new watch resumes after rv and sees only the deletion.
	w2, err := cl.WatchPods(ctx, &podv1.WatchPodsRequest{NodeName: "n1", ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = w2.Recv()
	if err != nil || ev.GetType() != "DELETED" || ev.GetPod().GetMetadata().GetName() != "a" {
		t.Fatalf("resumed event %v %v", ev, err)
	}
	cancel()
	for {
		if _, err := w.Recv(); err != nil {
			if err != io.EOF && !strings.Contains(err.Error(), "Canceled") {
				t.Logf("watch ended: %v", err)
			}
			break
		}
	}
}

func TestPodServiceAuthorization(t *testing.T) {
	e := start(t, opts{token: "s3cret"})
	cl := e.pods(t, nil)
	ctx := context.Background()
	_, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "a", "n1", "", nil)})
	wantCode(t, err, codes.PermissionDenied, "")
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if _, err := cl.CreatePod(good, &podv1.CreatePodRequest{Pod: newPod("default", "a", "n1", "", nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListPods(ctx, &podv1.ListPodsRequest{}); err != nil {
		t.Fatalf("read without token: %v", err)
	}
	_, err = cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: "default", Name: "a"})
	wantCode(t, err, codes.PermissionDenied, "")

	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Nodes: []string{"n1"}, Operators: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	e2 := start(t, opts{tls: tlsconfig.Config{CertFile: p("server.crt"), KeyFile: p("server.key"), CAFile: p("ca.crt")}})
	client := func(name string) podv1.PodServiceClient {
		tc, err := tlsconfig.Config{CertFile: p(name + ".crt"), KeyFile: p(name + ".key"), CAFile: p("ca.crt"), ServerName: "localhost"}.Client()
		if err != nil {
			t.Fatal(err)
		}
		return e2.pods(t, credentials.NewTLS(tc))
	}
	_, err = client("node-n1").CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "a", "n1", "", nil)})
	wantCode(t, err, codes.PermissionDenied, "")
	if _, err := client("operator-alice").CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "a", "n1", "", nil)}); err != nil {
		t.Fatalf("operator create: %v", err)
	}
	_, err = client("server").UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: "default", Name: "a", Status: &podv1.PodStatus{}})
	wantCode(t, err, codes.PermissionDenied, "")
}

// TestUpdatePodMetadata: UpdatePod replaces labels and annotations and
// keeps the rest; a bad label is InvalidArgument naming metadata.labels, a
// stale resource version Aborted, and neither changes the pod.
func TestUpdatePodMetadata(t *testing.T) {
	e := start(t, opts{})
	cl := e.pods(t, nil)
	ctx := context.Background()
	r, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: newPod("default", "m", "n1", "", map[string]string{"app": "web"})})
	if err != nil {
		t.Fatal(err)
	}
	first := r.GetPod().GetMetadata().GetResourceVersion()
	u, err := cl.UpdatePod(ctx, &podv1.UpdatePodRequest{Namespace: "default", Name: "m", Labels: map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{"note": "hello"}, ResourceVersion: first})
	if err != nil {
		t.Fatal(err)
	}
	p := u.GetPod()
	if p.GetMetadata().GetLabels()["tier"] != "front" || p.GetMetadata().GetAnnotations()["note"] != "hello" || p.GetSpec().GetNodeName() != "n1" ||
		p.GetMetadata().GetUid() != r.GetPod().GetMetadata().GetUid() || p.GetMetadata().GetResourceVersion() == first {
		t.Fatalf("after UpdatePod: %v", p)
	}
	_, err = cl.UpdatePod(ctx, &podv1.UpdatePodRequest{Namespace: "default", Name: "m", Labels: map[string]string{"app": "stale"}, ResourceVersion: first})
	wantCode(t, err, codes.Aborted, "resourceVersion")
	_, err = cl.UpdatePod(ctx, &podv1.UpdatePodRequest{Namespace: "default", Name: "m", Labels: map[string]string{"bad key!": "x"}})
	wantCode(t, err, codes.InvalidArgument, "metadata.labels[bad key!]")
	_, err = cl.UpdatePod(ctx, &podv1.UpdatePodRequest{Namespace: "default", Name: "absent"})
	wantCode(t, err, codes.NotFound, "")
	g, err := cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: "default", Name: "m"})
	if err != nil || g.GetPod().GetMetadata().GetResourceVersion() != p.GetMetadata().GetResourceVersion() {
		t.Fatalf("refused updates changed the pod: %v %v", g, err)
	}
}
