// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package authz

import (
	"context"
	"fmt"
	"strings"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

// action is a gRPC method in Kubernetes terms.
type action struct {
	verb, group, resource, sub string
	namespaced                 bool
}

// methods names every guarded gRPC method's verb and resource, so a call
// is judged as the same request through the Kubernetes API would be. A
// method missing here is refused (a new RPC must be named to be served).
var methods = map[string]action{
	nodev1.NodeService_GetNode_FullMethodName:             {verb: "get", resource: "nodes"},
	nodev1.NodeService_ListNodes_FullMethodName:           {verb: "list", resource: "nodes"},
	nodev1.NodeService_WatchNodes_FullMethodName:          {verb: "watch", resource: "nodes"},
	nodev1.NodeService_ExplainNode_FullMethodName:         {verb: "get", resource: "nodes"},
	nodev1.NodeService_GetLease_FullMethodName:            {verb: "get", group: "coordination.k8s.io", resource: "leases"},
	nodev1.NodeService_ListEvents_FullMethodName:          {verb: "list", resource: "events"},
	nodev1.NodeService_CordonNode_FullMethodName:          {verb: "patch", resource: "nodes"},
	nodev1.NodeService_UncordonNode_FullMethodName:        {verb: "patch", resource: "nodes"},
	nodev1.NodeService_AddTaint_FullMethodName:            {verb: "patch", resource: "nodes"},
	nodev1.NodeService_RemoveTaint_FullMethodName:         {verb: "patch", resource: "nodes"},
	nodev1.NodeService_DeleteNode_FullMethodName:          {verb: "delete", resource: "nodes"},
	nodev1.NodeService_RequestStatusUpdate_FullMethodName: {verb: "patch", resource: "nodes"},
	// A drain cordons and evicts: the cordon is the node patch.
	nodev1.NodeService_DrainNode_FullMethodName: {verb: "patch", resource: "nodes"},

	podv1.PodService_CreatePod_FullMethodName:       {verb: "create", resource: "pods", namespaced: true},
	podv1.PodService_GetPod_FullMethodName:          {verb: "get", resource: "pods", namespaced: true},
	podv1.PodService_ExplainPod_FullMethodName:      {verb: "get", resource: "pods", namespaced: true},
	podv1.PodService_ListPods_FullMethodName:        {verb: "list", resource: "pods", namespaced: true},
	podv1.PodService_WatchPods_FullMethodName:       {verb: "watch", resource: "pods", namespaced: true},
	podv1.PodService_UpdatePodStatus_FullMethodName: {verb: "update", resource: "pods", sub: "status", namespaced: true},
	podv1.PodService_UpdatePod_FullMethodName:       {verb: "update", resource: "pods", namespaced: true},
	podv1.PodService_DeletePod_FullMethodName:       {verb: "delete", resource: "pods", namespaced: true},
	podv1.PodService_EvictPod_FullMethodName:        {verb: "create", resource: "pods", sub: "eviction", namespaced: true},

	appsv1.WorkloadService_CreateWorkload_FullMethodName: {verb: "create", group: "apps", resource: "workloads", namespaced: true},
	appsv1.WorkloadService_GetWorkload_FullMethodName:    {verb: "get", group: "apps", resource: "workloads", namespaced: true},
	appsv1.WorkloadService_ListWorkloads_FullMethodName:  {verb: "list", group: "apps", resource: "workloads", namespaced: true},
	appsv1.WorkloadService_WatchWorkloads_FullMethodName: {verb: "watch", group: "apps", resource: "workloads", namespaced: true},
	appsv1.WorkloadService_ScaleWorkload_FullMethodName:  {verb: "update", group: "apps", resource: "workloads", sub: "scale", namespaced: true},
	appsv1.WorkloadService_DeleteWorkload_FullMethodName: {verb: "delete", group: "apps", resource: "workloads", namespaced: true},

	policyv1.DisruptionBudgetService_CreatePodDisruptionBudget_FullMethodName: {verb: "create", group: "policy", resource: "poddisruptionbudgets", namespaced: true},
	policyv1.DisruptionBudgetService_GetPodDisruptionBudget_FullMethodName:    {verb: "get", group: "policy", resource: "poddisruptionbudgets", namespaced: true},
	policyv1.DisruptionBudgetService_ListPodDisruptionBudgets_FullMethodName:  {verb: "list", group: "policy", resource: "poddisruptionbudgets", namespaced: true},
	policyv1.DisruptionBudgetService_DeletePodDisruptionBudget_FullMethodName: {verb: "delete", group: "policy", resource: "poddisruptionbudgets", namespaced: true},
}

// guardedServices are the services the interceptors judge (not health,
// reflection or the collectors' feed).
var guardedServices = []string{
	nodev1.NodeService_ServiceDesc.ServiceName,
	podv1.PodService_ServiceDesc.ServiceName,
	appsv1.WorkloadService_ServiceDesc.ServiceName,
	policyv1.DisruptionBudgetService_ServiceDesc.ServiceName,
}

func guarded(method string) bool {
	for _, s := range guardedServices {
		if strings.HasPrefix(method, "/"+s+"/") {
			return true
		}
	}
	return false
}

// GRPC applies a Policy to gRPC calls.
type GRPC struct {
	Policy Policy
	Log    *zap.Logger
}

// User is the caller of a gRPC call in Kubernetes terms: its verified
// certificate, else the operator token, else anonymous (nil on a TLS server
// without a client certificate).
func (g GRPC) User(ctx context.Context) user.Info {
	if p, ok := peer.FromContext(ctx); ok && p.AuthInfo != nil {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if u := FromTLS(&ti.State); u != nil {
				return u
			}
		}
	}
	if u := g.Policy.FromToken(bearer(ctx)); u != nil {
		return u
	}
	if g.Policy.Plaintext {
		return Anonymous()
	}
	return nil
}

// Authorize judges a call of method with request req (nil for a stream):
// the context the call goes on with, carrying its user as the Kubernetes
// API's filters carry theirs (request.WithUser), so the services see one
// caller whichever door it came through; or a PermissionDenied or
// Unauthenticated status naming the caller.
func (g GRPC) Authorize(ctx context.Context, method string, req any) (context.Context, error) {
	u := g.User(ctx)
	if u == nil {
		g.Log.Warn("request refused", zap.String("method", method), zap.String("reason", "no verified client certificate"))
		return ctx, status.Error(codes.Unauthenticated, "no verified client certificate: present one issued by the cluster CA")
	}
	act, ok := methods[method]
	if !ok {
		return ctx, status.Errorf(codes.PermissionDenied, "method %s has no authorization rule", method)
	}
	a := authorizer.AttributesRecord{User: u, Verb: act.verb, APIGroup: act.group, APIVersion: "v1",
		Resource: act.resource, Subresource: act.sub, ResourceRequest: true}
	if r, ok := req.(interface{ GetName() string }); ok {
		a.Name = r.GetName()
	}
	if r, ok := req.(interface{ GetNamespace() string }); ok && act.namespaced {
		a.Namespace = r.GetNamespace()
	}
	dec, why, _ := g.Policy.Authorize(ctx, a)
	if dec == authorizer.DecisionAllow {
		return request.WithUser(ctx, u), nil
	}
	msg := Forbidden(a, why)
	g.Log.Warn("request refused", zap.String("method", method), zap.String("caller", u.GetName()), zap.String("reason", why))
	return ctx, status.Error(codes.PermissionDenied, msg)
}

// Forbidden words a denial as kube-apiserver does.
func Forbidden(a authorizer.Attributes, why string) string {
	res := a.GetResource()
	if a.GetSubresource() != "" {
		res += "/" + a.GetSubresource()
	}
	where := "at the cluster scope"
	if a.GetNamespace() != "" {
		where = fmt.Sprintf("in the namespace %q", a.GetNamespace())
	}
	group := a.GetAPIGroup()
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q %s: %s", a.GetUser().GetName(), a.GetVerb(), res, group, where, why)
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

// Unary is the interceptor for unary calls.
func (g GRPC) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if guarded(info.FullMethod) {
			var err error
			if ctx, err = g.Authorize(ctx, info.FullMethod, req); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// Stream is the interceptor for streams.
func (g GRPC) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if guarded(info.FullMethod) {
			ctx, err := g.Authorize(ss.Context(), info.FullMethod, nil)
			if err != nil {
				return err
			}
			w := middleware.WrapServerStream(ss)
			w.WrappedContext = ctx
			ss = w
		}
		return h(srv, ss)
	}
}
