// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/run"
)

// Server is what a server app runs beside its own components: the admin
// endpoint, in one run.Group with them, so that the first to fail stops
// them all and shutdown waits for every one up to a deadline. The app's
// New builds it (also in tests, which run apps in-process), its Run runs
// it.
type Server struct {
	admin *admin.Server
	group run.Group
}

// NewServer opens the admin endpoint at cfg's address at once (so a port
// clash fails the start; none when the address is empty), serving the
// metrics of reg, a registry of its own when reg is nil.
func NewServer(cfg admin.Config, lg *zap.Logger, reg *prometheus.Registry) (*Server, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	ad, err := admin.New(cfg, lg, reg)
	if err != nil {
		return nil, err
	}
	return &Server{admin: ad}, nil
}

// Add registers a component to run (name is used in errors).
func (s *Server) Add(name string, c run.Component) { s.group.Add(name, c) }

// AddReadyCheck adds a check to /readyz (nothing without an admin
// endpoint).
func (s *Server) AddReadyCheck(name string, check func() error) {
	if s.admin != nil {
		s.admin.AddReadyCheck(name, check)
	}
}

// Admin is the admin endpoint, nil when disabled.
func (s *Server) Admin() *admin.Server { return s.admin }

// AdminAddr is the admin endpoint's bound address, "" when disabled.
func (s *Server) AdminAddr() string {
	if s.admin == nil {
		return ""
	}
	return s.admin.Addr().String()
}

// Run runs the components and the admin endpoint until ctx ends or one of
// them stops, then cancels the others and waits for them at most
// shutdownTimeout (run.Group.Run).
func (s *Server) Run(ctx context.Context, shutdownTimeout time.Duration) error {
	if s.admin != nil {
		s.group.Add("admin", s.admin)
	}
	return s.group.Run(ctx, shutdownTimeout)
}

// InstanceID returns "<hostname>-<8 hex digits>" (name for the host when it
// has none): an id unique per start, for a process that registers itself
// where a restarted one must not be taken for the old one.
func InstanceID(name string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = name
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return h + "-" + hex.EncodeToString(b[:])
}
