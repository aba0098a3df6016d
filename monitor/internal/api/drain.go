// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/disruption"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/drain"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// evictRetryAfter is the RetryInfo of a budget that allows no disruption
// now; upstream sends no Retry-After then and kubectl waits 5 s.
const evictRetryAfter = 5 * time.Second

// EvictPod implements PodService: the eviction subresource (spec §15.2,
// package disruption). Any replica serves it: the budget is spent with a
// write conditional on its revision, like every other PodService write.
func (s *PodServer) EvictPod(ctx context.Context, req *podv1.EvictPodRequest) (*podv1.EvictPodResponse, error) {
	ns, name := req.GetNamespace(), req.GetName()
	if err := invalid(podutil.ValidateRef(ns, name)); err != nil {
		return nil, err
	}
	key := cache.PodKey(ns, name)
	res, err := disruption.Evict(ctx, s.store, ns, name, disruption.EvictOptions{GracePeriodSeconds: req.GracePeriodSeconds, UID: req.GetUid()}, s.now())
	if err != nil {
		return nil, evictStatus(key, err)
	}
	if res.Rev > 0 {
		s.waitCache(ctx, res.Rev)
	}
	s.audit(ctx, "pod", "pod evicted", key, zap.String("budget", res.Budget), zap.Bool("gone", res.Gone),
		zap.Int64p("gracePeriodSeconds", req.GracePeriodSeconds))
	p := res.Pod
	if !res.Gone && res.Rev > 0 {
		p = s.served(p, res.Rev)
	}
	return &podv1.EvictPodResponse{Pod: p, Gone: res.Gone}, nil
}

// evictStatus maps an eviction's error to its gRPC status: a budget that
// allows nothing now is ResourceExhausted (HTTP 429) with RetryInfo and the
// cause as an ErrorInfo.
func evictStatus(key string, err error) error {
	var ref *disruption.Refusal
	switch {
	case errors.Is(err, nodestore.ErrNotFound):
		return status.Errorf(codes.NotFound, "pod %s not found", key)
	case errors.Is(err, podlife.ErrPrecondition):
		return status.Errorf(codes.Aborted, "%v; read the pod again", err)
	case errors.As(err, &ref):
		code := codes.FailedPrecondition
		if ref.Kind == disruption.TooManyRequests {
			code = codes.ResourceExhausted
		}
		st := status.New(code, ref.Error())
		var details []protoadapt.MessageV1
		if ref.Kind == disruption.TooManyRequests {
			after := ref.RetryAfter
			if after <= 0 {
				after = evictRetryAfter
			}
			details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
		}
		if ref.Cause != "" {
			details = append(details, &errdetails.ErrorInfo{Reason: disruption.CauseDisruptionBudget, Domain: "nodepulse.io",
				Metadata: map[string]string{"budget": ref.Budget, "cause": ref.Cause}})
		}
		if ds, derr := st.WithDetails(details...); derr == nil {
			st = ds
		}
		return st.Err()
	case errors.Is(err, nodestore.ErrConflict):
		return status.Errorf(codes.Aborted, "pod %s or its disruption budget kept changing; try again", key)
	}
	return status.Errorf(codes.Unavailable, "evict pod %s: %v", key, err)
}

// drainCluster is drain.StoreCluster with the NodeService's cordon (audit,
// read-your-writes).
type drainCluster struct {
	drain.StoreCluster
	s *Server
}

func (c drainCluster) Cordon(ctx context.Context, node string) (bool, error) {
	already := false
	_, err := c.s.update(ctx, node, func(n *nodev1.Node) (bool, error) {
		already = n.Spec.Unschedulable
		n.Spec.Unschedulable = true
		return !already, nil
	})
	if err != nil {
		return false, errors.New(status.Convert(err).Message())
	}
	if !already {
		c.s.audit(ctx, "node", "node cordoned", node, zap.String("by", "drain"))
	}
	return already, nil
}

// DrainNode implements NodeService: kubectl drain (spec §15.3, package
// drain), one stream message per step. The drain runs on the replica that
// serves the stream, through the store with optimistic concurrency, so a
// leader change in the middle changes nothing; a broken stream stops it,
// and running it again resumes (the node stays cordoned, pods already gone
// are not listed, Terminating pods are only waited for).
func (s *Server) DrainNode(req *nodev1.DrainNodeRequest, stream nodev1.NodeService_DrainNodeServer) error {
	name := req.GetName()
	if err := checkName("name", name); err != nil {
		return err
	}
	sel, err := ParseSelector("podSelector", req.GetPodSelector())
	if err != nil {
		return validation.Status(err)
	}
	if t := req.GetTimeout(); t != nil && (t.CheckValid() != nil || t.AsDuration() < 0) {
		return status.Error(codes.InvalidArgument, "timeout: must be a duration of at least 0")
	}
	if g := req.GracePeriodSeconds; g != nil && *g < 0 {
		return status.Error(codes.InvalidArgument, "gracePeriodSeconds: must be at least 0 (leave it unset for the pods' own)")
	}
	if _, ok := s.cache.Node(name); !ok {
		if _, err := s.store.Get(stream.Context(), nodestore.Nodes, name); errors.Is(err, nodestore.ErrNotFound) {
			return status.Errorf(codes.NotFound, "node %q not found", name)
		}
	}
	opts := drain.Options{
		IgnoreDaemonSets: req.GetIgnoreDaemonsets(), DeleteEmptyDirData: req.GetDeleteEmptydirData(), Force: req.GetForce(),
		DisableEviction: req.GetDisableEviction(), GracePeriodSeconds: req.GracePeriodSeconds, Timeout: req.GetTimeout().AsDuration(),
		Match: sel.Matches,
	}
	c := drainCluster{StoreCluster: drain.StoreCluster{Store: s.store, Now: s.now}, s: s}
	s.audit(stream.Context(), "node", "drain started", name, zap.Bool("ignoreDaemonsets", opts.IgnoreDaemonSets),
		zap.Bool("deleteEmptydirData", opts.DeleteEmptyDirData), zap.Bool("force", opts.Force), zap.Duration("timeout", opts.Timeout))
	var sendErr error
	done := drain.Drain(stream.Context(), c, name, opts, func(e drain.Event) {
		if sendErr == nil {
			sendErr = stream.Send(drainResponse(e))
		}
	})
	s.audit(stream.Context(), "node", "drain ended", name, zap.Bool("drained", done.Drained), zap.String("message", done.Message))
	return sendErr
}

// drainResponse is the stream message of one drain event.
func drainResponse(e drain.Event) *nodev1.DrainNodeResponse {
	pod := func(action string) *nodev1.DrainNodeResponse {
		return &nodev1.DrainNodeResponse{Event: &nodev1.DrainNodeResponse_Pod{Pod: &nodev1.DrainNodeResponse_PodProgress{
			Namespace: e.Namespace, Name: e.Pod, Action: action, Message: e.Line()}}}
	}
	switch e.Type {
	case drain.Cordoned:
		return &nodev1.DrainNodeResponse{Event: &nodev1.DrainNodeResponse_Cordoned{Cordoned: e.Node}}
	case drain.AlreadyCordoned:
		return &nodev1.DrainNodeResponse{Event: &nodev1.DrainNodeResponse_AlreadyCordoned{AlreadyCordoned: e.Node}}
	case drain.Warning:
		return &nodev1.DrainNodeResponse{Event: &nodev1.DrainNodeResponse_Warning_{Warning: &nodev1.DrainNodeResponse_Warning{Message: e.Line()}}}
	case drain.Evicting:
		return pod("evicting")
	case drain.Retrying:
		return pod("retrying")
	case drain.Evicted:
		return pod("evicted")
	case drain.Deleted:
		return pod("deleted")
	case drain.Failed:
		return pod("refused")
	}
	return &nodev1.DrainNodeResponse{Event: &nodev1.DrainNodeResponse_Done_{Done: &nodev1.DrainNodeResponse_Done{Drained: e.Drained, Message: e.Message}}}
}
