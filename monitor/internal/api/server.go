// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package api owns the monitor's gRPC side: NodeService and PodService
// turn requests into calls and results into responses and status codes.
// Queries and watches come from the watch cache (any replica); admin changes
// and pod writes go to etcd with optimistic concurrency (any replica);
// RequestStatusUpdate goes through the collector that holds the node;
// ExplainNode reads the cache plus the leader's facts. What a pod may be,
// its defaults and its fate belong to the workloads packages, the node's
// judgement to the lifecycle controller; the API reaches both through the
// small interfaces below (NodeLifecycle, Evictor), which monitor/app fills.
package api

import (
	"context"
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
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/zones"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Liveness is what the API needs from the feed tracker.
type Liveness interface {
	Node(name string) liveness.Node
	SendCommand(ctx context.Context, name, reason string) (string, bool, error)
}

// NodeLifecycle is what ExplainNode asks the node lifecycle controller: the
// leader's facts about one node and, on a follower, who leads.
type NodeLifecycle interface {
	Facts(name string, labels map[string]string) NodeFacts
	// Leader names the leading replica ("" when unknown).
	Leader(ctx context.Context) string
}

// NodeFacts is what the leader knows about one node's timing. The
// controller keeps the same fields (controller.Facts); monitor/app converts.
type NodeFacts struct {
	// Leading: this replica leads; otherwise only Paused and zone facts are
	// empty and timing is unknown here.
	Leading bool
	// Paused is why judgement is paused ("" when judging).
	Paused string
	// Known: the leader has a health record for the node.
	Known bool
	// Probe is when the node was last seen alive or granted fresh grace;
	// Heard when liveness evidence last arrived; Deadline = Probe + Grace,
	// or QuietUntil + Grace when a collector told the node to stay away
	// until later than Probe.
	Probe, Heard, ReadyTransition, Deadline, QuietUntil time.Time
	Grace                                               time.Duration
	// Zone key, state and the taint rate of its queue.
	Zone      string
	ZoneState zones.State
	ZoneQPS   float64
	// Queued: waiting in the zone queue at Position (0 = next); NextToken is
	// when the limiter grants its next token (-1: never).
	Queued    bool
	Position  int
	QueueLen  int
	QueuedAt  time.Time
	NextToken time.Duration
	// Remembered: processed by the queue and not yet forgotten.
	Remembered bool
}

// Evictor is what the API asks the evictor: what happens to pods, in words
// (package eviction).
type Evictor interface {
	// ExplainPod: whether and when the pod is deleted, and why; the time is
	// the deletion time when one is known or predicted.
	ExplainPod(ctx context.Context, now time.Time, p *podv1.Pod, node *nodev1.Node) (string, []string, time.Time)
	// ExplainNodePods: one line for each pod of the node.
	ExplainNodePods(now time.Time, node *nodev1.Node, pods []*podv1.Pod) []string
}

// Server implements NodeService.
type Server struct {
	nodev1.UnimplementedNodeServiceServer
	base
	lc   NodeLifecycle
	live Liveness
	// evictor, when set, lets ExplainNode say when the node's pods go.
	evictor Evictor
}

// SetEvictor lets ExplainNode list the pending evictions of the leader.
func (s *Server) SetEvictor(e Evictor) { s.evictor = e }

// New returns the service.
func New(store nodestore.Store, c *cache.Cache, lc NodeLifecycle, live Liveness, lg *zap.Logger, now func() time.Time) *Server {
	return &Server{base: newBase(store, c, lg.Named("api"), now), lc: lc, live: live}
}

func checkName(field, name string) error {
	return invalid(validation.NodeName(field, name))
}

func (s *Server) node(name string) (*nodev1.Node, error) {
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	n, ok := s.cache.Node(name)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "node %q not found", name)
	}
	return s.withHeartbeat(n), nil
}

// withHeartbeat serves a cached node with its reporter's latest status
// heartbeat (spec §6.7): the conditions' lastHeartbeatTime is the later of
// the stored one and the latest report's, from the feed or the lease
// checkpoint, so it is at most a report frequency old although unchanged
// reports are never written to etcd. The monitor's Unknown overrides keep
// their own times. n is the cache's and is not modified.
func (s *Server) withHeartbeat(n *nodev1.Node) *nodev1.Node {
	name := n.GetMetadata().GetName()
	e, ok := s.cache.Entry(name)
	if !ok {
		return n
	}
	return nodemodel.WithHeartbeat(n, e.Health, liveness.Reported(s.live.Node(name), e.Lease))
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
			resp.NextPageToken = pageToken(resp.Nodes[size-1].GetMetadata().GetName())
			break
		}
		resp.Nodes = append(resp.Nodes, s.withHeartbeat(n))
	}
	return resp, nil
}

// WatchNodes implements NodeService.
func (s *Server) WatchNodes(req *nodev1.WatchNodesRequest, stream nodev1.NodeService_WatchNodesServer) error {
	return s.Watch(stream.Context(), req, stream.Send)
}

// Watch is WatchNodes for a caller in process (the Kubernetes API): send
// gets every event, in order, until ctx ends or send fails.
func (s *Server) Watch(ctx context.Context, req *nodev1.WatchNodesRequest, send func(*nodev1.WatchNodesResponse) error) error {
	sel, err := ParseSelector("labelSelector", req.GetLabelSelector())
	if err != nil {
		return validation.Status(err)
	}
	match := func(n *nodev1.Node) bool { return sel.Matches(n.GetMetadata().GetLabels()) }
	from, err := watchFrom(req.GetResourceVersion(), func() (cache.Version, error) {
		nodes, ver := s.cache.Nodes()
		for _, n := range nodes {
			if !match(n) {
				continue
			}
			if err := send(&nodev1.WatchNodesResponse{Type: cache.Added, Node: s.withHeartbeat(n), ResourceVersion: ver.String()}); err != nil {
				return ver, err
			}
		}
		return ver, nil
	})
	if err != nil {
		return err
	}
	return follow(ctx, from, s.cache.ChangesAfter, func(ch cache.Change) (cache.Version, error) {
		typ, n := watchEvent(match, ch.Type, ch.Node, ch.Old)
		if typ == "" {
			return ch.Version, nil
		}
		// A heartbeat alone is no watch event: unchanged reports change
		// nothing stored (spec §6.7); events carry it when they are sent.
		return ch.Version, send(&nodev1.WatchNodesResponse{Type: typ, Node: s.withHeartbeat(n), ResourceVersion: ch.Version.String()})
	})
}

// GetLease implements NodeService.
func (s *Server) GetLease(_ context.Context, req *nodev1.GetLeaseRequest) (*nodev1.GetLeaseResponse, error) {
	if err := checkName("name", req.GetName()); err != nil {
		return nil, err
	}
	l, _ := s.cache.Lease(req.GetName())
	resp, ok := leaseResponse(l, s.live.Node(req.GetName()))
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no lease for node %q (neither stored nor seen on a collector feed)", req.GetName())
	}
	return resp, nil
}

// leaseResponse is what GetLease answers for a node with stored lease l
// (nil when none) and live state lv; false when the monitor knows of no
// lease at all.
func leaseResponse(l *nodev1.Lease, lv liveness.Node) (*nodev1.GetLeaseResponse, bool) {
	if l == nil && lv.RenewTime.IsZero() {
		return nil, false
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
	return resp, true
}

// update applies fn to nodes/<name> with compare-and-swap, retrying on
// conflicts with a fresh read. fn returns an error to refuse the change, or
// false when nothing needs to change.
func (s *Server) update(ctx context.Context, name string, fn func(n *nodev1.Node) (bool, error)) (*nodev1.Node, error) {
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var n *nodev1.Node
	_, rev, err := s.rewrite(ctx, nodestore.Nodes, name, fmt.Sprintf("node %q", name), "write", nil, func(o nodestore.Object) ([]nodestore.Op, error) {
		n = proto.CloneOf(o.Value.(*nodev1.Node))
		if n.Spec == nil {
			n.Spec = &nodev1.NodeSpec{}
		}
		changed, err := fn(n)
		if err != nil || !changed {
			return nil, err
		}
		return []nodestore.Op{{Kind: nodestore.Nodes, Name: name, Value: n, IfModRevision: o.ModRevision}}, nil
	})
	if err != nil {
		return nil, err
	}
	if rev != 0 {
		s.waitCache(ctx, rev)
	}
	return s.served(name, n), nil
}

// served merges a just-written node with the cached status and health.
func (s *Server) served(name string, meta *nodev1.Node) *nodev1.Node {
	e, _ := s.cache.Entry(name)
	n := nodemodel.Merge(meta, e.Status, e.Health)
	if n.Metadata != nil {
		n.Metadata.Name = name
	}
	return nodemodel.WithHeartbeat(n, e.Health, liveness.Reported(s.live.Node(name), e.Lease))
}

// CordonNode implements NodeService.
func (s *Server) CordonNode(ctx context.Context, req *nodev1.CordonNodeRequest) (*nodev1.CordonNodeResponse, error) {
	n, err := s.setUnschedulable(ctx, req.GetName(), true, "node cordoned")
	if err != nil {
		return nil, err
	}
	return &nodev1.CordonNodeResponse{Node: n}, nil
}

// UncordonNode implements NodeService.
func (s *Server) UncordonNode(ctx context.Context, req *nodev1.UncordonNodeRequest) (*nodev1.UncordonNodeResponse, error) {
	n, err := s.setUnschedulable(ctx, req.GetName(), false, "node uncordoned")
	if err != nil {
		return nil, err
	}
	return &nodev1.UncordonNodeResponse{Node: n}, nil
}

// setUnschedulable cordons (on) or uncordons a node; a node already so is
// left unwritten.
func (s *Server) setUnschedulable(ctx context.Context, name string, on bool, audit string) (*nodev1.Node, error) {
	n, err := s.update(ctx, name, func(n *nodev1.Node) (bool, error) {
		if n.Spec.Unschedulable == on {
			return false, nil
		}
		n.Spec.Unschedulable = on
		return true, nil
	})
	if err == nil {
		s.audit(ctx, "node", audit, name)
	}
	return n, err
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
	s.audit(ctx, "node", "taint added", req.GetName(), zap.String("key", t.GetKey()), zap.String("effect", t.GetEffect()))
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
	s.audit(ctx, "node", "taint removed", req.GetName(), zap.String("key", req.GetKey()), zap.String("effect", req.GetEffect()))
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
	var before *nodev1.Node
	_, _, err := s.rewrite(ctx, nodestore.Nodes, name, fmt.Sprintf("node %q", name), "delete", nil, func(o nodestore.Object) ([]nodestore.Op, error) {
		before = s.served(name, o.Value.(*nodev1.Node))
		// One transaction: the node and every record about it go together,
		// conditional on the node not having changed since it was read.
		return []nodestore.Op{{Kind: nodestore.Nodes, Name: name, IfModRevision: o.ModRevision},
			nodestore.Delete(nodestore.Statuses, name),
			nodestore.Delete(nodestore.Leases, name),
			nodestore.Delete(nodestore.Health, name)}, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "node", "node deleted", name)
	return &nodev1.DeleteNodeResponse{Node: before}, nil
}

// RequestStatusUpdate implements NodeService.
func (s *Server) RequestStatusUpdate(ctx context.Context, req *nodev1.RequestStatusUpdateRequest) (*nodev1.RequestStatusUpdateResponse, error) {
	if _, err := s.node(req.GetName()); err != nil {
		return nil, err
	}
	reason := "requested by " + authz.Caller(ctx)
	col, delivered, err := s.live.SendCommand(ctx, req.GetName(), reason)
	if errors.Is(err, liveness.ErrNotAttached) {
		return nil, status.Errorf(codes.NotFound, "name: node %q is not attached to any collector this monitor follows", req.GetName())
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "request status of %q: %v", req.GetName(), err)
	}
	s.audit(ctx, "node", "status update requested", req.GetName(), zap.String("collector", col), zap.Bool("delivered", delivered))
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
	facts := s.lc.Facts(req.GetName(), n.GetMetadata().GetLabels())
	leader := ""
	if !facts.Leading {
		leader = s.lc.Leader(ctx)
	}
	now := s.now()
	summary, details := Explain(now, n, lease, s.live.Node(req.GetName()), facts, leader)
	if s.evictor != nil {
		var pods []*podv1.Pod
		for _, pe := range s.cache.PodsOnNode(req.GetName()) {
			pods = append(pods, pe.Pod)
		}
		details = append(details, s.evictor.ExplainNodePods(now, n, pods)...)
	}
	return &nodev1.ExplainNodeResponse{Summary: summary, Details: details, Node: n}, nil
}

func clock(t time.Time) string { return t.Local().Format("15:04:05") }

// Explain puts a node's state in words.
// clockSkewWords says how far the node's clock is from its collector's
// (spec §17.2), and that nothing is judged by it.
func clockSkewWords(skew time.Duration) string {
	words := fmt.Sprintf("node clock %s %s its collector's at its latest status report", skew.Abs().Round(time.Millisecond), lifecycle.SkewSide(skew))
	if skew.Abs() < time.Second {
		return words + " (in step)"
	}
	return words + "; its liveness is judged by the control plane's clocks, never by it"
}

func Explain(now time.Time, n *nodev1.Node, lease *nodev1.Lease, lv liveness.Node, f NodeFacts, leader string) (string, []string) {
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
	if !lv.ClockSkewAt.IsZero() {
		d = append(d, clockSkewWords(lv.ClockSkew))
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
