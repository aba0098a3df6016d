// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package kubeapi serves the Kubernetes API that an unmodified kubectl or
// client-go uses (core/v1 nodes, pods, events, namespaces, services;
// coordination.k8s.io/v1 leases; apps/v1 owners; policy/v1 budgets and
// evictions; the authorization and authentication self reviews) on
// k8s.io/apiserver's generic server, as metrics-server and other
// aggregated API servers do. The library brings routing, discovery
// (aggregated and legacy), content negotiation (JSON, YAML, protobuf),
// tables, watch framing, the four patch types on top of Get and Update,
// dry-run, field validation, OpenAPI v2 and v3, and metav1.Status errors.
// The storages here (rest.Storage implementations) hold no data: each
// calls the monitor's services in process (the same calls the gRPC door
// makes), so validation, the compare-and-swap writes and the eviction
// budgets are the same through either door, and authorization is decided
// once by package authz.
package kubeapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	goruntime "runtime"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"
	"k8s.io/klog/v2"

	npappsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nppolicyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/gen/openapi"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/services/version"
)

// KubernetesVersion is the API level served (the k8s.io modules'
// release), what `kubectl version` shows as the server's version, with
// nodepulse's own version as its build metadata.
const KubernetesVersion = "1.37.2"

// Backends are the services behind the API (the gRPC servers' own
// implementations, called in process) and the authorization policy.
type Backends struct {
	Nodes     *api.Server
	Pods      *api.PodServer
	Workloads npappsv1.WorkloadServiceServer
	Budgets   nppolicyv1.DisruptionBudgetServiceServer
	Policy    authz.Policy
	// now is the clock of table ages (time.Now when nil).
	now func() time.Time
}

// Server is the HTTP handler of the API.
type Server struct {
	handler http.Handler
	lg      *zap.Logger
}

// New builds the API; addr is the address it advertises (discovery, cluster-info).
func New(b Backends, lg *zap.Logger, addr string) (*Server, error) {
	if b.now == nil {
		b.now = time.Now
	}
	// k8s.io/apiserver logs through klog: into the monitor's log.
	klog.SetLogger(zapr.NewLogger(lg.Named("apiserver")))
	c, err := newCodecs()
	if err != nil {
		return nil, err
	}
	cfg := genericapiserver.NewConfig(c.codecs)
	cfg.ExternalAddress = addr
	// Required by the generic server; nothing here calls itself through it.
	cfg.LoopbackClientConfig = &restclient.Config{Host: addr}
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString(KubernetesVersion, "", "")
	cfg.Authentication.Authenticator = authn{policy: b.Policy}
	cfg.Authorization.Authorizer = b.Policy
	cfg.RuleResolver = b.Policy
	// The monitor's own /metrics (admin port) is its metrics endpoint;
	// profiling is there too.
	cfg.EnableMetrics, cfg.EnableProfiling = false, false
	namer := openapinamer.NewDefinitionNamer(c.scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "nodepulse", KubernetesVersion
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "nodepulse", KubernetesVersion
	gs, err := cfg.Complete(nil).New("nodepulse-kube-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("kube API: %w", err)
	}
	if err := install(gs, c, b, lg); err != nil {
		return nil, fmt.Errorf("kube API: %w", err)
	}
	prepared := gs.PrepareRun()
	gs.RunPostStartHooks(context.Background())
	_ = prepared
	mux := http.NewServeMux()
	mux.Handle("/", gs.Handler)
	// The generic server's /version is the k8s.io/component-base build
	// stamp, unset outside Kubernetes' own builds.
	mux.HandleFunc("GET /version", serveVersion)
	return &Server{handler: mux, lg: lg}, nil
}

func serveVersion(w http.ResponseWriter, _ *http.Request) {
	v := apimachineryversion.Info{Major: "1", Minor: "37", GitVersion: "v" + KubernetesVersion + "+nodepulse." + semverMeta(version.String()),
		GitCommit: version.String(), GoVersion: goruntime.Version(), Compiler: goruntime.Compiler, Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// semverMeta keeps what semver allows in build metadata.
func semverMeta(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	return string(b)
}

// install registers every storage with its group.
func install(gs *genericapiserver.GenericAPIServer, c codecs, b Backends, lg *zap.Logger) error {
	group := func(name string) genericapiserver.APIGroupInfo {
		return genericapiserver.NewDefaultAPIGroupInfo(name, c.scheme, c.params, c.codecs)
	}
	n := newNodes(b, lg)
	p := newPods(b)
	core := group(corev1.GroupName)
	core.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"nodes": n, "nodes/status": &nodeStatus{n: n},
		"pods": p, "pods/status": &podStatus{p: p}, "pods/eviction": &eviction{svc: b.Pods},
		"events":     newEvents(b, n),
		"namespaces": newNamespaces(b, p),
		"services":   newServices(b, n),
	}
	if err := gs.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &core); err != nil {
		return err
	}
	coord := group(coordinationv1.GroupName)
	coord.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{"leases": newLeases(b, n)}
	policy := group(policyv1.GroupName)
	policy.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{"poddisruptionbudgets": newBudgets(b)}
	apps := group(appsv1.GroupName)
	rs := newWorkloads(b, c.scheme, npappsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET, "ReplicaSet", "replicasets", []string{"rs"})
	sts := newWorkloads(b, c.scheme, npappsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET, "StatefulSet", "statefulsets", []string{"sts"})
	apps.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"daemonsets":  newWorkloads(b, c.scheme, npappsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET, "DaemonSet", "daemonsets", []string{"ds"}),
		"replicasets": rs, "replicasets/scale": &scale{w: rs},
		"statefulsets": sts, "statefulsets/scale": &scale{w: sts},
	}
	authzGroup := group(authorizationv1.GroupName)
	authzGroup.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"selfsubjectaccessreviews": &accessReview{review: review{kind: "SelfSubjectAccessReview", newObj: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }}, policy: b.Policy},
		"selfsubjectrulesreviews":  &rulesReview{review: review{kind: "SelfSubjectRulesReview", newObj: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }}, policy: b.Policy},
	}
	authnGroup := group(authenticationv1.GroupName)
	authnGroup.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"selfsubjectreviews": &selfReview{review: review{kind: "SelfSubjectReview", newObj: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }}},
	}
	return gs.InstallAPIGroups(&coord, &policy, &apps, &authzGroup, &authnGroup)
}

// ServeHTTP serves a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Serve runs the API on ln until ctx ends (tlsCfg nil: plaintext). The
// listener is nodepulse's own (certificate reloading, plaintext for
// development), so the generic server's secure serving is not used.
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
