// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/convert"
)

var podsGR = corev1.Resource("pods")

// pods serves core/v1 pods from PodService: reads from the watch cache,
// create (the services' admission: defaults and tolerations), update of
// labels and annotations, and graceful delete.
type pods struct {
	resource
	svc *api.PodServer
}

var (
	_ rest.Watcher         = (*pods)(nil)
	_ rest.Creater         = (*pods)(nil)
	_ rest.Patcher         = (*pods)(nil)
	_ rest.GracefulDeleter = (*pods)(nil)
)

func podFields(o runtime.Object) fields.Set {
	p := o.(*corev1.Pod)
	podIP := ""
	if len(p.Status.PodIPs) > 0 {
		podIP = p.Status.PodIPs[0].IP
	}
	return fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName,
		"spec.restartPolicy": string(p.Spec.RestartPolicy), "spec.schedulerName": p.Spec.SchedulerName,
		"spec.serviceAccountName": p.Spec.ServiceAccountName, "spec.hostNetwork": strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase": string(p.Status.Phase), "status.podIP": podIP, "status.nominatedNodeName": p.Status.NominatedNodeName}
}

func newPods(b Backends) *pods {
	s := &pods{svc: b.Pods}
	s.resource = resource{gr: podsGR, kind: "Pod", singular: "pod", namespaced: true, short: []string{"po"}, categories: []string{"all"},
		newObj: func() runtime.Object { return &corev1.Pod{} }, newList: func() runtime.Object { return &corev1.PodList{} },
		fields: podFields, fetch: s.fetch, get: s.getPod, now: b.now}
	return s
}

func (s *pods) getPod(ctx context.Context, ns, name string) (runtime.Object, error) {
	resp, err := s.svc.GetPod(ctx, &podv1.GetPodRequest{Namespace: ns, Name: name})
	if err != nil {
		return nil, notFoundOr(podsGR, "Pod", name, err)
	}
	return convert.Pod(resp.GetPod())
}

func (s *pods) fetch(ctx context.Context, ns string, l labels.Selector, f fields.Selector, limit int64, cont string) ([]runtime.Object, string, string, error) {
	node, _ := f.RequiresExactMatch("spec.nodeName")
	req := &podv1.ListPodsRequest{Namespace: ns, NodeName: node, PageSize: int32(min(limit, 1<<30)), PageToken: cont}
	if l != nil && !l.Empty() {
		req.LabelSelector = l.String()
	}
	resp, err := s.svc.ListPods(ctx, req)
	if err != nil {
		return nil, "", "", continueError(cont, statusError(podsGR, "Pod", "", err))
	}
	out, err := convertAll(resp.GetPods(), convert.Pod)
	return out, resp.GetResourceVersion(), resp.GetNextPageToken(), err
}

// Watch implements rest.Watcher over PodService's watch of the cache.
func (s *pods) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	node := ""
	if opts.FieldSelector != nil {
		node, _ = opts.FieldSelector.RequiresExactMatch("spec.nodeName")
	}
	return s.startWatch(ctx, opts, func(ctx context.Context, ns, rv string, send func(watch.EventType, runtime.Object, string) bool) error {
		return s.svc.Watch(ctx, &podv1.WatchPodsRequest{Namespace: ns, NodeName: node, ResourceVersion: rv}, func(r *podv1.WatchPodsResponse) error {
			k, err := convert.Pod(r.GetPod())
			if err != nil {
				return err
			}
			if !send(watch.EventType(r.GetType()), k, r.GetResourceVersion()) {
				return context.Canceled
			}
			return nil
		})
	})
}

// Create implements rest.Creater (PodService.CreatePod).
func (s *pods) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Pod: %T", obj))
	}
	if ns := genericapirequest.NamespaceValue(ctx); p.Namespace == "" {
		p.Namespace = ns
	}
	if createValidation != nil {
		if err := createValidation(ctx, p); err != nil {
			return nil, err
		}
	}
	np := &podv1.Pod{}
	if err := convert.FromKube(p, np); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(opts.DryRun) > 0 {
		return p, nil
	}
	resp, err := s.svc.CreatePod(ctx, &podv1.CreatePodRequest{Pod: np})
	if err != nil {
		return nil, statusError(podsGR, "Pod", p.Name, err)
	}
	return convert.Pod(resp.GetPod())
}

// updated is the stored pod and the one the request makes of it (a PUT's
// body, or a patch applied to the stored pod).
func (s *pods) updated(ctx context.Context, ns, name string, objInfo rest.UpdatedObjectInfo) (old, want *corev1.Pod, err error) {
	cur, err := s.getPod(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	old = cur.(*corev1.Pod)
	obj, err := objInfo.UpdatedObject(ctx, old)
	if err != nil {
		return nil, nil, err
	}
	want, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("not a Pod: %T", obj))
	}
	if want.Name != name {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, name))
	}
	return old, want, nil
}

// Update implements rest.Updater (PUT and every patch type of a pod):
// labels and annotations change (PodService.UpdatePod); a changed spec is
// 422, as kube-apiserver refuses most spec changes of a pod; the status
// is kept, as kube-apiserver's pod strategy keeps it (pods/status writes
// it); other metadata stays as stored.
func (s *pods) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	old, want, err := s.updated(ctx, ns, name, objInfo)
	if apierrors.IsNotFound(err) && forceAllowCreate {
		return createFromUpdate(ctx, &corev1.Pod{}, objInfo, createValidation, opts, s.Create)
	}
	if err != nil {
		return nil, false, err
	}
	if rv := want.ResourceVersion; rv != "" && rv != old.ResourceVersion {
		return nil, false, apierrors.NewConflict(podsGR, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	// Compare like with like, as for nodes: the patch handlers apply a
	// patch to the JSON of old.
	was := &corev1.Pod{}
	if raw, err := json.Marshal(old); err != nil || json.Unmarshal(raw, was) != nil {
		was = old.DeepCopy()
	}
	if !equality.Semantic.DeepEqual(was.Spec, want.Spec) {
		return nil, false, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), name, field.ErrorList{
			field.Forbidden(field.NewPath("spec"), "pod updates may not change fields of the spec through this API: only metadata.labels and metadata.annotations (the status through pods/status)")})
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, want, old); err != nil {
			return nil, false, err
		}
	}
	if len(opts.DryRun) > 0 {
		out := old.DeepCopy()
		out.Labels, out.Annotations = want.Labels, want.Annotations
		return out, false, nil
	}
	mf, err := convert.ManagedFields(want.ManagedFields)
	if err != nil {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("metadata.managedFields: %v", err))
	}
	resp, err := s.svc.UpdatePod(ctx, &podv1.UpdatePodRequest{Namespace: ns, Name: name, Labels: want.Labels, Annotations: want.Annotations,
		ResourceVersion: want.ResourceVersion, ManagedFields: mf})
	if err != nil {
		return nil, false, statusError(podsGR, "Pod", name, err)
	}
	out, err := convert.Pod(resp.GetPod())
	return out, false, err
}

// Delete implements rest.GracefulDeleter: graceful unless the grace period
// is 0 (PodService.DeletePod), with the uid and resourceVersion
// preconditions; the pod is returned, as kube-apiserver returns it.
func (s *pods) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	cur, err := s.getPod(ctx, ns, name)
	if err != nil {
		return nil, false, err
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, cur); err != nil {
			return nil, false, err
		}
	}
	if len(opts.DryRun) > 0 {
		return cur, false, nil
	}
	req := &podv1.DeletePodRequest{Namespace: ns, Name: name, GracePeriodSeconds: opts.GracePeriodSeconds}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			req.Uid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			req.ResourceVersion = *p.ResourceVersion
		}
	}
	resp, err := s.svc.DeletePod(ctx, req)
	if err != nil {
		return nil, false, notFoundOr(podsGR, "Pod", name, err)
	}
	out, err := convert.Pod(resp.GetPod())
	return out, resp.GetGone(), err
}

// podStatus serves pods/status: reads, and writes of the status alone
// (PodService.UpdatePodStatus), as kube-apiserver's status strategy keeps
// spec and metadata of the stored pod whatever the body says. A node
// identity writes only the pods bound to it (the service's NodeRestriction).
type podStatus struct{ p *pods }

var _ rest.Patcher = (*podStatus)(nil)

// Update implements rest.Updater; the generic handlers reach it for PUT
// and for every patch type.
func (s *podStatus) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	old, want, err := s.p.updated(ctx, ns, name, objInfo)
	if err != nil {
		return nil, false, err
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, want, old); err != nil {
			return nil, false, err
		}
	}
	np := &podv1.Pod{}
	if err := convert.FromKube(&corev1.Pod{Status: want.Status}, np); err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	if len(opts.DryRun) > 0 {
		out := old.DeepCopy()
		out.Status = want.Status
		return out, false, nil
	}
	if np.Status == nil {
		np.Status = &podv1.PodStatus{}
	}
	resp, err := s.p.svc.UpdatePodStatus(ctx, &podv1.UpdatePodStatusRequest{Namespace: ns, Name: name, Status: np.Status, ResourceVersion: want.ResourceVersion})
	if err != nil {
		return nil, false, statusError(podsGR, "Pod", name, err)
	}
	out, err := convert.Pod(resp.GetPod())
	return out, false, err
}

func (s *podStatus) New() runtime.Object { return &corev1.Pod{} }
func (s *podStatus) Destroy()            {}
func (s *podStatus) Get(ctx context.Context, name string, o *metav1.GetOptions) (runtime.Object, error) {
	return s.p.Get(ctx, name, o)
}
func (s *podStatus) ConvertToTable(ctx context.Context, obj, opts runtime.Object) (*metav1.Table, error) {
	return s.p.ConvertToTable(ctx, obj, opts)
}

// eviction is pods/eviction (policy/v1 Eviction): the disruption budgets
// decide (PodService.EvictPod); a refusal is kube-apiserver's 429.
type eviction struct{ svc *api.PodServer }

var (
	_ rest.NamedCreater             = (*eviction)(nil)
	_ rest.GroupVersionKindProvider = (*eviction)(nil)
)

func (e *eviction) New() runtime.Object { return &policyv1.Eviction{} }
func (e *eviction) Destroy()            {}
func (e *eviction) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

func (e *eviction) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	ev, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a policy/v1 Eviction: %T", obj))
	}
	if ev.Name != "" && ev.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if createValidation != nil {
		if err := createValidation(ctx, ev); err != nil {
			return nil, err
		}
	}
	ns := genericapirequest.NamespaceValue(ctx)
	req := &podv1.EvictPodRequest{Namespace: ns, Name: name}
	if d := ev.DeleteOptions; d != nil {
		req.GracePeriodSeconds = d.GracePeriodSeconds
		if d.Preconditions != nil && d.Preconditions.UID != nil {
			req.Uid = string(*d.Preconditions.UID)
		}
	}
	if len(opts.DryRun) > 0 {
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}
	if _, err := e.svc.EvictPod(ctx, req); err != nil {
		return nil, notFoundOr(podsGR, "Pod", name, err)
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}
