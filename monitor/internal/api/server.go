// Package api serves NodeService: queries and watches from the monitor's
// watch cache (any replica), admin changes written to etcd with optimistic
// concurrency (any replica), RequestStatusUpdate through the collector that
// holds the node, and ExplainNode from the cache plus the leader's facts.
package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/controller"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/zones"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/eviction"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Page sizes of ListNodes.
const (
	DefaultPageSize = 500
	MaxPageSize     = 5000
	casRetries      = 5
)

// Liveness is what the API needs from the feed tracker.
type Liveness interface {
	Node(name string) liveness.Node
	SendCommand(ctx context.Context, name, reason string) (string, bool, error)
}

// Server implements NodeService.
type Server struct {
	nodev1.UnimplementedNodeServiceServer
	store nodestore.Store
	cache *cache.Cache
	ctl   *controller.Controller
	live  Liveness
	lg    *zap.Logger
	now   func() time.Time
	// evictor, when set, lets ExplainNode say when the node's pods go.
	evictor *eviction.Runner
}

// SetEvictor lets ExplainNode list the pending evictions of the leader.
func (s *Server) SetEvictor(r *eviction.Runner) { s.evictor = r }

// New returns the service.
func New(store nodestore.Store, c *cache.Cache, ctl *controller.Controller, live Liveness, lg *zap.Logger, now func() time.Time) *Server {
	if now == nil {
		now = time.Now
	}
	return &Server{store: store, cache: c, ctl: ctl, live: live, lg: lg.Named("api"), now: now}
}

func checkName(field, name string) error {
	if fe := validation.NodeName(field, name); fe != nil {
		return status.Error(codes.InvalidArgument, fe.Error())
	}
	return nil
}

func (s *Server) node(name string) (*nodev1.Node, error) {
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	n, ok := s.cache.Node(name)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "node %q not found", name)
	}
	return n, nil
}

// GetNode implements NodeService.
func (s *Server) GetNode(_ context.Context, req *nodev1.GetNodeRequest) (*nodev1.GetNodeResponse, error) {
	n, err := s.node(req.GetName())
	if err != nil {
		return nil, err
	}
	return &nodev1.GetNodeResponse{Node: n}, nil
}

// ListNodes implements NodeService.
func (s *Server) ListNodes(_ context.Context, req *nodev1.ListNodesRequest) (*nodev1.ListNodesResponse, error) {
	sel, err := ParseSelector("labelSelector", req.GetLabelSelector())
	if err != nil {
		return nil, validation.Status(err)
	}
	conds, err := ParseConditionSelector("conditionSelector", req.GetConditionSelector())
	if err != nil {
		return nil, validation.Status(err)
	}
	size, after, err := pageParams(req.GetPageSize(), req.GetPageToken(), "ListNodes")
	if err != nil {
		return nil, err
	}
	nodes, ver := s.cache.Nodes()
	i := sort.Search(len(nodes), func(i int) bool { return nodes[i].GetMetadata().GetName() > after })
	resp := &nodev1.ListNodesResponse{ResourceVersion: ver.String()}
	for ; i < len(nodes); i++ {
		n := nodes[i]
		if !sel.Matches(n.GetMetadata().GetLabels()) || !conditionsMatch(conds, n) {
			continue
		}
		if req.Unschedulable != nil && n.GetSpec().GetUnschedulable() != req.GetUnschedulable() {
			continue
		}
		if len(resp.Nodes) == size {
			resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(resp.Nodes[size-1].GetMetadata().GetName()))
			break
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp, nil
}

// WatchNodes implements NodeService.
func (s *Server) WatchNodes(req *nodev1.WatchNodesRequest, stream nodev1.NodeService_WatchNodesServer) error {
	sel, err := ParseSelector("labelSelector", req.GetLabelSelector())
	if err != nil {
		return validation.Status(err)
	}
	ctx := stream.Context()
	var from cache.Version
	if rv := req.GetResourceVersion(); rv != "" {
		if from, err = cache.ParseVersion(rv); err != nil {
			return status.Error(codes.InvalidArgument, "resourceVersion: "+err.Error())
		}
	} else {
		nodes, ver := s.cache.Nodes()
		for _, n := range nodes {
			if !sel.Matches(n.GetMetadata().GetLabels()) {
				continue
			}
			if err := stream.Send(&nodev1.WatchNodesResponse{Type: cache.Added, Node: n, ResourceVersion: ver.String()}); err != nil {
				return err
			}
		}
		from = ver
	}
	return follow(ctx, from, s.cache.ChangesAfter, func(ch cache.Change) (cache.Version, error) {
		typ, n := watchEvent(sel, ch)
		if typ == "" {
			return ch.Version, nil
		}
		return ch.Version, stream.Send(&nodev1.WatchNodesResponse{Type: typ, Node: n, ResourceVersion: ch.Version.String()})
	})
}

// follow streams the cache's changes after from, in order, until ctx ends:
// next returns up to a page of changes and a channel closed when more
// arrive; send delivers one change and returns its version. A version the
// cache no longer holds is OutOfRange (the Kubernetes "410 Gone"): the
// client lists again and watches from the list's version.
func follow[C any](ctx context.Context, from cache.Version, next func(cache.Version, int) ([]C, <-chan struct{}, error),
	send func(C) (cache.Version, error)) error {
	for {
		changes, wait, err := next(from, 1000)
		if errors.Is(err, cache.ErrTooOld) {
			return status.Errorf(codes.OutOfRange, "resourceVersion %s is too old: list again and watch from the list's resourceVersion", from)
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		for _, ch := range changes {
			if from, err = send(ch); err != nil {
				return err
			}
		}
		if len(changes) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wait:
		}
	}
}

// watchEvent maps a change through the selector: a node that starts
// matching is ADDED, one that stops matching is DELETED (as Kubernetes
// filtered watches do).
func watchEvent(sel Selector, ch cache.Change) (string, *nodev1.Node) {
	now := sel.Matches(ch.Node.GetMetadata().GetLabels())
	switch ch.Type {
	case cache.Added, cache.Deleted:
		if now {
			return ch.Type, ch.Node
		}
		return "", nil
	}
	was := sel.Matches(ch.Old.GetMetadata().GetLabels())
	switch {
	case was && now:
		return cache.Modified, ch.Node
	case now:
		return cache.Added, ch.Node
	case was:
		return cache.Deleted, ch.Old
	}
	return "", nil
}

// GetLease implements NodeService.
func (s *Server) GetLease(_ context.Context, req *nodev1.GetLeaseRequest) (*nodev1.GetLeaseResponse, error) {
	if err := checkName("name", req.GetName()); err != nil {
		return nil, err
	}
	l, ok := s.cache.Lease(req.GetName())
	lv := s.live.Node(req.GetName())
	if !ok && lv.RenewTime.IsZero() {
		return nil, status.Errorf(codes.NotFound, "no lease for node %q (neither stored nor seen on a collector feed)", req.GetName())
	}
	resp := &nodev1.GetLeaseResponse{Lease: l, Collector: lv.Collector}
	if resp.Collector == "" {
		resp.Collector = l.GetPersistence().GetCollector()
	}
	obsRenew, obsAt := lv.RenewTime, lv.ObservedAt
	if st := l.GetSpec().GetRenewTime(); st != nil && st.AsTime().After(obsRenew) {
		obsRenew, obsAt = st.AsTime(), time.Time{}
	}
	resp.ObservedRenewTime = nodemodel.Timestamp(obsRenew)
	resp.ObservedTime = nodemodel.Timestamp(obsAt)
	return resp, nil
}

// update applies fn to nodes/<name> with compare-and-swap, retrying on
// conflicts with a fresh read. fn returns an error to refuse the change, or
// false when nothing needs to change.
func (s *Server) update(ctx context.Context, name string, fn func(n *nodev1.Node) (bool, error)) (*nodev1.Node, error) {
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	for range casRetries {
		o, err := s.store.Get(ctx, nodestore.Nodes, name)
		if errors.Is(err, nodestore.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "node %q not found", name)
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "read node %q: %v", name, err)
		}
		n := proto.CloneOf(o.Value.(*nodev1.Node))
		if n.Spec == nil {
			n.Spec = &nodev1.NodeSpec{}
		}
		changed, err := fn(n)
		if err != nil {
			return nil, err
		}
		if changed {
			rev, err := s.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Nodes, Name: name, Value: n, IfModRevision: o.ModRevision})
			if errors.Is(err, nodestore.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, status.Errorf(codes.Unavailable, "write node %q: %v", name, err)
			}
			s.waitCache(ctx, rev)
		}
		return s.served(name, n), nil
	}
	return nil, status.Errorf(codes.Aborted, "node %q kept changing; try again", name)
}

// readYourWritesWait bounds how long a write waits for this replica's cache.
const readYourWritesWait = 2 * time.Second

// waitCache waits, briefly, until this replica's cache reflects revision
// rev, so that a read through the same replica right after a write sees it
// (`nodepulse taint` then `nodepulse describe`, as kubectl users expect).
// Reads are served from the watch cache, which trails etcd by one watch
// delivery; under load that was long enough for the read to miss the write.
func (s *Server) waitCache(ctx context.Context, rev int64) {
	t := time.NewTimer(readYourWritesWait)
	defer t.Stop()
	for {
		changed := s.cache.Changed() // before the check: no wake-up is lost
		if s.cache.Revision() >= rev {
			return
		}
		select {
		case <-changed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// served merges a just-written node with the cached status and health.
func (s *Server) served(name string, meta *nodev1.Node) *nodev1.Node {
	e, _ := s.cache.Entry(name)
	n := nodemodel.Merge(meta, e.Status, e.Health)
	if n.Metadata != nil {
		n.Metadata.Name = name
	}
	return n
}

func (s *Server) audit(ctx context.Context, what, name string, fields ...zap.Field) {
	s.lg.Info(what, append([]zap.Field{zap.String("node", name), zap.String("caller", identity.FromContext(ctx).String())}, fields...)...)
}

// CordonNode implements NodeService.
func (s *Server) CordonNode(ctx context.Context, req *nodev1.CordonNodeRequest) (*nodev1.CordonNodeResponse, error) {
	n, err := s.update(ctx, req.GetName(), func(n *nodev1.Node) (bool, error) {
		if n.Spec.Unschedulable {
			return false, nil
		}
		n.Spec.Unschedulable = true
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "node cordoned", req.GetName())
	return &nodev1.CordonNodeResponse{Node: n}, nil
}

// UncordonNode implements NodeService.
func (s *Server) UncordonNode(ctx context.Context, req *nodev1.UncordonNodeRequest) (*nodev1.UncordonNodeResponse, error) {
	n, err := s.update(ctx, req.GetName(), func(n *nodev1.Node) (bool, error) {
		if !n.Spec.Unschedulable {
			return false, nil
		}
		n.Spec.Unschedulable = false
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "node uncordoned", req.GetName())
	return &nodev1.UncordonNodeResponse{Node: n}, nil
}

// AddTaint implements NodeService.
func (s *Server) AddTaint(ctx context.Context, req *nodev1.AddTaintRequest) (*nodev1.AddTaintResponse, error) {
	now := s.now()
	t := req.GetTaint()
	if t == nil {
		return nil, status.Error(codes.InvalidArgument, "taint: must be set")
	}
	if err := validation.Taint("taint", t, now, validation.DefaultLimits()).Err(); err != nil {
		return nil, validation.Status(err)
	}
	if lifecycle.IsControllerManaged(t.GetKey(), t.GetEffect()) {
		return nil, status.Errorf(codes.InvalidArgument, "taint.key: %s:%s is managed by the node lifecycle controller and cannot be set by hand (cordon with CordonNode instead of unschedulable)", t.GetKey(), t.GetEffect())
	}
	n, err := s.update(ctx, req.GetName(), func(n *nodev1.Node) (bool, error) {
		nt := proto.CloneOf(t)
		if nt.GetEffect() == nodemodel.NoExecute {
			nt.TimeAdded = nodemodel.Timestamp(now)
		} else {
			nt.TimeAdded = nil
		}
		for i, old := range n.Spec.Taints {
			if old.GetKey() == nt.GetKey() && old.GetEffect() == nt.GetEffect() {
				if old.GetValue() == nt.GetValue() {
					return false, nil
				}
				n.Spec.Taints[i] = nt
				return true, nil
			}
		}
		if lim := validation.DefaultLimits().MaxTaints; len(n.Spec.Taints) >= lim {
			return false, status.Errorf(codes.InvalidArgument, "taint: node already has %d taints, the most allowed", lim)
		}
		n.Spec.Taints = append(n.Spec.Taints, nt)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "taint added", req.GetName(), zap.String("key", t.GetKey()), zap.String("effect", t.GetEffect()))
	return &nodev1.AddTaintResponse{Node: n}, nil
}

// RemoveTaint implements NodeService.
func (s *Server) RemoveTaint(ctx context.Context, req *nodev1.RemoveTaintRequest) (*nodev1.RemoveTaintResponse, error) {
	if req.GetKey() == "" {
		return nil, status.Error(codes.InvalidArgument, "key: must be set")
	}
	if fe := validation.QualifiedName("key", req.GetKey()); fe != nil {
		return nil, status.Error(codes.InvalidArgument, fe.Error())
	}
	if e := req.GetEffect(); e != "" && e != nodemodel.NoSchedule && e != nodemodel.PreferNoSchedule && e != nodemodel.NoExecute {
		return nil, status.Errorf(codes.InvalidArgument, "effect: %q is not one of NoSchedule, PreferNoSchedule, NoExecute (or empty for all)", e)
	}
	n, err := s.update(ctx, req.GetName(), func(n *nodev1.Node) (bool, error) {
		var keep []*nodev1.Taint
		for _, t := range n.Spec.Taints {
			if t.GetKey() == req.GetKey() && (req.GetEffect() == "" || t.GetEffect() == req.GetEffect()) {
				continue
			}
			keep = append(keep, t)
		}
		if len(keep) == len(n.Spec.Taints) {
			if req.GetEffect() != "" && lifecycle.IsControllerManaged(req.GetKey(), req.GetEffect()) {
				return false, status.Errorf(codes.FailedPrecondition, "key: %s:%s is managed by the node lifecycle controller; it goes away when the condition behind it does", req.GetKey(), req.GetEffect())
			}
			return false, status.Errorf(codes.NotFound, "key: node %q has no user taint %s%s", n.GetMetadata().GetName(), req.GetKey(), effectSuffix(req.GetEffect()))
		}
		n.Spec.Taints = keep
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "taint removed", req.GetName(), zap.String("key", req.GetKey()), zap.String("effect", req.GetEffect()))
	return &nodev1.RemoveTaintResponse{Node: n}, nil
}

func effectSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ":" + e
}

// DeleteNode implements NodeService.
func (s *Server) DeleteNode(ctx context.Context, req *nodev1.DeleteNodeRequest) (*nodev1.DeleteNodeResponse, error) {
	name := req.GetName()
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	for range casRetries {
		o, err := s.store.Get(ctx, nodestore.Nodes, name)
		if errors.Is(err, nodestore.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "node %q not found", name)
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "read node %q: %v", name, err)
		}
		before := s.served(name, o.Value.(*nodev1.Node))
		// One transaction: the node and every record about it go together,
		// conditional on the node not having changed since it was read.
		_, err = s.store.Apply(ctx, nil,
			nodestore.Op{Kind: nodestore.Nodes, Name: name, IfModRevision: o.ModRevision},
			nodestore.Delete(nodestore.Statuses, name),
			nodestore.Delete(nodestore.Leases, name),
			nodestore.Delete(nodestore.Health, name))
		if errors.Is(err, nodestore.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "delete node %q: %v", name, err)
		}
		s.audit(ctx, "node deleted", name)
		return &nodev1.DeleteNodeResponse{Node: before}, nil
	}
	return nil, status.Errorf(codes.Aborted, "node %q kept changing; try again", name)
}

// RequestStatusUpdate implements NodeService.
func (s *Server) RequestStatusUpdate(ctx context.Context, req *nodev1.RequestStatusUpdateRequest) (*nodev1.RequestStatusUpdateResponse, error) {
	if _, err := s.node(req.GetName()); err != nil {
		return nil, err
	}
	reason := "requested by " + identity.FromContext(ctx).String()
	col, delivered, err := s.live.SendCommand(ctx, req.GetName(), reason)
	if errors.Is(err, liveness.ErrNotAttached) {
		return nil, status.Errorf(codes.NotFound, "name: node %q is not attached to any collector this monitor follows", req.GetName())
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "request status of %q: %v", req.GetName(), err)
	}
	s.audit(ctx, "status update requested", req.GetName(), zap.String("collector", col), zap.Bool("delivered", delivered))
	return &nodev1.RequestStatusUpdateResponse{Collector: col, Delivered: delivered}, nil
}

// ListEvents implements NodeService.
func (s *Server) ListEvents(_ context.Context, req *nodev1.ListEventsRequest) (*nodev1.ListEventsResponse, error) {
	limit := int(req.GetLimit())
	if limit < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit: must not be negative")
	}
	if limit == 0 {
		limit = 100
	}
	var out []*nodev1.Event
	for _, e := range s.cache.Events() {
		o := e.GetInvolvedObject()
		if (req.GetKind() != "" && o.GetKind() != req.GetKind()) || (req.GetNamespace() != "" && o.GetNamespace() != req.GetNamespace()) ||
			(req.GetName() != "" && o.GetName() != req.GetName()) {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GetLastTimestamp().AsTime(), out[j].GetLastTimestamp().AsTime()
		if !a.Equal(b) {
			return a.After(b)
		}
		return out[i].GetMetadata().GetName() > out[j].GetMetadata().GetName()
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return &nodev1.ListEventsResponse{Events: out}, nil
}

// ExplainNode implements NodeService.
func (s *Server) ExplainNode(ctx context.Context, req *nodev1.ExplainNodeRequest) (*nodev1.ExplainNodeResponse, error) {
	n, err := s.node(req.GetName())
	if err != nil {
		return nil, err
	}
	lease, _ := s.cache.Lease(req.GetName())
	facts := s.ctl.Facts(req.GetName(), n.GetMetadata().GetLabels())
	leader := ""
	if !facts.Leading {
		leader, _ = s.store.Leader(ctx, controller.ElectionName)
	}
	now := s.now()
	summary, details := Explain(now, n, lease, s.live.Node(req.GetName()), facts, leader)
	details = append(details, explainNodePods(now, n, s.cache.PodsOnNode(req.GetName()), s.evictor)...)
	return &nodev1.ExplainNodeResponse{Summary: summary, Details: details, Node: n}, nil
}

func clock(t time.Time) string { return t.Local().Format("15:04:05") }

// Explain puts a node's state in words.
func Explain(now time.Time, n *nodev1.Node, lease *nodev1.Lease, lv liveness.Node, f controller.Facts, leader string) (string, []string) {
	name := n.GetMetadata().GetName()
	conds := n.GetStatus().GetConditions()
	ready := nodemodel.FindCondition(conds, nodemodel.Ready)
	lastRenew := lv.RenewTime
	if st := lease.GetSpec().GetRenewTime(); st != nil && st.AsTime().After(lastRenew) {
		lastRenew = st.AsTime()
	}
	leaseWords := "no lease renewal was ever seen"
	if !lastRenew.IsZero() {
		leaseWords = "the lease stopped at " + clock(lastRenew)
	}
	var summary string
	switch {
	case ready == nil:
		summary = fmt.Sprintf("%s has not reported a Ready condition yet", name)
	case ready.GetStatus() == nodemodel.True:
		summary = fmt.Sprintf("Ready since %s", clock(ready.GetLastTransitionTime().AsTime()))
	case ready.GetStatus() == nodemodel.Unknown && ready.GetReason() == nodemodel.ReasonNodeStatusNeverUpdated:
		summary = fmt.Sprintf("Unknown since %s because the reporter never posted a status (%s)", clock(ready.GetLastTransitionTime().AsTime()), leaseWords)
	case ready.GetStatus() == nodemodel.Unknown:
		summary = fmt.Sprintf("Unknown since %s because %s", clock(ready.GetLastTransitionTime().AsTime()), leaseWords)
	default:
		summary = fmt.Sprintf("NotReady since %s: %s", clock(ready.GetLastTransitionTime().AsTime()), ready.GetMessage())
	}
	var d []string
	zone := nodemodel.ZoneName(f.Zone)
	if zone == "" {
		zone = `"" (no zone labels)`
	}
	for _, c := range conds {
		d = append(d, fmt.Sprintf("condition %s=%s (%s) since %s: %s", c.GetType(), c.GetStatus(), c.GetReason(), clock(c.GetLastTransitionTime().AsTime()), c.GetMessage()))
	}
	if !lastRenew.IsZero() {
		d = append(d, fmt.Sprintf("last lease renewal %s (reporter clock)%s", clock(lastRenew), collectorWords(lv, lease)))
	}
	if !lv.ObservedAt.IsZero() {
		d = append(d, fmt.Sprintf("last live renewal seen %s ago (monitor clock)", now.Sub(lv.ObservedAt).Round(time.Second)))
	}
	switch {
	case f.Leading && f.Paused != "":
		d = append(d, "judgement is PAUSED on the leader: "+f.Paused+"; no node is marked Unknown until the view is fresh, then every node gets a fresh grace period")
	case f.Leading && f.Known:
		if ready.GetStatus() == nodemodel.True || ready == nil {
			left := f.Deadline.Sub(now).Round(time.Second)
			if left >= 0 && f.QuietUntil.After(f.Probe) {
				d = append(d, fmt.Sprintf("heard %s ago, refused registration by its collector and told to stay away until %s; marked Unknown if nothing is heard for %s more (grace %s after that, deadline %s)",
					now.Sub(f.Probe).Round(time.Second), clock(f.QuietUntil), left, f.Grace, clock(f.Deadline)))
			} else if left >= 0 {
				d = append(d, fmt.Sprintf("heard %s ago; marked Unknown if nothing is heard for %s more (grace %s, deadline %s)",
					now.Sub(f.Probe).Round(time.Second), left, f.Grace, clock(f.Deadline)))
			} else {
				d = append(d, fmt.Sprintf("grace period %s expired at %s; marked Unknown at the next health pass", f.Grace, clock(f.Deadline)))
			}
		} else if !f.Heard.IsZero() {
			d = append(d, fmt.Sprintf("last heard %s ago", now.Sub(f.Heard).Round(time.Second)))
		}
	case !f.Leading:
		if leader == "" {
			leader = "unknown"
		}
		d = append(d, "this replica is not the leader (leader: "+leader+"); grace deadlines and queues are known only there")
	}
	for _, t := range n.GetSpec().GetTaints() {
		d = append(d, "taint "+taintString(t)+": "+taintWhy(t))
	}
	if f.Leading {
		rate := "stopped (QPS 0)"
		if f.ZoneQPS > 0 {
			rate = fmt.Sprintf("rate %g/s", f.ZoneQPS)
		}
		state := string(f.ZoneState)
		if state == "" {
			state = string(zones.Initial)
		}
		d = append(d, fmt.Sprintf("zone %s is %s; its NoExecute taint queue holds %d node(s), %s", zone, state, f.QueueLen, rate))
		if f.Queued {
			want := lifecycle.UnreachableNoExecute.GetKey()
			if ready.GetStatus() == nodemodel.False {
				want = lifecycle.NotReadyNoExecute.GetKey()
			}
			eta := "never while the rate is 0"
			if f.ZoneQPS > 0 {
				eta = fmt.Sprintf("in about %s", (f.NextToken + time.Duration(float64(f.Position)/f.ZoneQPS*float64(time.Second))).Round(time.Second))
			}
			d = append(d, fmt.Sprintf("%s:NoExecute queued in zone %s since %s, position %d, %s, %s", want, zone, clock(f.QueuedAt), f.Position, rate, eta))
		}
	}
	if n.GetSpec().GetUnschedulable() {
		d = append(d, "cordoned: no new workloads are placed on it")
	}
	return summary, d
}

func collectorWords(lv liveness.Node, l *nodev1.Lease) string {
	c := lv.Collector
	if c == "" {
		c = l.GetPersistence().GetCollector()
	}
	if c == "" {
		return ""
	}
	return " via collector " + c
}

func taintString(t *nodev1.Taint) string {
	s := t.GetKey()
	if t.GetValue() != "" {
		s += "=" + t.GetValue()
	}
	return s + ":" + t.GetEffect()
}

func taintWhy(t *nodev1.Taint) string {
	if !lifecycle.IsControllerManaged(t.GetKey(), t.GetEffect()) {
		return "set by an operator or at registration"
	}
	since := ""
	if t.GetTimeAdded() != nil {
		since = " since " + clock(t.GetTimeAdded().AsTime())
	}
	switch t.GetKey() {
	case nodemodel.TaintUnreachable:
		return "Ready is Unknown (node unreachable)" + since
	case nodemodel.TaintNotReady:
		return "Ready is False or not reported yet" + since
	case nodemodel.TaintUnschedulable:
		return "the node is cordoned"
	}
	return "condition " + strings.TrimPrefix(t.GetKey(), "node.kubernetes.io/") + " is reported"
}

// pageParams reads a list call's page size (0 → DefaultPageSize, capped at
// MaxPageSize) and continue token (the last name of the previous page,
// base64url) into the size and the name to continue after.
func pageParams(pageSize int32, token, rpc string) (int, string, error) {
	size := int(pageSize)
	switch {
	case size < 0:
		return 0, "", status.Error(codes.InvalidArgument, "pageSize: must not be negative")
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	if token == "" {
		return size, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 {
		return 0, "", status.Error(codes.InvalidArgument, "pageToken: not a token returned by "+rpc)
	}
	return size, string(b), nil
}
