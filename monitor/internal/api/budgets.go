// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// BudgetServer implements DisruptionBudgetService: PodDisruptionBudgets as
// records. The status (disruptions allowed) is the disruption controller's
// and the eviction call's; this service only stores the spec.
type BudgetServer struct {
	policyv1.UnimplementedDisruptionBudgetServiceServer
	base
}

// NewBudgetServer returns the service.
func NewBudgetServer(store nodestore.Store, c *cache.Cache, lg *zap.Logger, now func() time.Time) *BudgetServer {
	return &BudgetServer{base: newBase(store, c, lg.Named("budgets"), now)}
}

// CreatePodDisruptionBudget implements DisruptionBudgetService.
func (s *BudgetServer) CreatePodDisruptionBudget(ctx context.Context, req *policyv1.CreatePodDisruptionBudgetRequest) (*policyv1.CreatePodDisruptionBudgetResponse, error) {
	const field = "podDisruptionBudget"
	if err := validation.PodDisruptionBudget(field, req.GetPodDisruptionBudget(), validation.DefaultLimits()).Err(); err != nil {
		return nil, validation.Status(err)
	}
	pdb := proto.CloneOf(req.GetPodDisruptionBudget())
	// The status starts empty (no disruption allowed) until the disruption
	// controller has counted the pods, as upstream's does.
	pdb.Status = &policyv1.PodDisruptionBudgetStatus{}
	admitMeta(pdb, s.now())
	out, err := s.create(ctx, nodestore.PodDisruptionBudgets, field, pdb)
	if err != nil {
		return nil, err
	}
	return &policyv1.CreatePodDisruptionBudgetResponse{PodDisruptionBudget: out.(*policyv1.PodDisruptionBudget)}, nil
}

// GetPodDisruptionBudget implements DisruptionBudgetService.
func (s *BudgetServer) GetPodDisruptionBudget(_ context.Context, req *policyv1.GetPodDisruptionBudgetRequest) (*policyv1.GetPodDisruptionBudgetResponse, error) {
	e, err := s.get(nodestore.PodDisruptionBudgets, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &policyv1.GetPodDisruptionBudgetResponse{PodDisruptionBudget: e.Object.(*policyv1.PodDisruptionBudget)}, nil
}

// ListPodDisruptionBudgets implements DisruptionBudgetService.
func (s *BudgetServer) ListPodDisruptionBudgets(_ context.Context, req *policyv1.ListPodDisruptionBudgetsRequest) (*policyv1.ListPodDisruptionBudgetsResponse, error) {
	ns := req.GetNamespace()
	if ns != "" {
		if err := invalid(podutil.ValidateNamespace("namespace", ns)); err != nil {
			return nil, err
		}
	}
	size, after, err := pageParams(req.GetPageSize(), req.GetPageToken(), "ListPodDisruptionBudgets")
	if err != nil {
		return nil, err
	}
	objs, ver := s.cache.Objects(nodestore.PodDisruptionBudgets)
	resp := &policyv1.ListPodDisruptionBudgetsResponse{ResourceVersion: ver.String()}
	last := ""
	for _, e := range objs {
		md := e.Object.GetMetadata()
		key := cache.PodKey(md.GetNamespace(), md.GetName())
		if key <= after || ns != "" && md.GetNamespace() != ns {
			continue
		}
		if len(resp.PodDisruptionBudgets) == size {
			resp.NextPageToken = pageToken(last)
			break
		}
		resp.PodDisruptionBudgets = append(resp.PodDisruptionBudgets, e.Object.(*policyv1.PodDisruptionBudget))
		last = key
	}
	return resp, nil
}

// DeletePodDisruptionBudget implements DisruptionBudgetService.
func (s *BudgetServer) DeletePodDisruptionBudget(ctx context.Context, req *policyv1.DeletePodDisruptionBudgetRequest) (*policyv1.DeletePodDisruptionBudgetResponse, error) {
	o, err := s.remove(ctx, nodestore.PodDisruptionBudgets, req.GetNamespace(), req.GetName(), "")
	if err != nil {
		return nil, err
	}
	pdb, ok := o.(*policyv1.PodDisruptionBudget)
	if !ok {
		return nil, status.Errorf(codes.Internal, "stored budget is a %T", o)
	}
	return &policyv1.DeletePodDisruptionBudgetResponse{PodDisruptionBudget: pdb}, nil
}
