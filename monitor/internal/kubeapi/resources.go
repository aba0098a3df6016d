// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/base64"
	"math"
	"sort"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	npappsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	nppolicyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/convert"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/selectors"
)

// object is one served object with what selectors and tables need.
type object struct {
	obj    runtime.Object
	meta   *metav1.ObjectMeta
	fields fields.Set
}

// page is one list response.
type page struct {
	items []object
	rv    string
	cont  string
}

// resource is one served collection. list honours limit and cont when the
// backend pages; watch streams changes after rv (nil: not watchable).
type resource struct {
	name, kind, listKind, gv string
	namespaced               bool
	list                     func(ctx context.Context, ns string, sel selectors.Selectors, limit int, cont string) (page, error)
	get                      func(ctx context.Context, ns, name string) (object, error)
	watch                    func(ctx context.Context, ns, rv string, sel selectors.Selectors, send func(typ string, o object, rv string) error) error
	// snapshot, for a resource without a change history (leases, events),
	// is what its watch compares over time (poll.go).
	snapshot func(ctx context.Context, ns string) (snapshot, error)
	// fromSnapshot converts a snapshot's source object.
	fromSnapshot func(src any) (object, error)
}

func (s *Server) resources() map[string]*resource {
	rs := []*resource{
		{name: "nodes", kind: "Node", gv: "v1", list: s.listNodes, get: s.getNode, watch: s.watchNodes},
		{name: "pods", kind: "Pod", gv: "v1", namespaced: true, list: s.listPods, get: s.getPod, watch: s.watchPods},
		{name: "events", kind: "Event", gv: "v1", namespaced: true, list: s.listEvents, snapshot: s.eventSnapshot, fromSnapshot: eventFromSnapshot},
		{name: "namespaces", kind: "Namespace", gv: "v1", list: s.listNamespaces},
		{name: "leases", kind: "Lease", gv: "coordination.k8s.io/v1", namespaced: true, list: s.listLeases, get: s.getLease, snapshot: s.leaseSnapshot, fromSnapshot: leaseFromSnapshot},
		{name: "poddisruptionbudgets", kind: "PodDisruptionBudget", gv: "policy/v1", namespaced: true, list: s.listBudgets, get: s.getBudget},
		{name: "daemonsets", kind: "DaemonSet", gv: "apps/v1", namespaced: true, list: s.listWorkloads(npappsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET), get: s.getWorkload(npappsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET)},
		{name: "replicasets", kind: "ReplicaSet", gv: "apps/v1", namespaced: true, list: s.listWorkloads(npappsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET), get: s.getWorkload(npappsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET)},
		{name: "statefulsets", kind: "StatefulSet", gv: "apps/v1", namespaced: true, list: s.listWorkloads(npappsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET), get: s.getWorkload(npappsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET)},
	}
	out := make(map[string]*resource, len(rs))
	for _, r := range rs {
		r.listKind = r.kind + "List"
		out[r.gv+"/"+r.name] = r
	}
	return out
}

// stream adapts a gRPC server stream to an in-process call: the service's
// watch code sends to it as to a client.
type stream[T any] struct {
	grpc.ServerStream
	ctx  context.Context
	send func(*T) error
}

func (s stream[T]) Context() context.Context { return s.ctx }
func (s stream[T]) Send(m *T) error          { return s.send(m) }

func nodeObject(n *nodev1.Node) (object, error) {
	k, err := convert.Node(n)
	if err != nil {
		return object{}, err
	}
	return object{obj: k, meta: &k.ObjectMeta, fields: selectors.NodeFields(k)}, nil
}

func (s *Server) listNodes(ctx context.Context, _ string, sel selectors.Selectors, limit int, cont string) (page, error) {
	if name, ok := sel.RequiredField("metadata.name"); ok {
		o, err := s.getNode(ctx, "", name)
		if err != nil {
			if ae, ok := err.(*apiError); ok && ae.st.Code == 404 {
				return page{rv: s.nodesVersion(ctx)}, nil
			}
			return page{}, err
		}
		p := page{rv: s.nodesVersion(ctx)}
		if sel.Matches(o.meta.Labels, o.fields) {
			p.items = []object{o}
		}
		return p, nil
	}
	req := &nodev1.ListNodesRequest{LabelSelector: sel.LabelString(), PageSize: int32(limit), PageToken: cont}
	if v, ok := sel.RequiredField("spec.unschedulable"); ok {
		b := v == "true"
		req.Unschedulable = &b
	}
	return pages(sel, limit, func(token string) ([]*nodev1.Node, string, string, error) {
		req.PageToken = token
		resp, err := s.b.Nodes.ListNodes(ctx, req)
		if err != nil {
			return nil, "", "", fromGRPC("nodes", "", err)
		}
		return resp.GetNodes(), resp.GetResourceVersion(), resp.GetNextPageToken(), nil
	}, cont, nodeObject)
}

// pages runs a paged list of the gRPC API from token cont: the one page
// asked for when the client set a limit, else every page (kubectl without
// --chunk-size), keeping the objects the selector matches (field
// selectors the gRPC request cannot carry are applied here).
func pages[T any](sel selectors.Selectors, limit int, fetch func(token string) (items []T, rv, next string, err error), cont string, conv func(T) (object, error)) (page, error) {
	var p page
	for token := cont; ; token = p.cont {
		items, rv, next, err := fetch(token)
		if err != nil {
			return page{}, err
		}
		p.rv, p.cont = rv, next
		for _, it := range items {
			o, err := conv(it)
			if err != nil {
				return page{}, err
			}
			if sel.Matches(o.meta.Labels, o.fields) {
				p.items = append(p.items, o)
			}
		}
		if limit > 0 || p.cont == "" {
			return p, nil
		}
	}
}

// nodesVersion is the version of the node list now (a one-node page).
func (s *Server) nodesVersion(ctx context.Context) string {
	resp, err := s.b.Nodes.ListNodes(ctx, &nodev1.ListNodesRequest{PageSize: 1})
	if err != nil {
		return ""
	}
	return resp.GetResourceVersion()
}

func (s *Server) getNode(ctx context.Context, _, name string) (object, error) {
	resp, err := s.b.Nodes.GetNode(ctx, &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return object{}, notFoundOr("nodes", name, err)
	}
	return nodeObject(resp.GetNode())
}

func notFoundOr(resource, name string, err error) error {
	ae := fromGRPC(resource, name, err)
	if ae.st.Code == 404 || ae.st.Code == 422 {
		return notFound(resource, name)
	}
	return ae
}

func (s *Server) watchNodes(ctx context.Context, _ string, rv string, _ selectors.Selectors, send func(string, object, string) error) error {
	err := s.b.Nodes.WatchNodes(&nodev1.WatchNodesRequest{ResourceVersion: rv}, stream[nodev1.WatchNodesResponse]{ctx: ctx, send: func(r *nodev1.WatchNodesResponse) error {
		o, err := nodeObject(r.GetNode())
		if err != nil {
			return err
		}
		return send(r.GetType(), o, r.GetResourceVersion())
	}})
	if err != nil {
		return fromGRPC("nodes", "", err)
	}
	return nil
}

func podObject(p *podv1.Pod) (object, error) {
	k, err := convert.Pod(p)
	if err != nil {
		return object{}, err
	}
	return object{obj: k, meta: &k.ObjectMeta, fields: selectors.PodFields(k)}, nil
}

func (s *Server) listPods(ctx context.Context, ns string, sel selectors.Selectors, limit int, cont string) (page, error) {
	node, _ := sel.RequiredField("spec.nodeName")
	req := &podv1.ListPodsRequest{Namespace: ns, NodeName: node, LabelSelector: sel.LabelString(), PageSize: int32(limit), PageToken: cont}
	return pages(sel, limit, func(token string) ([]*podv1.Pod, string, string, error) {
		req.PageToken = token
		resp, err := s.b.Pods.ListPods(ctx, req)
		if err != nil {
			return nil, "", "", fromGRPC("pods", "", err)
		}
		return resp.GetPods(), resp.GetResourceVersion(), resp.GetNextPageToken(), nil
	}, cont, podObject)
}

func (s *Server) getPod(ctx context.Context, ns, name string) (object, error) {
	resp, err := s.b.Pods.GetPod(ctx, &podv1.GetPodRequest{Namespace: ns, Name: name})
	if err != nil {
		return object{}, notFoundOr("pods", name, err)
	}
	return podObject(resp.GetPod())
}

func (s *Server) watchPods(ctx context.Context, ns, rv string, sel selectors.Selectors, send func(string, object, string) error) error {
	node, _ := sel.RequiredField("spec.nodeName")
	err := s.b.Pods.WatchPods(&podv1.WatchPodsRequest{Namespace: ns, NodeName: node, ResourceVersion: rv}, stream[podv1.WatchPodsResponse]{ctx: ctx, send: func(r *podv1.WatchPodsResponse) error {
		o, err := podObject(r.GetPod())
		if err != nil {
			return err
		}
		return send(r.GetType(), o, r.GetResourceVersion())
	}})
	if err != nil {
		return fromGRPC("pods", "", err)
	}
	return nil
}

func (s *Server) listEvents(ctx context.Context, ns string, sel selectors.Selectors, _ int, _ string) (page, error) {
	req := &nodev1.ListEventsRequest{Limit: math.MaxInt32}
	if name, ok := sel.RequiredField("involvedObject.name"); ok {
		req.Name = name
	}
	resp, err := s.b.Nodes.ListEvents(ctx, req)
	if err != nil {
		return page{}, fromGRPC("events", "", err)
	}
	var p page
	evs := resp.GetEvents()
	// Oldest first, as kube-apiserver lists them (by name, which starts
	// with the object and the time); the service answers newest first.
	for i := len(evs) - 1; i >= 0; i-- {
		k, err := convert.Event(evs[i])
		if err != nil {
			return page{}, err
		}
		if ns != "" && k.Namespace != ns {
			continue
		}
		o := object{obj: k, meta: &k.ObjectMeta, fields: selectors.EventFields(k)}
		if sel.Matches(k.Labels, o.fields) {
			p.items = append(p.items, o)
		}
	}
	p.rv = s.nodesVersion(ctx)
	return p, nil
}

// Namespaces that always exist, as in a Kubernetes cluster.
var fixedNamespaces = []string{"default", "kube-node-lease", "kube-system"}

func (s *Server) listNamespaces(ctx context.Context, _ string, sel selectors.Selectors, _ int, _ string) (page, error) {
	seen := map[string]bool{}
	for _, n := range fixedNamespaces {
		seen[n] = true
	}
	pods, err := s.listPods(ctx, "", selectors.Selectors{}, 0, "")
	if err != nil {
		return page{}, err
	}
	for _, p := range pods.items {
		seen[p.meta.Namespace] = true
	}
	p := page{rv: pods.rv}
	for _, n := range selectors.Sorted(seen) {
		k := convert.Namespace(n, time.Time{})
		o := object{obj: k, meta: &k.ObjectMeta, fields: selectors.MetaFields(n, "")}
		if sel.Matches(k.Labels, o.fields) {
			p.items = append(p.items, o)
		}
	}
	return p, nil
}

func (s *Server) getLease(ctx context.Context, ns, name string) (object, error) {
	if ns != convert.NodeLeaseNamespace {
		return object{}, notFound("leases.coordination.k8s.io", name)
	}
	resp, err := s.b.Nodes.GetLease(ctx, &nodev1.GetLeaseRequest{Name: name})
	if err != nil {
		return object{}, notFoundOr("leases.coordination.k8s.io", name, err)
	}
	l := api.NodeLease{Name: name}
	if n, err := s.b.Nodes.GetNode(ctx, &nodev1.GetNodeRequest{Name: name}); err == nil {
		l.NodeCreated = n.GetNode().GetMetadata().GetCreationTimestamp().AsTime()
	}
	return leaseObject(&l, resp)
}

func leaseObject(l *api.NodeLease, resp *nodev1.GetLeaseResponse) (object, error) {
	k, err := convert.Lease(l.Name, resp)
	if err != nil {
		return object{}, err
	}
	if k.CreationTimestamp.IsZero() {
		k.CreationTimestamp = metav1.Time{Time: l.NodeCreated}
	}
	return object{obj: k, meta: &k.ObjectMeta, fields: selectors.LeaseFields(k)}, nil
}

// listLeases reads the leases in one pass over what the monitor holds
// (NodeService.Leases), paged by node name like nodes.
func (s *Server) listLeases(ctx context.Context, ns string, sel selectors.Selectors, limit int, cont string) (page, error) {
	if ns != "" && ns != convert.NodeLeaseNamespace {
		return page{rv: s.nodesVersion(ctx)}, nil
	}
	after := ""
	if cont != "" {
		b, err := base64.RawURLEncoding.DecodeString(cont)
		if err != nil || len(b) == 0 {
			return page{}, invalid("continue: not a token returned by a list of leases")
		}
		after = string(b)
	}
	leases, rv, next := s.b.Nodes.Leases(after, limit)
	p := page{rv: rv}
	if next != "" {
		p.cont = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	for i := range leases {
		o, err := leaseObject(&leases[i], leases[i].Response())
		if err != nil {
			return page{}, err
		}
		if sel.Matches(o.meta.Labels, o.fields) {
			p.items = append(p.items, o)
		}
	}
	return p, nil
}

func budgetObject(b *nppolicyv1.PodDisruptionBudget) (object, error) {
	k, err := convert.PodDisruptionBudget(b)
	if err != nil {
		return object{}, err
	}
	return object{obj: k, meta: &k.ObjectMeta, fields: selectors.MetaFields(k.Name, k.Namespace)}, nil
}

func (s *Server) listBudgets(ctx context.Context, ns string, sel selectors.Selectors, _ int, _ string) (page, error) {
	req := &nppolicyv1.ListPodDisruptionBudgetsRequest{Namespace: ns}
	var p page
	for {
		resp, err := s.b.Budgets.ListPodDisruptionBudgets(ctx, req)
		if err != nil {
			return page{}, fromGRPC("poddisruptionbudgets.policy", "", err)
		}
		p.rv = resp.GetResourceVersion()
		for _, b := range resp.GetPodDisruptionBudgets() {
			o, err := budgetObject(b)
			if err != nil {
				return page{}, err
			}
			if sel.Matches(o.meta.Labels, o.fields) {
				p.items = append(p.items, o)
			}
		}
		if resp.GetNextPageToken() == "" {
			return p, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

func (s *Server) getBudget(ctx context.Context, ns, name string) (object, error) {
	resp, err := s.b.Budgets.GetPodDisruptionBudget(ctx, &nppolicyv1.GetPodDisruptionBudgetRequest{Namespace: ns, Name: name})
	if err != nil {
		return object{}, notFoundOr("poddisruptionbudgets.policy", name, err)
	}
	return budgetObject(resp.GetPodDisruptionBudget())
}

func workloadObject(w *npappsv1.Workload) (object, error) {
	k, err := convert.Workload(w)
	if err != nil {
		return object{}, err
	}
	md := k.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
	return object{obj: k.(runtime.Object), meta: md, fields: selectors.MetaFields(md.Name, md.Namespace)}, nil
}

func (s *Server) listWorkloads(kind npappsv1.WorkloadKind) func(context.Context, string, selectors.Selectors, int, string) (page, error) {
	return func(ctx context.Context, ns string, sel selectors.Selectors, _ int, _ string) (page, error) {
		req := &npappsv1.ListWorkloadsRequest{Kind: kind, Namespace: ns, LabelSelector: sel.LabelString()}
		var p page
		for {
			resp, err := s.b.Workloads.ListWorkloads(ctx, req)
			if err != nil {
				return page{}, fromGRPC("workloads", "", err)
			}
			p.rv = resp.GetResourceVersion()
			for _, w := range resp.GetWorkloads() {
				o, err := workloadObject(w)
				if err != nil {
					return page{}, err
				}
				if sel.Matches(o.meta.Labels, o.fields) {
					p.items = append(p.items, o)
				}
			}
			if resp.GetNextPageToken() == "" {
				sort.SliceStable(p.items, func(i, j int) bool {
					a, b := p.items[i].meta, p.items[j].meta
					return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
				})
				return p, nil
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
}

func (s *Server) getWorkload(kind npappsv1.WorkloadKind) func(context.Context, string, string) (object, error) {
	return func(ctx context.Context, ns, name string) (object, error) {
		resp, err := s.b.Workloads.GetWorkload(ctx, &npappsv1.GetWorkloadRequest{Kind: kind, Namespace: ns, Name: name})
		if err != nil {
			return object{}, notFoundOr(workloadResource(kind), name, err)
		}
		return workloadObject(resp.GetWorkload())
	}
}

func workloadResource(k npappsv1.WorkloadKind) string {
	switch k {
	case npappsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET:
		return "daemonsets.apps"
	case npappsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET:
		return "statefulsets.apps"
	}
	return "replicasets.apps"
}
