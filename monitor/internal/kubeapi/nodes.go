// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"k8s.io/apiserver/pkg/registry/rest"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/convert"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
)

// ForceStatusUpdateAnnotation asks the node's agent for a status update
// now (kubelet.kubernetes.io/force-status-update): here the same forced
// update as NodeService.RequestStatusUpdate.
const ForceStatusUpdateAnnotation = "kubelet.kubernetes.io/force-status-update"

var nodesGR = corev1.Resource("nodes")

// nodes serves core/v1 nodes from NodeService: get, list and watch from
// the watch cache; update and patch (every patch type, applied by the
// generic handler over Get and Update) as one compare-and-swap write of
// what an operator may change; delete.
type nodes struct {
	resource
	svc *api.Server
	lg  *zap.Logger
}

var (
	_ rest.Watcher         = (*nodes)(nil)
	_ rest.Updater         = (*nodes)(nil)
	_ rest.GracefulDeleter = (*nodes)(nil)
	_ rest.Creater         = (*nodes)(nil)
)

func newNodes(b Backends, lg *zap.Logger) *nodes {
	s := &nodes{svc: b.Nodes, lg: lg}
	s.resource = resource{gr: nodesGR, kind: "Node", singular: "node", short: []string{"no"},
		newObj: func() runtime.Object { return &corev1.Node{} }, newList: func() runtime.Object { return &corev1.NodeList{} },
		fields: func(o runtime.Object) fields.Set {
			n := o.(*corev1.Node)
			return fields.Set{"metadata.name": n.Name, "spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
		},
		fetch: s.fetch, get: s.getNode, now: b.now}
	return s
}

func (s *nodes) getNode(ctx context.Context, _, name string) (runtime.Object, error) {
	resp, err := s.svc.GetNode(ctx, &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return nil, notFoundOr(nodesGR, "Node", name, err)
	}
	return convert.Node(resp.GetNode())
}

// notFoundOr: a name the services refuse as invalid names nothing stored.
func notFoundOr(gr schema.GroupResource, kind, name string, err error) error {
	se := statusError(gr, kind, name, err)
	if apierrors.IsInvalid(se) {
		return apierrors.NewNotFound(gr, name)
	}
	return se
}

func (s *nodes) fetch(ctx context.Context, _ string, l labels.Selector, f fields.Selector, limit int64, cont string) ([]runtime.Object, string, string, error) {
	if name, ok := f.RequiresExactMatch("metadata.name"); ok {
		rv := s.version(ctx)
		o, err := s.getNode(ctx, "", name)
		if apierrors.IsNotFound(err) {
			return nil, rv, "", nil
		}
		if err != nil {
			return nil, "", "", err
		}
		return []runtime.Object{o}, rv, "", nil
	}
	req := &nodev1.ListNodesRequest{PageSize: int32(min(limit, 1<<30)), PageToken: cont}
	if l != nil && !l.Empty() {
		req.LabelSelector = l.String()
	}
	if v, ok := f.RequiresExactMatch("spec.unschedulable"); ok {
		b := v == "true"
		req.Unschedulable = &b
	}
	resp, err := s.svc.ListNodes(ctx, req)
	if err != nil {
		return nil, "", "", continueError(cont, statusError(nodesGR, "Node", "", err))
	}
	out, err := convertAll(resp.GetNodes(), convert.Node)
	return out, resp.GetResourceVersion(), resp.GetNextPageToken(), err
}

// convertAll converts a page of records with conv.
func convertAll[T any, K runtime.Object](items []T, conv func(T) (K, error)) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		k, err := conv(it)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// continueError: a continue token the services cannot read is 410, as
// kube-apiserver answers an expired one (the client lists again).
func continueError(cont string, err error) error {
	if cont != "" && apierrors.IsInvalid(err) {
		return apierrors.NewResourceExpired("the provided continue parameter is not valid: " + err.Error())
	}
	return err
}

// version is the version of the node list now.
func (s *nodes) version(ctx context.Context) string {
	resp, err := s.svc.ListNodes(ctx, &nodev1.ListNodesRequest{PageSize: 1})
	if err != nil {
		return ""
	}
	return resp.GetResourceVersion()
}

// Watch implements rest.Watcher over NodeService's watch of the cache.
func (s *nodes) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	return s.startWatch(ctx, opts, func(ctx context.Context, _, rv string, send func(watch.EventType, runtime.Object, string) bool) error {
		return s.svc.Watch(ctx, &nodev1.WatchNodesRequest{ResourceVersion: rv}, func(r *nodev1.WatchNodesResponse) error {
			k, err := convert.Node(r.GetNode())
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

// Update implements rest.Updater: PUT, and every PATCH through the generic
// patch handler. What may change is what an operator changes: labels,
// annotations, spec.unschedulable and spec.taints (kept in the order
// given); status and the rest of spec have other writers.
func (s *nodes) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	cur, err := s.getNode(ctx, "", name)
	if apierrors.IsNotFound(err) && forceAllowCreate {
		return createFromUpdate(ctx, &corev1.Node{}, objInfo, createValidation, opts, s.Create)
	}
	if err != nil {
		return nil, false, err
	}
	old := cur.(*corev1.Node)
	obj, err := objInfo.UpdatedObject(ctx, old)
	if err != nil {
		return nil, false, err
	}
	want, ok := obj.(*corev1.Node)
	if !ok {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("not a Node: %T", obj))
	}
	if want.Name != name {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, name))
	}
	if rv := want.ResourceVersion; rv != "" && rv != old.ResourceVersion {
		return nil, false, apierrors.NewConflict(nodesGR, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if errs := onlyWritable(old, want); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Node").GroupKind(), name, errs)
	}
	if updateValidation != nil {
		if err := updateValidation(ctx, want, old); err != nil {
			return nil, false, err
		}
	}
	if len(opts.DryRun) > 0 {
		return want, false, nil
	}
	u, err := nodeUpdate(old, want)
	if err != nil {
		return nil, false, err
	}
	n, err := s.svc.UpdateNode(ctx, name, u)
	if err != nil {
		return nil, false, statusError(nodesGR, "Node", name, err)
	}
	if v, ok := want.Annotations[ForceStatusUpdateAnnotation]; ok && v != old.Annotations[ForceStatusUpdateAnnotation] {
		if _, err := s.svc.RequestStatusUpdate(ctx, &nodev1.RequestStatusUpdateRequest{Name: name}); err != nil {
			// The annotation is kept, as in Kubernetes; the update is best
			// effort (a node on no followed collector cannot be asked).
			s.lg.Warn("force-status-update annotation: the status update was not requested", zap.String("node", name), zap.Error(err))
		}
	}
	out, err := convert.Node(n)
	return out, false, err
}

// onlyWritable lists the changes outside labels, annotations,
// spec.unschedulable and spec.taints.
func onlyWritable(old, want *corev1.Node) field.ErrorList {
	// Compare like with like: the patch handlers apply patches to the JSON
	// of old, in which times keep whole seconds only.
	a, b := &corev1.Node{}, want.DeepCopy()
	if raw, err := json.Marshal(old); err != nil || json.Unmarshal(raw, a) != nil {
		a = old.DeepCopy()
	}
	for _, n := range []*corev1.Node{a, b} {
		n.Labels, n.Annotations, n.ManagedFields, n.ResourceVersion = nil, nil, nil, ""
		n.Spec.Unschedulable, n.Spec.Taints = false, nil
		n.TypeMeta = metav1.TypeMeta{}
	}
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(a.Spec, b.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "only spec.unschedulable and spec.taints may be changed through this API"))
	}
	if !equality.Semantic.DeepEqual(a.Status, b.Status) {
		errs = append(errs, field.Forbidden(field.NewPath("status"), "the node's status is written by its reporter and the monitor, not through this API"))
	}
	if !equality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta) {
		errs = append(errs, field.Forbidden(field.NewPath("metadata"), "only metadata.labels and metadata.annotations may be changed"))
	}
	return errs
}

// nodeUpdate is the change from old to want as one NodeService write. A
// lifecycle-controller taint the client removed is refused: the
// controller owns it and puts it back while its condition holds.
func nodeUpdate(old, want *corev1.Node) (api.NodeUpdate, error) {
	var u api.NodeUpdate
	if want.Spec.Unschedulable != old.Spec.Unschedulable {
		u.Unschedulable = &want.Spec.Unschedulable
	}
	if !equality.Semantic.DeepEqual(old.Spec.Taints, want.Spec.Taints) {
		u.SetTaints = true
		for _, t := range want.Spec.Taints {
			u.Taints = append(u.Taints, convert.Taint(t))
		}
		for _, t := range old.Spec.Taints {
			kept := slices.ContainsFunc(want.Spec.Taints, func(w corev1.Taint) bool { return w.Key == t.Key && w.Effect == t.Effect })
			if kept || !lifecycle.IsControllerManaged(t.Key, string(t.Effect)) || (t.Key == corev1.TaintNodeUnschedulable && u.Unschedulable != nil) {
				continue
			}
			return u, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Node").GroupKind(), old.Name, field.ErrorList{
				field.Forbidden(field.NewPath("spec", "taints"), fmt.Sprintf("%s:%s is managed by the node lifecycle controller; it goes away when the condition behind it does", t.Key, t.Effect))})
		}
	}
	if !maps.Equal(old.Labels, want.Labels) {
		u.Labels = want.Labels
		if u.Labels == nil {
			u.Labels = map[string]string{}
		}
	}
	if !maps.Equal(old.Annotations, want.Annotations) {
		u.Annotations = want.Annotations
		if u.Annotations == nil {
			u.Annotations = map[string]string{}
		}
	}
	// The library's field manager has brought managedFields up to date for
	// this request (every patch type and PUT); storing them is what lets a
	// later apply find its conflicts.
	if !equality.Semantic.DeepEqual(old.ManagedFields, want.ManagedFields) {
		mf, err := convert.ManagedFields(want.ManagedFields)
		if err != nil {
			return u, apierrors.NewBadRequest(fmt.Sprintf("metadata.managedFields: %v", err))
		}
		u.ManagedFields = mf
		if u.ManagedFields == nil {
			u.ManagedFields = []*nodev1.ManagedFieldsEntry{}
		}
	}
	return u, nil
}

// Create implements rest.Creater (NodeService.CreateNode): a node
// registered ahead of its reporter, metadata and operator spec only.
func (s *nodes) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Node: %T", obj))
	}
	if createValidation != nil {
		if err := createValidation(ctx, n); err != nil {
			return nil, err
		}
	}
	mf, err := convert.ManagedFields(n.ManagedFields)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("metadata.managedFields: %v", err))
	}
	in := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations, ManagedFields: mf},
		Spec: &nodev1.NodeSpec{Unschedulable: n.Spec.Unschedulable}}
	for _, t := range n.Spec.Taints {
		in.Spec.Taints = append(in.Spec.Taints, convert.Taint(t))
	}
	if len(opts.DryRun) > 0 {
		return n, nil
	}
	out, err := s.svc.CreateNode(ctx, in)
	if err != nil {
		return nil, statusError(nodesGR, "Node", n.Name, err)
	}
	return convert.Node(out)
}

// Delete implements rest.GracefulDeleter: the node and every record about
// it go in one transaction (NodeService.DeleteNode); its pods then go as
// pod GC sends pods of a missing node.
func (s *nodes) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	cur, err := s.getNode(ctx, "", name)
	if err != nil {
		return nil, false, err
	}
	if dry, err := admitDelete(ctx, nodesGR, name, cur, deleteValidation, opts); err != nil {
		return nil, false, err
	} else if dry {
		return cur, true, nil
	}
	resp, err := s.svc.DeleteNode(ctx, &nodev1.DeleteNodeRequest{Name: name})
	if err != nil {
		return nil, false, statusError(nodesGR, "Node", name, err)
	}
	out, err := convert.Node(resp.GetNode())
	return out, true, err
}

// admitDelete runs what every delete checks before it writes: the
// preconditions, admission, and dryRun (true: answer cur, write nothing).
func admitDelete(ctx context.Context, gr schema.GroupResource, name string, cur runtime.Object, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (bool, error) {
	if err := checkPreconditions(gr, name, cur, opts); err != nil {
		return false, err
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, cur); err != nil {
			return false, err
		}
	}
	return len(opts.DryRun) > 0, nil
}

// checkPreconditions applies DeleteOptions' uid and resourceVersion.
func checkPreconditions(gr schema.GroupResource, name string, cur runtime.Object, opts *metav1.DeleteOptions) error {
	if opts == nil || opts.Preconditions == nil {
		return nil
	}
	m, err := meta.Accessor(cur)
	if err != nil {
		return err
	}
	p := opts.Preconditions
	// The words are kube-apiserver's (storage.NewPreconditionError).
	if p.UID != nil && *p.UID != m.GetUID() {
		//lint:ignore ST1005 upstream's message, capitalised

		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		//lint:ignore ST1005 upstream's message, capitalised
		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// nodeStatus serves nodes/status for reads (kubectl and client-go's
// status readers); the status itself is written by reporters through the
// collectors.
type nodeStatus struct{ n *nodes }

func (s *nodeStatus) New() runtime.Object { return &corev1.Node{} }
func (s *nodeStatus) Destroy()            {}
func (s *nodeStatus) Get(ctx context.Context, name string, o *metav1.GetOptions) (runtime.Object, error) {
	return s.n.Get(ctx, name, o)
}
func (s *nodeStatus) ConvertToTable(ctx context.Context, obj, opts runtime.Object) (*metav1.Table, error) {
	return s.n.ConvertToTable(ctx, obj, opts)
}
