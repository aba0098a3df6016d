// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	npappsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	nppolicyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/convert"
)

// Leases and events have no change history to follow: most lease renewals
// are never stored (they arrive on the collectors' live feeds), and events
// are kept in the cache without one. Their watches compare snapshots of
// what the monitor holds instead, every pollEvery: a cheap fingerprint per
// object (the stored record's pointer, which the cache replaces on every
// change, and the newest renewal; an event's count, last time and message)
// finds what changed, and only that is converted and sent.
var pollEvery = time.Second

// fingerprint tells two states of an object apart cheaply.
type fingerprint struct {
	ptr   any
	n     int64
	count int32
	text  string
}

type polled struct {
	fp  fingerprint
	src any
}

type snapshot struct {
	rv    string
	items map[string]polled
}

// pollFeed follows snapshots from base, sending ADDED for a new object,
// MODIFIED for a changed fingerprint and DELETED (last state) for one gone.
func pollFeed(base snapshot, take func(ctx context.Context) (snapshot, error), conv func(any) (runtime.Object, error)) follow {
	return func(ctx context.Context, _, _ string, send func(watch.EventType, runtime.Object, string) bool) error {
		prev := base
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			cur, err := take(ctx)
			if err != nil {
				return err
			}
			emit := func(typ watch.EventType, src any) bool {
				o, err := conv(src)
				return err == nil && send(typ, o, cur.rv)
			}
			for _, k := range sortedKeys(cur.items) {
				p := cur.items[k]
				old, ok := prev.items[k]
				switch {
				case !ok && !emit(watch.Added, p.src):
					return nil
				case ok && old.fp != p.fp && !emit(watch.Modified, p.src):
					return nil
				}
			}
			for _, k := range sortedKeys(prev.items) {
				if _, ok := cur.items[k]; !ok && !emit(watch.Deleted, prev.items[k].src) {
					return nil
				}
			}
			prev = cur
		}
	}
}

func sortedKeys(m map[string]polled) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func unixNano(t *timestamppb.Timestamp) int64 {
	if t == nil {
		return 0
	}
	return t.AsTime().UnixNano()
}

// leases serves coordination.k8s.io/v1 leases in kube-node-lease: one per
// node, renewTime the newest the monitor knows (stored checkpoint or live
// feed).
type leases struct {
	resource
	svc *api.Server
}

var _ rest.Watcher = (*leases)(nil)

func newLeases(b Backends, n *nodes) *leases {
	s := &leases{svc: b.Nodes}
	s.resource = resource{gr: coordinationv1.Resource("leases"), kind: "Lease", singular: "lease", namespaced: true,
		newObj: func() runtime.Object { return &coordinationv1.Lease{} }, newList: func() runtime.Object { return &coordinationv1.LeaseList{} },
		now: b.now, get: s.getLease,
		fetch: func(ctx context.Context, ns string, _ labels.Selector, _ fields.Selector, limit int64, cont string) ([]runtime.Object, string, string, error) {
			if ns != "" && ns != convert.NodeLeaseNamespace {
				return nil, n.version(ctx), "", nil
			}
			after := ""
			if cont != "" {
				b, err := base64.RawURLEncoding.DecodeString(cont)
				if err != nil || len(b) == 0 {
					return nil, "", "", apierrors.NewResourceExpired("the provided continue parameter is not valid: not a token returned by a list of leases")
				}
				after = string(b)
			}
			ls, rv, next := s.svc.Leases(after, int(min(limit, 1<<30)))
			out := make([]runtime.Object, 0, len(ls))
			for i := range ls {
				o, err := leaseObject(&ls[i], ls[i].Response())
				if err != nil {
					return nil, "", "", err
				}
				out = append(out, o)
			}
			if next != "" {
				next = base64.RawURLEncoding.EncodeToString([]byte(next))
			}
			return out, rv, next, nil
		}}
	return s
}

func (s *leases) getLease(ctx context.Context, ns, name string) (runtime.Object, error) {
	if ns != convert.NodeLeaseNamespace {
		return nil, s.notFound(name)
	}
	resp, err := s.svc.GetLease(ctx, &nodev1.GetLeaseRequest{Name: name})
	if err != nil {
		return nil, notFoundOr(s.gr, s.kind, name, err)
	}
	l := api.NodeLease{Name: name}
	if n, err := s.svc.GetNode(ctx, &nodev1.GetNodeRequest{Name: name}); err == nil {
		l.NodeCreated = n.GetNode().GetMetadata().GetCreationTimestamp().AsTime()
	}
	return leaseObject(&l, resp)
}

func leaseObject(l *api.NodeLease, resp *nodev1.GetLeaseResponse) (runtime.Object, error) {
	k, err := convert.Lease(l.Name, resp)
	if err != nil {
		return nil, err
	}
	if k.CreationTimestamp.IsZero() {
		k.CreationTimestamp = metav1.Time{Time: l.NodeCreated}
	}
	return k, nil
}

func (s *leases) snapshot(ns string) snapshot {
	if ns != "" && ns != convert.NodeLeaseNamespace {
		return snapshot{}
	}
	ls, rv, _ := s.svc.Leases("", 0)
	sn := snapshot{rv: rv, items: make(map[string]polled, len(ls))}
	for i := range ls {
		l := &ls[i]
		fp := fingerprint{ptr: l.Stored}
		if !l.Live.RenewTime.IsZero() {
			fp.n = l.Live.RenewTime.UnixNano()
		}
		sn.items[l.Name] = polled{fp: fp, src: l}
	}
	return sn
}

// Watch implements rest.Watcher by comparing snapshots.
func (s *leases) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	// Taken before the list, so that a change between the two is sent
	// again rather than lost.
	base := s.snapshot(ns)
	return s.startWatch(ctx, opts, pollFeed(base, func(context.Context) (snapshot, error) { return s.snapshot(ns), nil },
		func(src any) (runtime.Object, error) { l := src.(*api.NodeLease); return leaseObject(l, l.Response()) }))
}

// events serves core/v1 events (the monitor's node events, in namespace
// default for cluster-scoped objects, as in Kubernetes).
type events struct {
	resource
	svc *api.Server
	n   *nodes
}

var _ rest.Watcher = (*events)(nil)

func eventFields(o runtime.Object) fields.Set {
	e := o.(*corev1.Event)
	io := e.InvolvedObject
	return fields.Set{"metadata.name": e.Name, "metadata.namespace": e.Namespace,
		"involvedObject.kind": io.Kind, "involvedObject.namespace": io.Namespace, "involvedObject.name": io.Name,
		"involvedObject.uid": string(io.UID), "involvedObject.apiVersion": io.APIVersion,
		"involvedObject.resourceVersion": io.ResourceVersion, "involvedObject.fieldPath": io.FieldPath,
		"reason": e.Reason, "reportingComponent": e.ReportingController, "source": e.Source.Component, "type": e.Type}
}

func newEvents(b Backends, n *nodes) *events {
	s := &events{svc: b.Nodes, n: n}
	s.resource = resource{gr: corev1.Resource("events"), kind: "Event", singular: "event", namespaced: true, short: []string{"ev"},
		newObj: func() runtime.Object { return &corev1.Event{} }, newList: func() runtime.Object { return &corev1.EventList{} },
		fields: eventFields, now: b.now,
		fetch: func(ctx context.Context, ns string, _ labels.Selector, f fields.Selector, _ int64, _ string) ([]runtime.Object, string, string, error) {
			req := &nodev1.ListEventsRequest{Limit: math.MaxInt32}
			if name, ok := f.RequiresExactMatch("involvedObject.name"); ok {
				req.Name = name
			}
			resp, err := s.svc.ListEvents(ctx, req)
			if err != nil {
				return nil, "", "", statusError(s.gr, s.kind, "", err)
			}
			evs := resp.GetEvents()
			var out []runtime.Object
			// Oldest first, as kube-apiserver lists them; the service
			// answers newest first.
			for i := len(evs) - 1; i >= 0; i-- {
				k, err := convert.Event(evs[i])
				if err != nil {
					return nil, "", "", err
				}
				if ns == "" || k.Namespace == ns {
					out = append(out, k)
				}
			}
			return out, n.version(ctx), "", nil
		}}
	return s
}

func (s *events) snapshot(ctx context.Context, ns string) (snapshot, error) {
	rv := s.n.version(ctx)
	resp, err := s.svc.ListEvents(ctx, &nodev1.ListEventsRequest{Limit: math.MaxInt32})
	if err != nil {
		return snapshot{}, statusError(s.gr, s.kind, "", err)
	}
	sn := snapshot{rv: rv, items: make(map[string]polled, len(resp.GetEvents()))}
	for _, e := range resp.GetEvents() {
		evNS := e.GetMetadata().GetNamespace()
		if evNS == "" {
			evNS = convert.EventNamespace
		}
		if ns != "" && evNS != ns {
			continue
		}
		sn.items[evNS+"/"+e.GetMetadata().GetName()] = polled{
			fp:  fingerprint{n: unixNano(e.GetLastTimestamp()), count: e.GetCount(), text: e.GetType() + "/" + e.GetMessage()},
			src: e,
		}
	}
	return sn, nil
}

// Watch implements rest.Watcher by comparing snapshots.
func (s *events) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	base, err := s.snapshot(ctx, ns)
	if err != nil {
		return nil, err
	}
	return s.startWatch(ctx, opts, pollFeed(base, func(ctx context.Context) (snapshot, error) { return s.snapshot(ctx, ns) },
		func(src any) (runtime.Object, error) { return convert.Event(src.(*nodev1.Event)) }))
}

// Namespaces that always exist, as in a Kubernetes cluster.
var fixedNamespaces = []string{"default", "kube-node-lease", "kube-system"}

// newNamespaces serves core/v1 namespaces: the fixed ones and every
// namespace a pod is in.
func newNamespaces(b Backends, p *pods) *resource {
	return &resource{gr: corev1.Resource("namespaces"), kind: "Namespace", singular: "namespace", short: []string{"ns"},
		newObj: func() runtime.Object { return &corev1.Namespace{} }, newList: func() runtime.Object { return &corev1.NamespaceList{} },
		now: b.now,
		fetch: func(ctx context.Context, _ string, _ labels.Selector, _ fields.Selector, _ int64, _ string) ([]runtime.Object, string, string, error) {
			seen := map[string]bool{}
			for _, n := range fixedNamespaces {
				seen[n] = true
			}
			ps, rv, err := p.all(ctx, "", labels.Everything(), fields.Everything())
			if err != nil {
				return nil, "", "", err
			}
			for _, o := range ps {
				seen[o.(*corev1.Pod).Namespace] = true
			}
			names := make([]string, 0, len(seen))
			for n := range seen {
				names = append(names, n)
			}
			sort.Strings(names)
			out := make([]runtime.Object, len(names))
			for i, n := range names {
				out[i] = convert.Namespace(n, time.Time{})
			}
			return out, rv, "", nil
		}}
}

// newServices serves core/v1 services: none. kubectl cluster-info lists
// the cluster services of kube-system and prints the control plane's
// address before them.
func newServices(b Backends, n *nodes) *resource {
	return &resource{gr: corev1.Resource("services"), kind: "Service", singular: "service", namespaced: true, short: []string{"svc"}, categories: []string{"all"},
		newObj: func() runtime.Object { return &corev1.Service{} }, newList: func() runtime.Object { return &corev1.ServiceList{} },
		now: b.now,
		fetch: func(ctx context.Context, _ string, _ labels.Selector, _ fields.Selector, _ int64, _ string) ([]runtime.Object, string, string, error) {
			return nil, n.version(ctx), "", nil
		}}
}

// budgets serves policy/v1 PodDisruptionBudgets (DisruptionBudgetService).
type budgets struct {
	resource
	svc nppolicyv1.DisruptionBudgetServiceServer
}

var (
	_ rest.Creater         = (*budgets)(nil)
	_ rest.GracefulDeleter = (*budgets)(nil)
)

func newBudgets(b Backends) *budgets {
	s := &budgets{svc: b.Budgets}
	s.resource = resource{gr: policyv1.Resource("poddisruptionbudgets"), kind: "PodDisruptionBudget", singular: "poddisruptionbudget", namespaced: true, short: []string{"pdb"},
		newObj: func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, newList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		now: b.now,
		get: func(ctx context.Context, ns, name string) (runtime.Object, error) {
			resp, err := s.svc.GetPodDisruptionBudget(ctx, &nppolicyv1.GetPodDisruptionBudgetRequest{Namespace: ns, Name: name})
			if err != nil {
				return nil, notFoundOr(s.gr, s.kind, name, err)
			}
			return convert.PodDisruptionBudget(resp.GetPodDisruptionBudget())
		},
		fetch: func(ctx context.Context, ns string, _ labels.Selector, _ fields.Selector, _ int64, cont string) ([]runtime.Object, string, string, error) {
			resp, err := s.svc.ListPodDisruptionBudgets(ctx, &nppolicyv1.ListPodDisruptionBudgetsRequest{Namespace: ns, PageToken: cont})
			if err != nil {
				return nil, "", "", continueError(cont, statusError(s.gr, s.kind, "", err))
			}
			out, err := convertAll(resp.GetPodDisruptionBudgets(), convert.PodDisruptionBudget)
			return out, resp.GetResourceVersion(), resp.GetNextPageToken(), err
		}}
	return s
}

// Create implements rest.Creater.
func (s *budgets) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a PodDisruptionBudget: %T", obj))
	}
	if err := admit(ctx, b, createValidation); err != nil {
		return nil, err
	}
	nb := &nppolicyv1.PodDisruptionBudget{}
	if err := convert.FromKube(budgetJSON(b), nb); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(opts.DryRun) > 0 {
		return b, nil
	}
	resp, err := s.svc.CreatePodDisruptionBudget(ctx, &nppolicyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: nb})
	if err != nil {
		return nil, statusError(s.gr, s.kind, b.Name, err)
	}
	return convert.PodDisruptionBudget(resp.GetPodDisruptionBudget())
}

// budgetJSON is b as nodepulse's message reads it: int-or-string fields
// are messages there ({"intValue":n} or {"strValue":"50%"}).
func budgetJSON(b *policyv1.PodDisruptionBudget) map[string]any {
	u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if sp, ok := u["spec"].(map[string]any); ok {
		for _, k := range []string{"minAvailable", "maxUnavailable"} {
			switch v := sp[k].(type) {
			case string:
				sp[k] = map[string]any{"strValue": v}
			case int64:
				sp[k] = map[string]any{"intValue": v}
			}
		}
	}
	return u
}

// Delete implements rest.GracefulDeleter.
func (s *budgets) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	cur, err := s.Get(ctx, name, nil)
	if err != nil {
		return nil, false, err
	}
	if dry, err := admitDelete(ctx, s.gr, name, cur, deleteValidation, opts); err != nil {
		return nil, false, err
	} else if dry {
		return cur, true, nil
	}
	if _, err := s.svc.DeletePodDisruptionBudget(ctx, &nppolicyv1.DeletePodDisruptionBudgetRequest{Namespace: ns, Name: name}); err != nil {
		return nil, false, notFoundOr(s.gr, s.kind, name, err)
	}
	return cur, true, nil
}

// admit defaults the namespace from the path and runs admission.
func admit(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if ns := genericapirequest.NamespaceValue(ctx); m.GetNamespace() == "" {
		m.SetNamespace(ns)
	}
	if createValidation != nil {
		return createValidation(ctx, obj)
	}
	return nil
}

// workloads serves the apps/v1 owners of one kind (WorkloadService).
type workloads struct {
	resource
	svc npappsv1.WorkloadServiceServer
	wk  npappsv1.WorkloadKind
}

var (
	_ rest.Creater         = (*workloads)(nil)
	_ rest.GracefulDeleter = (*workloads)(nil)
)

func newWorkloads(b Backends, sc *runtime.Scheme, wk npappsv1.WorkloadKind, kind, resourceName string, short []string) *workloads {
	s := &workloads{svc: b.Workloads, wk: wk}
	gr := appsv1.Resource(resourceName)
	s.resource = resource{gr: gr, kind: kind, singular: kindLower(kind), namespaced: true, short: short, categories: []string{"all"},
		now: b.now,
		newObj: func() runtime.Object {
			o, _ := sc.New(appsv1.SchemeGroupVersion.WithKind(kind))
			return o
		},
		newList: func() runtime.Object {
			o, _ := sc.New(appsv1.SchemeGroupVersion.WithKind(kind + "List"))
			return o
		},
		get: func(ctx context.Context, ns, name string) (runtime.Object, error) {
			resp, err := s.svc.GetWorkload(ctx, &npappsv1.GetWorkloadRequest{Kind: wk, Namespace: ns, Name: name})
			if err != nil {
				return nil, notFoundOr(gr, kind, name, err)
			}
			return workloadObject(resp.GetWorkload())
		},
		fetch: func(ctx context.Context, ns string, l labels.Selector, _ fields.Selector, _ int64, cont string) ([]runtime.Object, string, string, error) {
			req := &npappsv1.ListWorkloadsRequest{Kind: wk, Namespace: ns, PageToken: cont}
			if l != nil && !l.Empty() {
				req.LabelSelector = l.String()
			}
			resp, err := s.svc.ListWorkloads(ctx, req)
			if err != nil {
				return nil, "", "", continueError(cont, statusError(gr, kind, "", err))
			}
			out, err := convertAll(resp.GetWorkloads(), workloadObject)
			return out, resp.GetResourceVersion(), resp.GetNextPageToken(), err
		}}
	return s
}

func kindLower(k string) string {
	b := []byte(k)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func workloadObject(w *npappsv1.Workload) (runtime.Object, error) {
	k, err := convert.Workload(w)
	if err != nil {
		return nil, err
	}
	return k.(runtime.Object), nil
}

// Create implements rest.Creater (WorkloadService.CreateWorkload): the
// object's JSON is the owner's spec, as the service keeps it.
func (s *workloads) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	if err := admit(ctx, obj, createValidation); err != nil {
		return nil, err
	}
	m, _ := meta.Accessor(obj)
	w, err := convert.FromWorkload(s.wk, obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(opts.DryRun) > 0 {
		return obj, nil
	}
	resp, err := s.svc.CreateWorkload(ctx, &npappsv1.CreateWorkloadRequest{Workload: w})
	if err != nil {
		return nil, statusError(s.gr, s.kind, m.GetName(), err)
	}
	return workloadObject(resp.GetWorkload())
}

// Delete implements rest.GracefulDeleter.
func (s *workloads) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	cur, err := s.Get(ctx, name, nil)
	if err != nil {
		return nil, false, err
	}
	if dry, err := admitDelete(ctx, s.gr, name, cur, deleteValidation, opts); err != nil {
		return nil, false, err
	} else if dry {
		return cur, true, nil
	}
	if _, err := s.svc.DeleteWorkload(ctx, &npappsv1.DeleteWorkloadRequest{Kind: s.wk, Namespace: ns, Name: name}); err != nil {
		return nil, false, notFoundOr(s.gr, s.kind, name, err)
	}
	return cur, true, nil
}

// scale is the /scale subresource of replicasets and statefulsets
// (autoscaling/v1 Scale): `kubectl scale` reads it and writes it back
// (WorkloadService.ScaleWorkload, conditional on the owner's version).
type scale struct{ w *workloads }

var (
	_ rest.Getter                   = (*scale)(nil)
	_ rest.Updater                  = (*scale)(nil)
	_ rest.GroupVersionKindProvider = (*scale)(nil)
)

func (s *scale) New() runtime.Object { return &autoscalingv1.Scale{} }
func (s *scale) Destroy()            {}
func (s *scale) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

func (s *scale) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	o, err := s.w.Get(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	return scaleOf(o)
}

func scaleOf(o runtime.Object) (*autoscalingv1.Scale, error) {
	var spec *int32
	var status int32
	var sel *metav1.LabelSelector
	switch w := o.(type) {
	case *appsv1.ReplicaSet:
		spec, status, sel = w.Spec.Replicas, w.Status.Replicas, w.Spec.Selector
	case *appsv1.StatefulSet:
		spec, status, sel = w.Spec.Replicas, w.Status.Replicas, w.Spec.Selector
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%T has no scale", o))
	}
	m, _ := meta.Accessor(o)
	out := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()}}
	out.Spec.Replicas = 1
	if spec != nil {
		out.Spec.Replicas = *spec
	}
	out.Status.Replicas = status
	if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
		out.Status.Selector = s.String()
	}
	return out, nil
}

func (s *scale) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	cur, err := s.Get(ctx, name, nil)
	if err != nil {
		return nil, false, err
	}
	obj, err := objInfo.UpdatedObject(ctx, cur)
	if err != nil {
		return nil, false, err
	}
	want, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("not an autoscaling/v1 Scale: %T", obj))
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, want, cur); err != nil {
			return nil, false, err
		}
	}
	if want.Spec.Replicas < 0 {
		return nil, false, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
	}
	if len(opts.DryRun) > 0 {
		return want, false, nil
	}
	resp, err := s.w.svc.ScaleWorkload(ctx, &npappsv1.ScaleWorkloadRequest{Kind: s.w.wk, Namespace: genericapirequest.NamespaceValue(ctx),
		Name: name, Replicas: want.Spec.Replicas, ResourceVersion: want.ResourceVersion})
	if err != nil {
		return nil, false, statusError(s.w.gr, s.w.kind, name, err)
	}
	o, err := workloadObject(resp.GetWorkload())
	if err != nil {
		return nil, false, err
	}
	out, err := scaleOf(o)
	return out, false, err
}
