// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package kubeapi serves a Kubernetes-compatible HTTP API (core/v1 nodes,
// pods, events, namespaces; coordination.k8s.io/v1 leases; apps/v1 and
// policy/v1 reads) that an unmodified kubectl or client-go uses. It is a
// second front door to the monitor's gRPC services, not a second
// implementation: every read and write calls the same NodeService,
// PodService, WorkloadService and DisruptionBudgetService methods in
// process, with the caller's identity, so validation, authorisation, the
// compare-and-swap writes and the eviction budget logic are the gRPC API's.
// It converts nodepulse's records to the k8s.io/api types on the way out
// (package convert) and patches back into service calls on the way in.
package kubeapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
)

// Backends are the services behind the API (the gRPC servers' own
// implementations) and the authorizer of the gRPC API.
type Backends struct {
	Nodes     *api.Server
	Pods      podv1.PodServiceServer
	Workloads appsv1.WorkloadServiceServer
	Budgets   policyv1.DisruptionBudgetServiceServer
	Auth      api.Authorizer
}

// Server is the HTTP handler of the API.
type Server struct {
	b    Backends
	lg   *zap.Logger
	now  func() time.Time
	addr string
	// maxWatch bounds a watch without timeoutSeconds (kube-apiserver closes
	// after 30 to 60 minutes; clients watch again).
	maxWatch time.Duration
	// bookmarkEvery spaces the bookmarks of a watch that asked for them.
	bookmarkEvery time.Duration
	// pollEvery spaces the snapshots a lease or event watch compares.
	pollEvery time.Duration
}

// New returns the handler; addr is what /api advertises.
func New(b Backends, lg *zap.Logger, addr string) *Server {
	return &Server{b: b, lg: lg, now: time.Now, addr: addr, maxWatch: 30 * time.Minute, bookmarkEvery: time.Minute, pollEvery: time.Second}
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := callerContext(r)
	r = r.WithContext(ctx)
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && s.discovery(w, path) {
		return
	}
	if path == "/healthz" || path == "/livez" || path == "/readyz" {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
		return
	}
	req, err := parsePath(path)
	if err != nil {
		writeErr(w, err)
		return
	}
	res, ok := s.resources()[req.gv+"/"+req.resource]
	if !ok {
		writeErr(w, newErr(404, "NotFound", fmt.Sprintf("the server could not find the requested resource (%s %s)", r.Method, r.URL.Path)))
		return
	}
	if !res.namespaced && req.namespace != "" {
		writeErr(w, newErr(404, "NotFound", "the server could not find the requested resource"))
		return
	}
	if err := s.authorize(ctx, r.Method, req); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.serve(w, r, res, req); err != nil {
		writeErr(w, err)
	}
}

// callerContext gives the request the identity a gRPC call would have: the
// verified client certificate as the gRPC peer's TLS info, and the
// Authorization header as gRPC metadata (the operator bearer token).
func callerContext(r *http.Request) context.Context {
	ctx := r.Context()
	p := &peer.Peer{Addr: remoteAddr(r.RemoteAddr)}
	if r.TLS != nil {
		p.AuthInfo = credentials.TLSInfo{State: *r.TLS}
	}
	ctx = peer.NewContext(ctx, p)
	if a := r.Header.Get("Authorization"); a != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", a))
	}
	return ctx
}

type addrString string

func (a addrString) Network() string { return "tcp" }
func (a addrString) String() string  { return string(a) }

func remoteAddr(s string) net.Addr { return addrString(s) }

// authorize asks the gRPC API's authorizer as if the equivalent gRPC method
// were called: reads are NodeService reads, changes are the changes.
func (s *Server) authorize(ctx context.Context, method string, req request) error {
	m := "/nodepulse.node.v1.NodeService/GetNode"
	if method != http.MethodGet {
		m = "/nodepulse.node.v1.NodeService/CordonNode"
	}
	if err := s.b.Auth.Authorize(ctx, m); err != nil {
		return fromGRPC(req.resource, req.name, err)
	}
	return nil
}

// request is a parsed resource path.
type request struct {
	gv, resource, namespace, name, sub string
	allNamespaces                      bool
}

// parsePath reads /api/v1/[namespaces/<ns>/]<resource>[/<name>[/<sub>]]
// and /apis/<group>/<version>/...; a namespace object itself is
// /api/v1/namespaces/<name>.
func parsePath(p string) (request, error) {
	var r request
	var rest string
	switch {
	case strings.HasPrefix(p, "/api/v1/"):
		r.gv, rest = "v1", strings.TrimPrefix(p, "/api/v1/")
	case strings.HasPrefix(p, "/apis/"):
		parts := strings.SplitN(strings.TrimPrefix(p, "/apis/"), "/", 3)
		if len(parts) < 3 {
			return r, newErr(404, "NotFound", "the server could not find the requested resource")
		}
		r.gv, rest = parts[0]+"/"+parts[1], parts[2]
	default:
		return r, newErr(404, "NotFound", "the server could not find the requested resource")
	}
	seg := strings.Split(rest, "/")
	if seg[0] == "namespaces" && len(seg) >= 3 {
		r.namespace, seg = seg[1], seg[2:]
	} else if seg[0] != "namespaces" {
		r.allNamespaces = true
	}
	r.resource = seg[0]
	if len(seg) > 1 {
		r.name = seg[1]
	}
	if len(seg) > 2 {
		r.sub = seg[2]
	}
	if len(seg) > 3 {
		return r, newErr(404, "NotFound", "the server could not find the requested resource")
	}
	if r.resource == "namespaces" {
		r.allNamespaces = false
	}
	return r, nil
}

// Serve runs the API on ln until ctx ends (tlsCfg nil: plaintext).
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsCfg *tls.Config) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			errc <- hs.ServeTLS(ln, "", "")
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("kube API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Watches end with the base context; Shutdown waits for the rest.
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("kube API shutdown: %w", err)
	}
	return nil
}

func splitGV(gv string) (string, string) {
	g, v, ok := strings.Cut(gv, "/")
	if !ok {
		return "", gv
	}
	return g, v
}

func cutPrefix(s, p string) (string, bool) { return strings.CutPrefix(s, p) }
func cut(s, sep string) (string, string, bool) {
	return strings.Cut(s, sep)
}
func contains(s, sub string) bool { return strings.Contains(s, sub) }
