// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// WorkloadServer implements WorkloadService: the owners of pods
// (ReplicaSets, StatefulSets, DaemonSets) as records. Reads come from the
// watch cache, writes go to etcd with optimistic concurrency, as for pods.
// What the owners do with their pods is the leader's owner controllers'
// business; this is the gRPC side: validation, defaults, CRUD, scale.
type WorkloadServer struct {
	appsv1.UnimplementedWorkloadServiceServer
	base
}

// NewWorkloadServer returns the service.
func NewWorkloadServer(store nodestore.Store, c *cache.Cache, lg *zap.Logger, now func() time.Time) *WorkloadServer {
	return &WorkloadServer{base: newBase(store, c, lg.Named("workloads"), now)}
}

// workloadKinds are the owner kinds in list order.
var workloadKinds = []appsv1.WorkloadKind{appsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET, appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET,
	appsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET}

// storeKind is the stored kind of an owner kind.
func storeKind(k appsv1.WorkloadKind) (nodestore.Kind, bool) {
	switch k {
	case appsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET:
		return nodestore.ReplicaSets, true
	case appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET:
		return nodestore.StatefulSets, true
	case appsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET:
		return nodestore.DaemonSets, true
	}
	return "", false
}

// kindName is the Kubernetes kind of a stored owner kind.
func kindName(k nodestore.Kind) string {
	switch k {
	case nodestore.ReplicaSets:
		return "ReplicaSet"
	case nodestore.StatefulSets:
		return "StatefulSet"
	case nodestore.DaemonSets:
		return "DaemonSet"
	case nodestore.PodDisruptionBudgets:
		return "PodDisruptionBudget"
	}
	return string(k)
}

// requireKind reads the kind of a call that names one owner.
func requireKind(k appsv1.WorkloadKind) (nodestore.Kind, error) {
	sk, ok := storeKind(k)
	if !ok {
		return "", status.Errorf(codes.InvalidArgument, "kind: must be WORKLOAD_KIND_REPLICA_SET, WORKLOAD_KIND_STATEFUL_SET or WORKLOAD_KIND_DAEMON_SET (got %s)", k)
	}
	return sk, nil
}

// wrap puts an owner into a Workload.
func wrap(o cache.Object) *appsv1.Workload {
	switch v := o.(type) {
	case *appsv1.ReplicaSet:
		return &appsv1.Workload{Kind: &appsv1.Workload_ReplicaSet{ReplicaSet: v}}
	case *appsv1.StatefulSet:
		return &appsv1.Workload{Kind: &appsv1.Workload_StatefulSet{StatefulSet: v}}
	case *appsv1.DaemonSet:
		return &appsv1.Workload{Kind: &appsv1.Workload_DaemonSet{DaemonSet: v}}
	}
	return nil
}

// newUID is a random (version 4) UUID, as Kubernetes gives every object.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// admitMeta sets what the control plane assigns to a new object: uid,
// creation time, generation 1; output-only fields are dropped.
func admitMeta(o cache.Object, now time.Time) {
	md := o.GetMetadata()
	md.Uid = newUID()
	md.CreationTimestamp = nodemodel.Timestamp(now)
	md.Generation = 1
	md.ResourceVersion = ""
	md.DeletionGracePeriodSeconds = nil
}

// servedObject returns the object as this replica's cache holds it at rev,
// or o with its resource version when the cache has not caught up.
func (b *base) servedObject(k nodestore.Kind, o cache.Object, rev int64) cache.Object {
	md := o.GetMetadata()
	if e, ok := b.cache.GetObject(k, md.GetNamespace(), md.GetName()); ok && e.ModRevision == rev {
		return e.Object
	}
	out := proto.Clone(o).(cache.Object)
	out.GetMetadata().ResourceVersion = formatRev(rev)
	return out
}

// create stores a new object of kind k under field (for errors).
func (b *base) create(ctx context.Context, k nodestore.Kind, field string, o cache.Object) (cache.Object, error) {
	md := o.GetMetadata()
	key := cache.PodKey(md.GetNamespace(), md.GetName())
	rev, err := b.store.Apply(ctx, nil, nodestore.Op{Kind: k, Name: key, Value: o, IfAbsent: true})
	if errors.Is(err, nodestore.ErrConflict) {
		return nil, status.Errorf(codes.AlreadyExists, "%s.metadata.name: %s %s already exists", field, kindName(k), key)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "store %s %s: %v", kindName(k), key, err)
	}
	b.waitCache(ctx, rev)
	b.audit(ctx, "object", kindName(k)+" created", key, zap.String("uid", md.GetUid()))
	return b.servedObject(k, o, rev), nil
}

// get reads one cached object of kind k.
func (b *base) get(k nodestore.Kind, ns, name string) (cache.ObjectEntry, error) {
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return cache.ObjectEntry{}, err
	}
	e, ok := b.cache.GetObject(k, ns, name)
	if !ok {
		return e, status.Errorf(codes.NotFound, "%s %s/%s not found", kindName(k), ns, name)
	}
	return e, nil
}

// remove deletes an object of kind k, conditional on its uid when set.
func (b *base) remove(ctx context.Context, k nodestore.Kind, ns, name, uid string) (cache.Object, error) {
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return nil, err
	}
	key := cache.PodKey(ns, name)
	what := kindName(k) + " " + key
	o, rev, err := b.rewrite(ctx, k, key, what, "delete", nil, func(o nodestore.Object) ([]nodestore.Op, error) {
		if got := o.Value.(cache.Object).GetMetadata().GetUid(); uid != "" && got != uid {
			return nil, status.Errorf(codes.Aborted, "uid: precondition failed: %s has uid %s, not %s; read it again", what, got, uid)
		}
		return []nodestore.Op{{Kind: k, Name: key, IfModRevision: o.ModRevision}}, nil
	})
	if err != nil {
		return nil, err
	}
	b.waitCache(ctx, rev)
	b.audit(ctx, "object", kindName(k)+" deleted", key)
	last := proto.Clone(o.Value).(cache.Object)
	if last.GetMetadata() != nil {
		last.GetMetadata().Namespace, last.GetMetadata().Name = ns, name
		last.GetMetadata().ResourceVersion = formatRev(o.ModRevision)
	}
	return last, nil
}

// CreateWorkload implements WorkloadService.
func (s *WorkloadServer) CreateWorkload(ctx context.Context, req *appsv1.CreateWorkloadRequest) (*appsv1.CreateWorkloadResponse, error) {
	lim := validation.DefaultLimits()
	now := s.now()
	var (
		k     nodestore.Kind
		field string
		o     cache.Object
		errs  validation.List
	)
	switch w := req.GetWorkload().GetKind().(type) {
	case *appsv1.Workload_ReplicaSet:
		k, field = nodestore.ReplicaSets, "workload.replicaSet"
		errs = validation.ReplicaSet(field, w.ReplicaSet, lim)
		if errs == nil {
			rs := proto.CloneOf(w.ReplicaSet)
			if rs.Spec.Replicas == nil {
				rs.Spec.Replicas = proto.Int32(1) // upstream's default
			}
			rs.Status = &appsv1.ReplicaSetStatus{}
			o = rs
		}
	case *appsv1.Workload_StatefulSet:
		k, field = nodestore.StatefulSets, "workload.statefulSet"
		errs = validation.StatefulSet(field, w.StatefulSet, lim)
		if errs == nil {
			ss := proto.CloneOf(w.StatefulSet)
			if ss.Spec.Replicas == nil {
				ss.Spec.Replicas = proto.Int32(1)
			}
			if ss.Spec.PodManagementPolicy == "" {
				ss.Spec.PodManagementPolicy = validation.OrderedReadyPodManagement
			}
			ss.Status = &appsv1.StatefulSetStatus{}
			o = ss
		}
	case *appsv1.Workload_DaemonSet:
		k, field = nodestore.DaemonSets, "workload.daemonSet"
		errs = validation.DaemonSet(field, w.DaemonSet, lim)
		if errs == nil {
			ds := proto.CloneOf(w.DaemonSet)
			ds.Status = &appsv1.DaemonSetStatus{}
			o = ds
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "workload: must set one of replicaSet, statefulSet or daemonSet")
	}
	if err := errs.Err(); err != nil {
		return nil, validation.Status(err)
	}
	admitMeta(o, now)
	out, err := s.create(ctx, k, field, o)
	if err != nil {
		return nil, err
	}
	return &appsv1.CreateWorkloadResponse{Workload: wrap(out)}, nil
}

// GetWorkload implements WorkloadService.
func (s *WorkloadServer) GetWorkload(_ context.Context, req *appsv1.GetWorkloadRequest) (*appsv1.GetWorkloadResponse, error) {
	k, err := requireKind(req.GetKind())
	if err != nil {
		return nil, err
	}
	e, err := s.get(k, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &appsv1.GetWorkloadResponse{Workload: wrap(e.Object)}, nil
}

// workloadFilter is the kind and namespace filter of List and Watch.
type workloadFilter struct {
	kinds map[nodestore.Kind]bool
	ns    string
	sel   Selector
}

func (f workloadFilter) matches(k nodestore.Kind, o cache.Object) bool {
	md := o.GetMetadata()
	return f.kinds[k] && (f.ns == "" || md.GetNamespace() == f.ns) && f.sel.Matches(md.GetLabels())
}

func parseWorkloadFilter(kind appsv1.WorkloadKind, ns, selector string) (workloadFilter, []nodestore.Kind, error) {
	f := workloadFilter{kinds: map[nodestore.Kind]bool{}, ns: ns}
	var order []nodestore.Kind
	if kind == appsv1.WorkloadKind_WORKLOAD_KIND_UNSPECIFIED {
		for _, wk := range workloadKinds {
			sk, _ := storeKind(wk)
			order = append(order, sk)
		}
	} else {
		sk, err := requireKind(kind)
		if err != nil {
			return f, nil, err
		}
		order = []nodestore.Kind{sk}
	}
	for _, k := range order {
		f.kinds[k] = true
	}
	if ns != "" {
		if err := invalid(podutil.ValidateNamespace("namespace", ns)); err != nil {
			return f, nil, err
		}
	}
	sel, err := ParseSelector("labelSelector", selector)
	if err != nil {
		return f, nil, validation.Status(err)
	}
	f.sel = sel
	return f, order, nil
}

// ListWorkloads implements WorkloadService. The page token is the last
// "<kind index>/<namespace>/<name>" returned, so a list of every kind pages
// through ReplicaSets, then StatefulSets, then DaemonSets.
func (s *WorkloadServer) ListWorkloads(_ context.Context, req *appsv1.ListWorkloadsRequest) (*appsv1.ListWorkloadsResponse, error) {
	f, order, err := parseWorkloadFilter(req.GetKind(), req.GetNamespace(), req.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	size, after, err := pageParams(req.GetPageSize(), req.GetPageToken(), "ListWorkloads")
	if err != nil {
		return nil, err
	}
	objs, ver := s.cache.Objects(order...)
	resp := &appsv1.ListWorkloadsResponse{ResourceVersion: ver.String()}
	lastKey := ""
	for _, e := range objs {
		md := e.Object.GetMetadata()
		key := strconv.Itoa(ownerKindIndex(e.Kind)) + "/" + cache.PodKey(md.GetNamespace(), md.GetName())
		if key <= after || !f.matches(e.Kind, e.Object) {
			continue
		}
		if len(resp.Workloads) == size {
			resp.NextPageToken = pageToken(lastKey)
			break
		}
		resp.Workloads = append(resp.Workloads, wrap(e.Object))
		lastKey = key
	}
	return resp, nil
}

// ownerKindIndex is the place of an owner kind in lists and page tokens.
func ownerKindIndex(k nodestore.Kind) int {
	for i, wk := range workloadKinds {
		if sk, _ := storeKind(wk); sk == k {
			return i
		}
	}
	return len(workloadKinds)
}

// WatchWorkloads implements WorkloadService: current owners as ADDED
// (unless resuming), then changes, filtered as WatchPods.
func (s *WorkloadServer) WatchWorkloads(req *appsv1.WatchWorkloadsRequest, stream appsv1.WorkloadService_WatchWorkloadsServer) error {
	f, order, err := parseWorkloadFilter(req.GetKind(), req.GetNamespace(), "")
	if err != nil {
		return err
	}
	from, err := watchFrom(req.GetResourceVersion(), func() (cache.Version, error) {
		all, ver := s.cache.Objects(order...)
		for _, e := range all {
			if !f.matches(e.Kind, e.Object) {
				continue
			}
			if err := stream.Send(&appsv1.WatchWorkloadsResponse{Type: cache.Added, Workload: wrap(e.Object), ResourceVersion: ver.String()}); err != nil {
				return ver, err
			}
		}
		return ver, nil
	})
	if err != nil {
		return err
	}
	return follow(stream.Context(), from, s.cache.ObjectChangesAfter, func(ch cache.ObjectChange) (cache.Version, error) {
		match := func(o cache.Object) bool { return f.matches(ch.Kind, o) }
		typ, o := watchEvent(match, ch.Type, ch.Object, ch.Old)
		if typ == "" {
			return ch.Version, nil
		}
		return ch.Version, stream.Send(&appsv1.WatchWorkloadsResponse{Type: typ, Workload: wrap(o), ResourceVersion: ch.Version.String()})
	})
}

// ScaleWorkload implements WorkloadService: spec.replicas of a ReplicaSet
// or StatefulSet; generation grows only when the value changes, so a
// repeated scale to the same count is no new desired state (as upstream's
// generation bump on spec changes only).
func (s *WorkloadServer) ScaleWorkload(ctx context.Context, req *appsv1.ScaleWorkloadRequest) (*appsv1.ScaleWorkloadResponse, error) {
	k, err := requireKind(req.GetKind())
	if err != nil {
		return nil, err
	}
	if k == nodestore.DaemonSets {
		return nil, status.Error(codes.InvalidArgument, "kind: a DaemonSet has no replicas: it runs one pod on every eligible node")
	}
	ns, name := req.GetNamespace(), req.GetName()
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return nil, err
	}
	if err := invalid(validation.Replicas("replicas", req.GetReplicas())); err != nil {
		return nil, err
	}
	key := cache.PodKey(ns, name)
	what := kindName(k) + " " + key
	var want int64
	var conflict error
	if rv := req.GetResourceVersion(); rv != "" {
		v, err := cache.ParseVersion(rv)
		if err != nil || !v.Last {
			return nil, status.Errorf(codes.InvalidArgument, "resourceVersion: %q is not an object's resource version", rv)
		}
		want = v.Rev
		conflict = status.Errorf(codes.Aborted, "resourceVersion: %s changed meanwhile; read it again", what)
	}
	var out cache.Object
	o, rev, err := s.rewrite(ctx, k, key, what, "write", conflict, func(o nodestore.Object) ([]nodestore.Op, error) {
		if want != 0 && o.ModRevision != want {
			return nil, status.Errorf(codes.Aborted, "resourceVersion: %s is at %d, not %d; read it again", what, o.ModRevision, want)
		}
		cur := proto.Clone(o.Value).(cache.Object)
		var rp **int32
		switch v := cur.(type) {
		case *appsv1.ReplicaSet:
			if v.Spec == nil {
				v.Spec = &appsv1.ReplicaSetSpec{}
			}
			rp = &v.Spec.Replicas
		case *appsv1.StatefulSet:
			if v.Spec == nil {
				v.Spec = &appsv1.StatefulSetSpec{}
			}
			rp = &v.Spec.Replicas
		default:
			return nil, status.Errorf(codes.Internal, "%s holds a %T", what, cur)
		}
		out = cur
		if *rp != nil && **rp == req.GetReplicas() {
			return nil, nil // no change: nothing written, generation kept
		}
		*rp = proto.Int32(req.GetReplicas())
		if cur.GetMetadata() != nil {
			cur.GetMetadata().Generation++
		}
		return []nodestore.Op{{Kind: k, Name: key, Value: cur, IfModRevision: o.ModRevision}}, nil
	})
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		// Unchanged: serve what was read.
		rev = o.ModRevision
	} else {
		s.waitCache(ctx, rev)
		s.audit(ctx, "object", kindName(k)+" scaled", key, zap.Int32("replicas", req.GetReplicas()))
	}
	if out.GetMetadata() != nil {
		out.GetMetadata().Namespace, out.GetMetadata().Name = ns, name
	}
	return &appsv1.ScaleWorkloadResponse{Workload: wrap(s.servedObject(k, out, rev))}, nil
}

// DeleteWorkload implements WorkloadService. The owner's pods stay for
// the owner controllers' garbage collection (background propagation).
func (s *WorkloadServer) DeleteWorkload(ctx context.Context, req *appsv1.DeleteWorkloadRequest) (*appsv1.DeleteWorkloadResponse, error) {
	k, err := requireKind(req.GetKind())
	if err != nil {
		return nil, err
	}
	o, err := s.remove(ctx, k, req.GetNamespace(), req.GetName(), req.GetUid())
	if err != nil {
		return nil, err
	}
	return &appsv1.DeleteWorkloadResponse{Workload: wrap(o)}, nil
}
