package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/eviction"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// PodServer implements PodService: the workload records an orchestrator
// keeps in nodepulse. Reads come from the watch cache (any replica); writes
// go to etcd with optimistic concurrency (any replica) and wait, briefly,
// until this replica's cache has them, so a client reads its own writes.
type PodServer struct {
	podv1.UnimplementedPodServiceServer
	store     nodestore.Store
	cache     *cache.Cache
	evictor   *eviction.Runner
	admission admission.Config
	lg        *zap.Logger
	now       func() time.Time
}

// NewPodServer returns the service. evictor may be nil (explanations then
// say nothing about schedules).
func NewPodServer(store nodestore.Store, c *cache.Cache, ev *eviction.Runner, adm admission.Config, lg *zap.Logger, now func() time.Time) *PodServer {
	if now == nil {
		now = time.Now
	}
	return &PodServer{store: store, cache: c, evictor: ev, admission: adm, lg: lg.Named("pods"), now: now}
}

// readYourWrites bounds how long a write waits for the cache to catch up.
const readYourWrites = 2 * time.Second

// waitCache waits until the cache reflects rev (or the bound passes).
func (s *PodServer) waitCache(ctx context.Context, rev int64) {
	deadline := time.NewTimer(readYourWrites)
	defer deadline.Stop()
	for {
		ch := s.cache.Changed()
		if s.cache.Revision() >= rev {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-ch:
		}
	}
}

func (s *PodServer) audit(ctx context.Context, what, key string, fields ...zap.Field) {
	s.lg.Info(what, append([]zap.Field{zap.String("pod", key), zap.String("caller", identity.FromContext(ctx).String())}, fields...)...)
}

func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40 // version 4
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

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
	if err := validatePod("pod.", req.GetPod(), now, lim).Err(); err != nil {
		return nil, validation.Status(err)
	}
	p := podutil.Stored(req.GetPod())
	p.Metadata.Uid = newUID()
	p.Metadata.CreationTimestamp = nodemodel.Timestamp(now)
	if p.Spec == nil {
		p.Spec = &podv1.PodSpec{}
	}
	if p.Status == nil {
		p.Status = &podv1.PodStatus{}
	}
	if p.Status.Phase == "" {
		p.Status.Phase = podutil.PhasePending
	}
	s.admission.Apply(p)
	// The defaults may push the list over the bound.
	if err := validation.Tolerations("pod.spec.tolerations", p.Spec.Tolerations, lim).Err(); err != nil {
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
	s.audit(ctx, "pod created", key, zap.String("node", p.Spec.NodeName), zap.String("owner", admission.OwnerKind(p)))
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
	if err := checkPodName(ns, name); err != nil {
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
		if fe := checkNamespace("namespace", ns); fe != nil {
			return f, validation.Status(fe)
		}
	}
	if node != "" {
		if fe := validation.NodeName("nodeName", node); fe != nil {
			return f, validation.Status(fe)
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
			resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(cache.PodKey(last.GetNamespace(), last.GetName())))
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
	f, err := parsePodFilter(req.GetNamespace(), req.GetNodeName(), "")
	if err != nil {
		return err
	}
	ctx := stream.Context()
	var from cache.Version
	if rv := req.GetResourceVersion(); rv != "" {
		if from, err = cache.ParseVersion(rv); err != nil {
			return status.Error(codes.InvalidArgument, "resourceVersion: "+err.Error())
		}
	} else {
		pods, ver := s.cache.Pods()
		for _, pe := range pods {
			if !f.matches(pe.Pod) {
				continue
			}
			if err := stream.Send(&podv1.WatchPodsResponse{Type: cache.Added, Pod: pe.Pod, ResourceVersion: ver.String()}); err != nil {
				return err
			}
		}
		from = ver
	}
	return follow(ctx, from, s.cache.PodChangesAfter, func(ch cache.PodChange) (cache.Version, error) {
		typ, p := podWatchEvent(f, ch)
		if typ == "" {
			return ch.Version, nil
		}
		return ch.Version, stream.Send(&podv1.WatchPodsResponse{Type: typ, Pod: p, ResourceVersion: ch.Version.String()})
	})
}

func podWatchEvent(f podFilter, ch cache.PodChange) (string, *podv1.Pod) {
	now := f.matches(ch.Pod)
	switch ch.Type {
	case cache.Added, cache.Deleted:
		if now {
			return ch.Type, ch.Pod
		}
		return "", nil
	}
	was := f.matches(ch.Old)
	switch {
	case was && now:
		return cache.Modified, ch.Pod
	case now:
		return cache.Added, ch.Pod
	case was:
		return cache.Deleted, ch.Old
	}
	return "", nil
}

// UpdatePodStatus implements PodService.
func (s *PodServer) UpdatePodStatus(ctx context.Context, req *podv1.UpdatePodStatusRequest) (*podv1.UpdatePodStatusResponse, error) {
	ns, name := req.GetNamespace(), req.GetName()
	if err := checkPodName(ns, name); err != nil {
		return nil, err
	}
	if req.GetStatus() == nil {
		return nil, status.Error(codes.InvalidArgument, "status: must be set")
	}
	if err := validatePodStatus("status", req.GetStatus(), s.now(), validation.DefaultLimits()).Err(); err != nil {
		return nil, validation.Status(err)
	}
	var want int64
	if rv := req.GetResourceVersion(); rv != "" {
		v, err := cache.ParseVersion(rv)
		if err != nil || !v.Last {
			return nil, status.Errorf(codes.InvalidArgument, "resourceVersion: %q is not a pod's resource version", rv)
		}
		want = v.Rev
	}
	key := cache.PodKey(ns, name)
	for range casRetries {
		o, err := s.store.Get(ctx, nodestore.Pods, key)
		if errors.Is(err, nodestore.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "pod %s not found", key)
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "read pod %s: %v", key, err)
		}
		if want != 0 && o.ModRevision != want {
			return nil, status.Errorf(codes.Aborted, "resourceVersion: pod %s is at %d, not %d; read it again", key, o.ModRevision, want)
		}
		p := podutil.Stored(o.Value.(*podv1.Pod))
		p.Status = proto.CloneOf(req.GetStatus())
		rev, err := s.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: key, Value: p, IfModRevision: o.ModRevision})
		if errors.Is(err, nodestore.ErrConflict) {
			if want != 0 {
				return nil, status.Errorf(codes.Aborted, "resourceVersion: pod %s changed meanwhile; read it again", key)
			}
			continue
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "write pod %s: %v", key, err)
		}
		s.waitCache(ctx, rev)
		s.audit(ctx, "pod status updated", key, zap.String("phase", p.Status.GetPhase()))
		p.Metadata.Namespace, p.Metadata.Name = ns, name
		return &podv1.UpdatePodStatusResponse{Pod: s.served(p, rev)}, nil
	}
	return nil, status.Errorf(codes.Aborted, "pod %s kept changing; try again", key)
}

// DeletePod implements PodService.
func (s *PodServer) DeletePod(ctx context.Context, req *podv1.DeletePodRequest) (*podv1.DeletePodResponse, error) {
	ns, name := req.GetNamespace(), req.GetName()
	if err := checkPodName(ns, name); err != nil {
		return nil, err
	}
	key := cache.PodKey(ns, name)
	for range casRetries {
		o, err := s.store.Get(ctx, nodestore.Pods, key)
		if errors.Is(err, nodestore.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "pod %s not found", key)
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "read pod %s: %v", key, err)
		}
		rev, err := s.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: key, IfModRevision: o.ModRevision})
		if errors.Is(err, nodestore.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "delete pod %s: %v", key, err)
		}
		s.waitCache(ctx, rev)
		s.audit(ctx, "pod deleted", key)
		p := proto.CloneOf(o.Value.(*podv1.Pod))
		p.Metadata.Namespace, p.Metadata.Name, p.Metadata.ResourceVersion = ns, name, formatRev(o.ModRevision)
		return &podv1.DeletePodResponse{Pod: p}, nil
	}
	return nil, status.Errorf(codes.Aborted, "pod %s kept changing; try again", key)
}
