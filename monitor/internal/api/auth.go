// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"crypto/subtle"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/identity"
)

// changeMethods are the NodeService methods that change something.
var changeMethods = map[string]bool{
	nodev1.NodeService_CordonNode_FullMethodName:          true,
	nodev1.NodeService_UncordonNode_FullMethodName:        true,
	nodev1.NodeService_AddTaint_FullMethodName:            true,
	nodev1.NodeService_RemoveTaint_FullMethodName:         true,
	nodev1.NodeService_DeleteNode_FullMethodName:          true,
	nodev1.NodeService_RequestStatusUpdate_FullMethodName: true,
	podv1.PodService_CreatePod_FullMethodName:             true,
	podv1.PodService_UpdatePodStatus_FullMethodName:       true,
	podv1.PodService_DeletePod_FullMethodName:             true,
	podv1.PodService_EvictPod_FullMethodName:              true,
	nodev1.NodeService_DrainNode_FullMethodName:           true,

	appsv1.WorkloadService_CreateWorkload_FullMethodName:                      true,
	appsv1.WorkloadService_ScaleWorkload_FullMethodName:                       true,
	appsv1.WorkloadService_DeleteWorkload_FullMethodName:                      true,
	policyv1.DisruptionBudgetService_CreatePodDisruptionBudget_FullMethodName: true,
	policyv1.DisruptionBudgetService_DeletePodDisruptionBudget_FullMethodName: true,
}

// guardedServices are the services this authorizer protects (not health
// or reflection).
var guardedServices = []string{
	nodev1.NodeService_ServiceDesc.ServiceName,
	podv1.PodService_ServiceDesc.ServiceName,
	appsv1.WorkloadService_ServiceDesc.ServiceName,
	policyv1.DisruptionBudgetService_ServiceDesc.ServiceName,
}

// guarded reports whether a method belongs to a guarded service.
func guarded(method string) bool {
	for _, s := range guardedServices {
		if strings.HasPrefix(method, "/"+s+"/") {
			return true
		}
	}
	return false
}

// Authorizer decides who may call what.
//
//   - Reads: any authenticated caller (a verified client certificate), or
//     anyone on a plaintext server (development mode).
//   - Changes: the operator role. On a plaintext server, callers presenting
//     "authorization: Bearer <OperatorToken>" when a token is configured,
//     else anyone (the server warns loudly at startup).
//   - A node identity may never change nodes, whatever else holds.
type Authorizer struct {
	// Plaintext: the server has no TLS, so no caller has an identity.
	Plaintext bool
	// OperatorToken, when set, is required for changes in plaintext mode.
	OperatorToken string
	Log           *zap.Logger
}

// Authorize returns nil or a PermissionDenied/Unauthenticated status.
func (a Authorizer) Authorize(ctx context.Context, method string) error {
	id := identity.FromContext(ctx)
	change := changeMethods[method]
	deny := func(code codes.Code, why string) error {
		a.Log.Warn("request refused", zap.String("method", method), zap.String("caller", id.String()), zap.String("reason", why))
		return status.Error(code, why)
	}
	switch id.Role {
	case identity.Node:
		if change {
			return deny(codes.PermissionDenied, "caller "+id.String()+" is a node: nodes may not change nodes or pods through the admin API")
		}
		return nil
	case identity.Operator:
		return nil
	case identity.Component, identity.Unknown:
		if change {
			return deny(codes.PermissionDenied, "caller "+id.String()+" lacks the operator role (certificate organization nodepulse:operators) needed to change nodes or pods")
		}
		return nil
	}
	// Anonymous.
	if !a.Plaintext {
		return deny(codes.Unauthenticated, "no verified client certificate: present one issued by the cluster CA")
	}
	if !change || a.OperatorToken == "" {
		return nil
	}
	if tok := bearer(ctx); tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.OperatorToken)) == 1 {
		return nil
	}
	return deny(codes.PermissionDenied, "changes need 'authorization: Bearer <operator token>' (--auth.operator-token) on this plaintext server")
}

func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// Unary is the auth interceptor for unary calls.
func (a Authorizer) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if guarded(info.FullMethod) {
			if err := a.Authorize(ctx, info.FullMethod); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// Stream is the auth interceptor for streams.
func (a Authorizer) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if guarded(info.FullMethod) {
			if err := a.Authorize(ss.Context(), info.FullMethod); err != nil {
				return err
			}
		}
		return h(srv, ss)
	}
}
