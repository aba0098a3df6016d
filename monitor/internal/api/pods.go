// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// PodServer implements PodService: the workload records an orchestrator
// keeps in nodepulse. Reads come from the watch cache (any replica); writes
// go to etcd with optimistic concurrency (any replica) and wait, briefly,
// until this replica's cache has them, so a client reads its own writes.
// What a pod may be, the defaults it gets and what the evictor does with it
// belong to the workloads packages; this is the gRPC side.
type PodServer struct {
	podv1.UnimplementedPodServiceServer
	base
	evictor   Evictor
	admission admission.Config
}

// NewPodServer returns the service. evictor may be nil: ExplainPod is then
// Unavailable.
func NewPodServer(store nodestore.Store, c *cache.Cache, ev Evictor, adm admission.Config, lg *zap.Logger, now func() time.Time) *PodServer {
	return &PodServer{base: newBase(store, c, lg.Named("pods"), now), evictor: ev, admission: adm}
}

func formatRev(rev int64) string { return strconv.FormatInt(rev, 10) }

// served returns the pod as the cache holds it, or p with the revision
// filled when the cache has not caught up (or the pod is gone again).
func (s *PodServer) served(p *podv1.Pod, rev int64) *podv1.Pod {
	md := p.GetMetadata()
	if pe, ok := s.cache.Pod(md.GetNamespace(), md.GetName()); ok && pe.ModRevision == rev {
		return pe.Pod
	}
	out := proto.CloneOf(p)
	out.Metadata.ResourceVersion = formatRev(rev)
	return out
}

// CreatePod implements PodService.
func (s *PodServer) CreatePod(ctx context.Context, req *podv1.CreatePodRequest) (*podv1.CreatePodResponse, error) {
	now := s.now()
	if req.GetPod() == nil {
		return nil, status.Error(codes.InvalidArgument, "pod: must be set")
	}
	lim := validation.DefaultLimits()
	if err := podutil.Validate("pod.", req.GetPod(), now, lim).Err(); err != nil {
		return nil, validation.Status(err)
	}
	p, errs := s.admission.Admit(req.GetPod(), now, lim)
	if err := errs.Err(); err != nil {
		return nil, validation.Status(err)
	}
	key := cache.PodKey(p.Metadata.Namespace, p.Metadata.Name)
	rev, err := s.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: key, Value: p, IfAbsent: true})
	if errors.Is(err, nodestore.ErrConflict) {
		return nil, status.Errorf(codes.AlreadyExists, "pod.metadata.name: pod %s already exists", key)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "store pod %s: %v", key, err)
	}
	s.waitCache(ctx, rev)
	s.audit(ctx, "pod", "pod created", key, zap.String("node", p.Spec.NodeName), zap.String("owner", podutil.OwnerKind(p)))
	return &podv1.CreatePodResponse{Pod: s.served(p, rev)}, nil
}

// GetPod implements PodService.
func (s *PodServer) GetPod(_ context.Context, req *podv1.GetPodRequest) (*podv1.GetPodResponse, error) {
	pe, err := s.pod(req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &podv1.GetPodResponse{Pod: pe.Pod}, nil
}

func (s *PodServer) pod(ns, name string) (cache.PodEntry, error) {
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return cache.PodEntry{}, err
	}
	pe, ok := s.cache.Pod(ns, name)
	if !ok {
		return cache.PodEntry{}, status.Errorf(codes.NotFound, "pod %s/%s not found", ns, name)
	}
	return pe, nil
}

// podFilter is the namespace and node filter of List and Watch.
type podFilter struct {
	ns, node string
	sel      Selector
}

func (f podFilter) matches(p *podv1.Pod) bool {
	return (f.ns == "" || p.GetMetadata().GetNamespace() == f.ns) && (f.node == "" || p.GetSpec().GetNodeName() == f.node) &&
		f.sel.Matches(p.GetMetadata().GetLabels())
}

func parsePodFilter(ns, node, selector string) (podFilter, error) {
	f := podFilter{ns: ns, node: node}
	if ns != "" {
		if err := invalid(podutil.ValidateNamespace("namespace", ns)); err != nil {
			return f, err
		}
	}
	if node != "" {
		if err := invalid(validation.NodeName("nodeName", node)); err != nil {
			return f, err
		}
	}
	sel, err := ParseSelector("labelSelector", selector)
	if err != nil {
		return f, validation.Status(err)
	}
	f.sel = sel
	return f, nil
}

// ListPods implements PodService.
func (s *PodServer) ListPods(_ context.Context, req *podv1.ListPodsRequest) (*podv1.ListPodsResponse, error) {
	f, err := parsePodFilter(req.GetNamespace(), req.GetNodeName(), req.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	size, after, err := pageParams(req.GetPageSize(), req.GetPageToken(), "ListPods")
	if err != nil {
		return nil, err
	}
	var pods []cache.PodEntry
	var ver cache.Version
	if f.node != "" {
		pods, ver = s.cache.PodsOnNode(f.node), s.cache.PodVersion()
	} else {
		pods, ver = s.cache.Pods()
	}
	resp := &podv1.ListPodsResponse{ResourceVersion: ver.String()}
	for _, pe := range pods {
		md := pe.Pod.GetMetadata()
		key := cache.PodKey(md.GetNamespace(), md.GetName())
		if key <= after || !f.matches(pe.Pod) {
			continue
		}
		if len(resp.Pods) == size {
			last := resp.Pods[size-1].GetMetadata()
			resp.NextPageToken = pageToken(cache.PodKey(last.GetNamespace(), last.GetName()))
			break
		}
		resp.Pods = append(resp.Pods, pe.Pod)
	}
	return resp, nil
}

// WatchPods implements PodService: current pods as ADDED (unless resuming),
// then changes; a pod that starts or stops matching the filter is ADDED or
// DELETED, as Kubernetes filtered watches do.
func (s *PodServer) WatchPods(req *podv1.WatchPodsRequest, stream podv1.PodService_WatchPodsServer) error {
	return s.Watch(stream.Context(), req, stream.Send)
}

// Watch is WatchPods for a caller in process (the Kubernetes API): send
// gets every event, in order, until ctx ends or send fails.
func (s *PodServer) Watch(ctx context.Context, req *podv1.WatchPodsRequest, send func(*podv1.WatchPodsResponse) error) error {
	f, err := parsePodFilter(req.GetNamespace(), req.GetNodeName(), "")
	if err != nil {
		return err
	}
	from, err := watchFrom(req.GetResourceVersion(), func() (cache.Version, error) {
		pods, ver := s.cache.Pods()
		for _, pe := range pods {
			if !f.matches(pe.Pod) {
				continue
			}
			if err := send(&podv1.WatchPodsResponse{Type: cache.Added, Pod: pe.Pod, ResourceVersion: ver.String()}); err != nil {
				return ver, err
			}
		}
		return ver, nil
	})
	if err != nil {
		return err
	}
	return follow(ctx, from, s.cache.PodChangesAfter, func(ch cache.PodChange) (cache.Version, error) {
		typ, p := watchEvent(f.matches, ch.Type, ch.Pod, ch.Old)
		if typ == "" {
			return ch.Version, nil
		}
		return ch.Version, send(&podv1.WatchPodsResponse{Type: typ, Pod: p, ResourceVersion: ch.Version.String()})
	})
}

// UpdatePodStatus implements PodService.
func (s *PodServer) UpdatePodStatus(ctx context.Context, req *podv1.UpdatePodStatusRequest) (*podv1.UpdatePodStatusResponse, error) {
	ns, name := req.GetNamespace(), req.GetName()
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return nil, err
	}
	if req.GetStatus() == nil {
		return nil, status.Error(codes.InvalidArgument, "status: must be set")
	}
	if err := podutil.ValidateStatus("status", req.GetStatus(), s.now(), validation.DefaultLimits()).Err(); err != nil {
		return nil, validation.Status(err)
	}
	p, err := s.editPod(ctx, ns, name, req.GetResourceVersion(), func(p *podv1.Pod) error {
		// NodeRestriction: a node writes the status of its own pods only,
		// judged on the stored binding (the request cannot move the pod).
		if node, ok := authz.NodeName(ctx); ok && p.GetSpec().GetNodeName() != node {
			return status.Errorf(codes.PermissionDenied, "node %q can only update pod status for pods with spec.nodeName set to itself", node)
		}
		p.Status = proto.CloneOf(req.GetStatus())
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "pod", "pod status updated", cache.PodKey(ns, name), zap.String("phase", p.Status.GetPhase()))
	return &podv1.UpdatePodStatusResponse{Pod: p}, nil
}

// editPod makes edit's change of pod ns/name in one compare-and-swap and
// returns the pod as served once the cache holds it. With a resource
// version rv the client asked for that revision and no other: a change in
// between is its conflict (Aborted), not one to retry.
func (s *PodServer) editPod(ctx context.Context, ns, name, rv string, edit func(*podv1.Pod) error) (*podv1.Pod, error) {
	key := cache.PodKey(ns, name)
	var want int64
	var conflict error
	if rv != "" {
		v, err := cache.ParseVersion(rv)
		if err != nil || !v.Last {
			return nil, status.Errorf(codes.InvalidArgument, "resourceVersion: %q is not a pod's resource version", rv)
		}
		want = v.Rev
		conflict = status.Errorf(codes.Aborted, "resourceVersion: pod %s changed meanwhile; read it again", key)
	}
	var p *podv1.Pod
	_, rev, err := s.rewrite(ctx, nodestore.Pods, key, "pod "+key, "write", conflict, func(o nodestore.Object) ([]nodestore.Op, error) {
		if want != 0 && o.ModRevision != want {
			return nil, status.Errorf(codes.Aborted, "resourceVersion: pod %s is at %d, not %d; read it again", key, o.ModRevision, want)
		}
		p = podutil.Stored(o.Value.(*podv1.Pod))
		if p.Metadata == nil {
			p.Metadata = &nodev1.ObjectMeta{}
		}
		if err := edit(p); err != nil {
			return nil, err
		}
		return []nodestore.Op{{Kind: nodestore.Pods, Name: key, Value: p, IfModRevision: o.ModRevision}}, nil
	})
	if err != nil {
		return nil, err
	}
	s.waitCache(ctx, rev)
	p.Metadata.Namespace, p.Metadata.Name = ns, name
	return s.served(p, rev), nil
}

// UpdatePod implements PodService: the labels and annotations of a pod
// replaced in one compare-and-swap, everything else as stored.
func (s *PodServer) UpdatePod(ctx context.Context, req *podv1.UpdatePodRequest) (*podv1.UpdatePodResponse, error) {
	ns, name := req.GetNamespace(), req.GetName()
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return nil, err
	}
	labels, annotations := req.GetLabels(), req.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	if err := checkMetadata(labels, annotations); err != nil {
		return nil, err
	}
	p, err := s.editPod(ctx, ns, name, req.GetResourceVersion(), func(p *podv1.Pod) error {
		p.Metadata.Labels, p.Metadata.Annotations = maps.Clone(labels), maps.Clone(annotations)
		if mf := req.GetManagedFields(); len(mf) > 0 {
			p.Metadata.ManagedFields = mf
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "pod", "pod metadata updated", cache.PodKey(ns, name), zap.Int("labels", len(labels)), zap.Int("annotations", len(annotations)))
	return &podv1.UpdatePodResponse{Pod: p}, nil
}

// DeletePod implements PodService: the API server's graceful deletion
// (spec §12.2, services/podlife). A pod with a grace period stays,
// Terminating, until its node's reporter confirms, pod GC removes it or a
// grace-0 delete; grace 0 removes it at once.
func (s *PodServer) DeletePod(ctx context.Context, req *podv1.DeletePodRequest) (*podv1.DeletePodResponse, error) {
	ns, name := req.GetNamespace(), req.GetName()
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return nil, err
	}
	key := cache.PodKey(ns, name)
	opts := podlife.DeleteOptions{GracePeriodSeconds: req.GracePeriodSeconds, UID: req.GetUid()}
	if rv := req.GetResourceVersion(); rv != "" {
		v, err := cache.ParseVersion(rv)
		if err != nil || !v.Last {
			return nil, status.Errorf(codes.InvalidArgument, "resourceVersion: %q is not a pod's resource version", rv)
		}
		opts.ResourceVersion = formatRev(v.Rev)
	}
	p, gone, rev, err := podlife.DeleteRevision(ctx, s.store, ns, name, opts, s.now())
	switch {
	case errors.Is(err, nodestore.ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "pod %s not found", key)
	case errors.Is(err, podlife.ErrPrecondition):
		// The error names the field: "uid: precondition failed: ...".
		return nil, status.Errorf(codes.Aborted, "%v; read the pod again", err)
	case errors.Is(err, nodestore.ErrConflict):
		return nil, status.Errorf(codes.Aborted, "pod %s kept changing; try again", key)
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "delete pod %s: %v", key, err)
	}
	if rev > 0 {
		s.waitCache(ctx, rev)
	}
	switch {
	case gone:
		s.audit(ctx, "pod", "pod deleted", key, zap.Int64p("gracePeriodSeconds", req.GracePeriodSeconds))
	case rev > 0:
		s.audit(ctx, "pod", "pod deletion requested", key, zap.Int64p("gracePeriodSeconds", req.GracePeriodSeconds),
			zap.Time("deletionTimestamp", p.GetMetadata().GetDeletionTimestamp().AsTime()))
		p = s.served(p, rev)
	}
	return &podv1.DeletePodResponse{Pod: p, Gone: gone}, nil
}

// ExplainPod implements PodService.
func (s *PodServer) ExplainPod(ctx context.Context, req *podv1.ExplainPodRequest) (*podv1.ExplainPodResponse, error) {
	pe, err := s.pod(req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	if s.evictor == nil {
		return nil, status.Error(codes.Unavailable, "this replica has no evictor to explain pods")
	}
	var node *nodev1.Node
	if nn := pe.Pod.GetSpec().GetNodeName(); nn != "" {
		node, _ = s.cache.Node(nn)
	}
	summary, details, at := s.evictor.ExplainPod(ctx, s.now(), pe.Pod, node)
	return &podv1.ExplainPodResponse{Summary: summary, Details: details, DeletionTime: nodemodel.Timestamp(at), Pod: pe.Pod}, nil
}
