// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package admin serves a process's operational HTTP endpoints on their own
// port: /metrics (Prometheus), /healthz (liveness: the process answers),
// /readyz (readiness: every registered check passes) and /debug/pprof.
package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Default ports of the nodepulse binaries. gRPC on 90xx, admin HTTP on 91xx.
const (
	CollectorGRPCPort = 9090
	MonitorGRPCPort   = 9091
	CollectorAdmin    = 9190
	MonitorAdmin      = 9191
	ReporterAdmin     = 9192
)

// Config of the admin endpoint.
type Config struct {
	ListenAddress string
}

// RegisterFlags adds admin.listen-address with the given default.
func (c *Config) RegisterFlags(fs *flag.FlagSet, def string) {
	fs.StringVar(&c.ListenAddress, "admin.listen-address", def, "HTTP address for /metrics, /healthz, /readyz and /debug/pprof; empty disables it")
}

// Server is the admin HTTP server.
type Server struct {
	lg     *zap.Logger
	ln     net.Listener
	srv    *http.Server
	mux    *http.ServeMux
	mu     sync.Mutex
	checks map[string]func() error
}

// NewRegistry returns a registry with the Go runtime and process collectors
// and the goroutine scheduling latency, which every binary wants.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newSchedLatency())
	return reg
}

// New listens on cfg.ListenAddress at once (so a port clash fails at start
// and tests can read Addr) and prepares the handlers. It returns nil, nil when
// the address is empty.
func New(cfg Config, lg *zap.Logger, gatherer prometheus.Gatherer) (*Server, error) {
	if cfg.ListenAddress == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("admin listen on %s: %w", cfg.ListenAddress, err)
	}
	s := &Server{lg: lg.Named("admin"), ln: ln, checks: map[string]func() error{}}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", s.readyz)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.mux = mux
	return s, nil
}

// Handle serves h at pattern beside the standard endpoints, for what a
// binary exposes for debugging on its own (call before Run).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// AddReadyCheck registers a readiness check; /readyz fails while any check
// returns an error, and says which and why.
func (s *Server) AddReadyCheck(name string, check func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = check
}

// Ready runs every check and joins their errors.
func (s *Server) Ready() error {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	checks := s.checks
	s.mu.Unlock()
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := checks[n](); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.ReplaceAll(err.Error(), "\n", "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}

// Run serves until ctx is done, then shuts down within 5s.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.lg.Info("admin endpoint listening", zap.String("address", s.ln.Addr().String()))
	select {
	case err := <-errc:
		return fmt.Errorf("admin server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("admin shutdown: %w", err)
	}
	return nil
}
