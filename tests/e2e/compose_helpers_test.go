// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// composeServices are every service of docker-compose.yml.
var composeServices = []string{
	"etcd-1", "etcd-2", "etcd-3",
	"collector-1", "collector-2",
	"monitor-1", "monitor-2",
	"reporter-1", "reporter-2", "reporter-3",
}

// composePortVars are the host ports docker-compose.yml publishes; the test
// sets each to "" so Docker picks free ones (several stacks can coexist).
var composePortVars = []string{
	"NODEPULSE_PORT_ETCD",
	"NODEPULSE_PORT_COLLECTOR_1_GRPC", "NODEPULSE_PORT_COLLECTOR_1_ADMIN", "NODEPULSE_PORT_COLLECTOR_2_ADMIN",
	"NODEPULSE_PORT_MONITOR_1_GRPC", "NODEPULSE_PORT_MONITOR_1_ADMIN", "NODEPULSE_PORT_MONITOR_1_KUBE",
	"NODEPULSE_PORT_MONITOR_2_GRPC", "NODEPULSE_PORT_MONITOR_2_ADMIN",
}

// composeCLI finds a compose implementation: the `docker compose` v2 plugin,
// else the v1 `docker-compose` program. Both read the same file.
func composeCLI() ([]string, error) {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, nil
	}
	return nil, errors.New("neither `docker compose` nor `docker-compose` is installed")
}

// composeStack is one running copy of docker-compose.yml under its own
// project name.
type composeStack struct {
	t       *testing.T
	cli     []string
	root    string
	project string
	files   []string
	env     []string
}

// command is `<compose> -f docker-compose.yml -f ... <args>`, the documented
// invocation; the project name comes from COMPOSE_PROJECT_NAME in s.env.
func (s *composeStack) command(ctx context.Context, args ...string) *exec.Cmd {
	full := slices.Clone(s.cli[1:])
	for _, f := range s.files {
		full = append(full, "-f", f)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, s.cli[0], full...)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), s.env...)
	return cmd
}

// make runs a target of the repository's Makefile with the stack's
// environment and returns its combined output.
func (s *composeStack) make(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// compose runs a compose subcommand and returns its standard output.
func (s *composeStack) compose(ctx context.Context, args ...string) (string, error) {
	cmd := s.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v\n%s", strings.Join(s.cli, " "), strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (s *composeStack) mustCompose(ctx context.Context, args ...string) string {
	s.t.Helper()
	out, err := s.compose(ctx, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// container returns the container id of a service.
func (s *composeStack) container(ctx context.Context, service string) string {
	s.t.Helper()
	id := strings.TrimSpace(s.mustCompose(ctx, "ps", "-q", service))
	if id == "" || strings.Contains(id, "\n") {
		s.t.Fatalf("service %s: container id %q", service, id)
	}
	return id
}

// hostPort returns the 127.0.0.1:port a service's container port is published on.
func (s *composeStack) hostPort(ctx context.Context, service string, port int) string {
	s.t.Helper()
	out := strings.TrimSpace(s.mustCompose(ctx, "port", service, fmt.Sprint(port)))
	if !strings.HasPrefix(out, "127.0.0.1:") {
		s.t.Fatalf("%s:%d is published on %q, want 127.0.0.1:<port>", service, port, out)
	}
	return out
}

// docker runs a plain docker command against one of this stack's containers.
func docker(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func mustDocker(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := docker(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// saveLogs writes every container's log and the stack's state into dir, and
// echoes the last lines of each into the test output.
func (s *composeStack) saveLogs(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Logf("artifacts: %v", err)
		return
	}
	ps, err := s.compose(ctx, "ps")
	if err != nil {
		ps += err.Error()
	}
	_ = os.WriteFile(filepath.Join(dir, "ps.txt"), []byte(ps), 0o644)
	s.t.Logf("compose ps:\n%s", ps)
	for _, svc := range composeServices {
		out, err := s.compose(ctx, "logs", "--no-color", "--timestamps", svc)
		if err != nil {
			out += "\n" + err.Error()
		}
		_ = os.WriteFile(filepath.Join(dir, svc+".log"), []byte(out), 0o644)
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		s.t.Logf("--- %s (last 15 of %d lines; full log in %s)\n%s", svc, len(lines), filepath.Join(dir, svc+".log"),
			strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	s.t.Logf("container logs saved in %s", dir)
}

// nodeHealth is what users see of one node.
type nodeHealth struct {
	ready, reason string
	taints        []string // key:effect of controller taints
}

func (h nodeHealth) healthy() bool {
	return h.ready == nodemodel.True && !slices.ContainsFunc(h.taints, func(t string) bool {
		return strings.HasPrefix(t, "node.kubernetes.io/unreachable:") || strings.HasPrefix(t, "node.kubernetes.io/not-ready:")
	})
}

func (h nodeHealth) String() string {
	return fmt.Sprintf("Ready=%s(%s) taints=%v", h.ready, h.reason, h.taints)
}

func healthOf(n *nodev1.Node) nodeHealth {
	c := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready)
	h := nodeHealth{ready: c.GetStatus(), reason: c.GetReason()}
	for _, t := range n.GetSpec().GetTaints() {
		h.taints = append(h.taints, t.GetKey()+":"+t.GetEffect())
	}
	return h
}

// listHealth lists every node through one monitor.
func listHealth(ctx context.Context, c nodev1.NodeServiceClient) (map[string]nodeHealth, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.ListNodes(ctx, &nodev1.ListNodesRequest{})
	if err != nil {
		return nil, err
	}
	m := map[string]nodeHealth{}
	for _, n := range resp.GetNodes() {
		m[n.GetMetadata().GetName()] = healthOf(n)
	}
	return m, nil
}

func describe(m map[string]nodeHealth) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s; ", n, m[n])
	}
	return b.String()
}

// poll calls cond every half second until it holds or timeout passes, then
// fails the test with cond's last description.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stateRecorder follows WatchNodes on one monitor and records every moment a
// node was not healthy, so a flap shorter than any polling interval is seen.
type stateRecorder struct {
	mu         sync.Mutex
	violations []string
	err        error
	cancel     context.CancelFunc
	done       chan struct{}
}

func recordUnhealthy(ctx context.Context, c nodev1.NodeServiceClient) *stateRecorder {
	ctx, cancel := context.WithCancel(ctx)
	r := &stateRecorder{cancel: cancel, done: make(chan struct{})}
	stream, err := c.WatchNodes(ctx, &nodev1.WatchNodesRequest{})
	if err != nil {
		r.err = err
		close(r.done)
		return r
	}
	go func() {
		defer close(r.done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				if ctx.Err() == nil {
					r.mu.Lock()
					r.err = err
					r.mu.Unlock()
				}
				return
			}
			if ev.GetType() == "BOOKMARK" {
				continue
			}
			if h := healthOf(ev.GetNode()); !h.healthy() || ev.GetType() == "DELETED" {
				r.mu.Lock()
				r.violations = append(r.violations, fmt.Sprintf("%s %s %s %s", time.Now().Format("15:04:05.000"), ev.GetType(), ev.GetNode().GetMetadata().GetName(), h))
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// stop ends the watch and returns what it saw.
func (r *stateRecorder) stop() ([]string, error) {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.violations, r.err
}

// isLeader scrapes a monitor's admin /metrics for nodepulse_monitor_leader.
func isLeader(ctx context.Context, adminAddr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+adminAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "nodepulse_monitor_leader "); ok {
			return strings.TrimSpace(v) == "1", nil
		}
	}
	return false, errors.New("no nodepulse_monitor_leader metric")
}

func randomSuffix() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 6)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}
