// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package runtimeinfo finds the container runtime of the host and its
// version, for nodeInfo.containerRuntimeVersion, in the kubelet's form
// "<runtime>://<version>": containerd and CRI-O through the CRI
// RuntimeService.Version call on their sockets, Docker through GET /version
// on its API socket. A host without any of them reports "" — the reporter
// does not need a runtime to report its node.
package runtimeinfo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Default socket paths.
var (
	// DefaultCRIEndpoints: containerd's, then CRI-O's.
	DefaultCRIEndpoints = []string{"unix:///run/containerd/containerd.sock", "unix:///var/run/crio/crio.sock"}
	// DefaultDockerEndpoint is the Docker Engine API socket.
	DefaultDockerEndpoint = "unix:///var/run/docker.sock"
)

// criAPIVersion is the version the kubelet sends in VersionRequest.
const criAPIVersion = "0.1.0"

// Config says where to look.
type Config struct {
	// CRIEndpoints are CRI runtime sockets, tried in order.
	CRIEndpoints []string
	// DockerEndpoint is the Docker Engine API socket ("" : none).
	DockerEndpoint string
	// Timeout bounds one call to one socket.
	Timeout time.Duration
}

// SocketPath returns the file of an endpoint: "unix:///run/x.sock" or a
// plain absolute path.
func SocketPath(endpoint string) (string, error) {
	p := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		p = rest
	} else if strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("endpoint %q: only unix sockets (unix:///path or /path) are supported", endpoint)
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("endpoint %q: want an absolute socket path", endpoint)
	}
	return p, nil
}

// Validate checks every endpoint's form (not that it exists).
func (c Config) Validate() error {
	var errs []error
	for _, e := range c.CRIEndpoints {
		if _, err := SocketPath(e); err != nil {
			errs = append(errs, err)
		}
	}
	if c.DockerEndpoint != "" {
		if _, err := SocketPath(c.DockerEndpoint); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Detect asks each runtime whose socket exists, CRI endpoints first, and
// returns the first answer ("containerd://1.7.27"). No socket at all: ""
// and no error. Sockets that exist but do not answer: "" and their errors
// (Docker Engine ships a containerd with its CRI plugin off, so a failed
// containerd before a working Docker is not an error).
func Detect(ctx context.Context, cfg Config) (string, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	var errs []error
	for _, e := range cfg.CRIEndpoints {
		path, err := SocketPath(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !exists(path) {
			continue
		}
		v, err := criVersion(ctx, path, cfg.Timeout)
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("CRI runtime at %s: %w", path, err))
	}
	if cfg.DockerEndpoint != "" {
		path, err := SocketPath(cfg.DockerEndpoint)
		switch {
		case err != nil:
			errs = append(errs, err)
		case exists(path):
			v, err := dockerVersion(ctx, path, cfg.Timeout)
			if err == nil {
				return v, nil
			}
			errs = append(errs, fmt.Errorf("docker at %s: %w", path, err))
		}
	}
	return "", errors.Join(errs...)
}

func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}

// criVersion: "<runtime_name>://<runtime_version>", the version without a
// leading "v", as the kubelet writes it (it parses the version as semver).
func criVersion(ctx context.Context, path string, timeout time.Duration) (string, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{Version: criAPIVersion})
	if err != nil {
		return "", err
	}
	if r.GetRuntimeName() == "" || r.GetRuntimeVersion() == "" {
		return "", fmt.Errorf("version answer without a runtime name or version: %q %q", r.GetRuntimeName(), r.GetRuntimeVersion())
	}
	return r.GetRuntimeName() + "://" + strings.TrimPrefix(r.GetRuntimeVersion(), "v"), nil
}

// dockerVersion: "docker://<Version>" from the Engine API's /version.
func dockerVersion(ctx context.Context, path string, timeout time.Duration) (string, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /version: %s", resp.Status)
	}
	var v struct{ Version string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	if v.Version == "" {
		return "", errors.New("GET /version: no Version")
	}
	return "docker://" + v.Version, nil
}

// Watcher keeps the runtime version current: the runtime may start after
// the reporter, be upgraded or go away. It asks every Refresh and logs only
// changes, so an absent or broken runtime is one log line, not one a
// period.
type Watcher struct {
	cfg     Config
	refresh time.Duration
	lg      *zap.Logger

	mu      sync.Mutex
	version string
	lastErr string
	once    bool
}

// NewWatcher returns a watcher; Run it.
func NewWatcher(cfg Config, refresh time.Duration, lg *zap.Logger) *Watcher {
	if refresh <= 0 {
		refresh = time.Minute
	}
	return &Watcher{cfg: cfg, refresh: refresh, lg: lg.Named("runtime")}
}

// Version is the last answer ("" before the first, or without a runtime).
func (w *Watcher) Version() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

// Refresh asks the runtimes once.
func (w *Watcher) Refresh(ctx context.Context) {
	v, err := Detect(ctx, w.cfg)
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	w.mu.Lock()
	changed := !w.once || v != w.version || errText != w.lastErr
	w.version, w.lastErr, w.once = v, errText, true
	w.mu.Unlock()
	if !changed {
		return
	}
	switch {
	case v != "":
		w.lg.Info("container runtime found", zap.String("containerRuntimeVersion", v))
	case err != nil:
		w.lg.Warn("container runtime sockets present but not answering; containerRuntimeVersion stays empty", zap.Error(err))
	default:
		w.lg.Info("no container runtime socket found; containerRuntimeVersion stays empty",
			zap.Strings("cri", w.cfg.CRIEndpoints), zap.String("docker", w.cfg.DockerEndpoint))
	}
}

// Run refreshes until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	first := w.refresh
	if !w.once {
		first = 0
	}
	w.mu.Unlock()
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.Refresh(ctx)
			t.Reset(w.refresh)
		}
	}
}
