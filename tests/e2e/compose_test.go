// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/tests/binaries"
)

// The timers of deploy/compose/short-timers.yml, which the bounds below are
// derived from.
const (
	composeGrace  = 8 * time.Second // --node-monitor-grace-period
	composePeriod = 1 * time.Second // --node-monitor-period
	// slack absorbs what the spec does not bound: docker's own latency and a
	// CPU shared with builds and other tests.
	composeSlack = 30 * time.Second
	// quietWindow: how long "nothing changes" is watched after a failure,
	// three grace periods, so a stalled pipeline would have shown.
	quietWindow = 3 * composeGrace
)

var composeNodes = []string{"node-1", "node-2", "node-3"}

// TestCompose runs the shipped docker-compose.yml (with short timers) and
// breaks it the ways operators will: a reporter stopped, a reporter cut off
// the network, an etcd member stopped, a collector stopped, the leading
// monitor stopped. Users (the NodeService API on a published 127.0.0.1
// port) must see exactly the node state changes the spec promises and no
// others.
//
// It runs when a Docker engine answers; NODEPULSE_E2E_COMPOSE=0 skips it,
// NODEPULSE_E2E_COMPOSE=1 makes a missing Docker a failure instead of a skip.
// NODEPULSE_E2E_IMAGE_TAG=<tag> uses already built images instead of
// running deploy/build-images.sh. NODEPULSE_E2E_ARTIFACTS=<dir> is where
// container logs go when the test fails (default: a new temporary directory,
// printed).
func TestCompose(t *testing.T) {
	if testing.Short() {
		t.Skip("docker compose end-to-end test: skipped in -short mode")
	}
	gate := os.Getenv("NODEPULSE_E2E_COMPOSE")
	if gate == "0" {
		t.Skip("docker compose end-to-end test: disabled by NODEPULSE_E2E_COMPOSE=0")
	}
	skipOrFail := func(format string, args ...any) {
		t.Helper()
		if gate == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set NODEPULSE_E2E_COMPOSE=1 to make this a failure)", args...)
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		skipOrFail("docker compose end-to-end test: no Docker engine (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	cli, err := composeCLI()
	if err != nil {
		skipOrFail("docker compose end-to-end test: %v", err)
	}
	root, err := binaries.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	// The stack is started and stopped with the commands docs/operations.md
	// shows: `make up TIMERS=short` (images, then `docker compose -f
	// docker-compose.yml -f deploy/compose/short-timers.yml up -d`) and
	// `make down`, under a unique COMPOSE_PROJECT_NAME and image tag (the
	// variables compose and the Makefile both read), with free host ports.
	project := "npe2e" + randomSuffix()
	tag := os.Getenv("NODEPULSE_E2E_IMAGE_TAG")
	prebuilt := tag != ""
	if !prebuilt {
		tag = project
	}
	s := &composeStack{
		t:       t,
		cli:     cli,
		root:    root,
		project: project,
		files:   []string{"docker-compose.yml", filepath.Join("deploy", "compose", "short-timers.yml")},
		env:     []string{"NODEPULSE_IMAGE_TAG=" + tag, "COMPOSE_PROJECT_NAME=" + project},
	}
	for _, v := range composePortVars {
		s.env = append(s.env, v+"=")
	}
	// make runs compose the way this test found it, not its own guess.
	makeArgs := []string{"TIMERS=short", "COMPOSE=" + strings.Join(cli, " ")}
	if !prebuilt {
		t.Cleanup(func() {
			for _, img := range []string{"etcd", "collector", "monitor", "reporter"} {
				_, _ = docker(context.Background(), "image", "rm", "nodepulse/"+img+":"+tag)
			}
		})
	}
	// Cleanups run last-registered first: logs are saved before the stack
	// and its volumes are removed.
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer dcancel()
		if out, err := s.make(dctx, append([]string{"down"}, makeArgs...)...); err != nil {
			t.Errorf("make down: %v\n%s", err, out)
		}
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir := os.Getenv("NODEPULSE_E2E_ARTIFACTS")
		if dir == "" {
			if dir, err = os.MkdirTemp("", "nodepulse-compose-e2e-"); err != nil {
				t.Logf("artifacts dir: %v", err)
				return
			}
		} else {
			dir = filepath.Join(dir, project)
		}
		s.saveLogs(dir)
	})

	start := time.Now()
	if prebuilt {
		// Images already built: the documented compose command alone.
		s.mustCompose(ctx, "up", "-d")
	} else if out, err := s.make(ctx, append([]string{"up"}, makeArgs...)...); err != nil {
		t.Fatalf("make up TIMERS=short: %v\n%s", err, out)
	}
	t.Logf("compose project %s (images nodepulse/*:%s) up in %s (%s)", project, tag, time.Since(start).Round(time.Second), strings.Join(cli, " "))

	monitors := map[string]nodev1.NodeServiceClient{}
	admin := map[string]string{}
	// connect (re)dials a monitor: a restarted container may be published
	// on a different free port.
	outer := t
	connect := func(t *testing.T, m string) {
		t.Helper()
		cc, err := grpc.NewClient(s.hostPort(ctx, m, 9091), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		outer.Cleanup(func() { cc.Close() })
		monitors[m] = nodev1.NewNodeServiceClient(cc)
		admin[m] = s.hostPort(ctx, m, 9191)
	}
	connect(t, "monitor-1")
	connect(t, "monitor-2")
	other := map[string]string{"monitor-1": "monitor-2", "monitor-2": "monitor-1"}

	// healthyOn: the given monitors serve all three nodes Ready, untainted.
	healthyOn := func(ms ...string) (bool, string) {
		var states []string
		for _, m := range ms {
			h, err := listHealth(ctx, monitors[m])
			if err != nil {
				return false, m + ": " + err.Error()
			}
			states = append(states, m+": "+describe(h))
			for _, n := range composeNodes {
				if st, ok := h[n]; !ok || !st.healthy() {
					return false, strings.Join(states, " | ")
				}
			}
		}
		return true, ""
	}
	allHealthy := func() (bool, string) { return healthyOn("monitor-1", "monitor-2") }
	nodeIs := func(m, node string, want func(nodeHealth) bool) func() (bool, string) {
		return func() (bool, string) {
			h, err := listHealth(ctx, monitors[m])
			if err != nil {
				return false, err.Error()
			}
			return want(h[node]), describe(h)
		}
	}
	unreachable := func(h nodeHealth) bool {
		return h.ready == "Unknown" && strings.Contains(strings.Join(h.taints, ","), "node.kubernetes.io/unreachable:")
	}
	restore := func(t *testing.T, what string) {
		t.Helper()
		took := poll(t, 2*time.Minute+composeSlack, what, allHealthy)
		t.Logf("%s: all nodes Ready again after %s", what, took.Round(100*time.Millisecond))
	}
	// quiet watches monitor m for quietWindow after a failure and requires
	// that no node left Ready=True untainted at any moment.
	quiet := func(t *testing.T, m string, during func()) {
		t.Helper()
		rec := recordUnhealthy(ctx, monitors[m])
		during()
		time.Sleep(quietWindow)
		if ok, state := healthyOn(m); !ok {
			t.Errorf("after %s: %s", quietWindow, state)
		}
		violations, err := rec.stop()
		if err != nil {
			t.Errorf("WatchNodes on %s broke: %v", m, err)
		}
		for _, v := range violations {
			t.Errorf("a node changed state (seen by %s's WatchNodes): %s", m, v)
		}
	}

	took := poll(t, 3*time.Minute, "all three nodes Ready on both monitors", allHealthy)
	t.Logf("all nodes Ready %s after up", took.Round(100*time.Millisecond))

	// The kubectl commands of the seeds, unmodified, against the compose
	// stack's plaintext Kubernetes API (monitor-1's 6443, published as
	// NODEPULSE_PORT_MONITOR_1_KUBE), as TestKubectl runs them against make run.
	t.Run("kubectl", func(t *testing.T) {
		bin := kubectlBin(t)
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: compose\n  cluster: {server: \"http://%s\"}\nusers:\n- name: dev\n  user: {}\ncontexts:\n- name: compose\n  context: {cluster: compose, user: dev}\ncurrent-context: compose\n", s.hostPort(ctx, "monitor-1", 6443))
		if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cacheDir := t.TempDir()
		kubectl := func(args ...string) string {
			t.Helper()
			out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kc, "--cache-dir", cacheDir}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		fieldsOf := func(out, first string) []string {
			t.Helper()
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == first {
					return f
				}
			}
			t.Fatalf("no row %q in:\n%s", first, out)
			return nil
		}
		out := kubectl("get", "nodes")
		for _, n := range composeNodes {
			if f := fieldsOf(out, n); f[1] != "Ready" {
				t.Errorf("kubectl get nodes: %s is %q:\n%s", n, f[1], out)
			}
		}
		if out := kubectl("get", "nodes", "-o", "wide"); !strings.Contains(out, "INTERNAL-IP") || !strings.Contains(out, "KERNEL-VERSION") {
			t.Errorf("kubectl get nodes -o wide:\n%s", out)
		}
		if out := kubectl("describe", "node", "node-1"); !strings.Contains(out, "Conditions:") || !strings.Contains(out, "Lease:") {
			t.Errorf("kubectl describe node node-1:\n%s", out)
		}
		kubectl("cordon", "node-3")
		if f := fieldsOf(kubectl("get", "nodes"), "node-3"); f[1] != "Ready,SchedulingDisabled" {
			t.Errorf("after cordon node-3 is %q", f[1])
		}
		kubectl("uncordon", "node-3")
		kubectl("taint", "nodes", "node-3", "e2e=compose:NoSchedule")
		if out := kubectl("get", "node", "node-3", "-o", "jsonpath={.spec.taints}"); !strings.Contains(out, `"key":"e2e"`) {
			t.Errorf("taint not served: %s", out)
		}
		kubectl("taint", "nodes", "node-3", "e2e:NoSchedule-")
		kubectl("label", "node", "node-3", "e2e=compose")
		if out := kubectl("get", "nodes", "-l", "e2e=compose", "-o", "jsonpath={.items[*].metadata.name}"); out != "node-3" {
			t.Errorf("kubectl get nodes -l e2e=compose: %q", out)
		}
		kubectl("label", "node", "node-3", "e2e-")
		if out := kubectl("get", "leases", "-n", "kube-node-lease"); !strings.Contains(out, "HOLDER") || !strings.Contains(out, "node-1") {
			t.Errorf("kubectl get leases -n kube-node-lease:\n%s", out)
		}
		kubectl("get", "events", "--field-selector", "involvedObject.name=node-1")
		// Back to healthy before the faults: uncordoned, untainted.
		poll(t, time.Minute, "all nodes healthy after the kubectl writes", allHealthy)
	})

	t.Run("reporter stopped", func(t *testing.T) {
		id := s.container(ctx, "reporter-1")
		mustDocker(t, ctx, "stop", id)
		took := poll(t, composeGrace+composePeriod+composeSlack, "node-1 Unknown and tainted unreachable", nodeIs("monitor-1", "node-1", unreachable))
		t.Logf("node-1 Unknown+unreachable %s after its reporter stopped (grace %s + period %s)", took.Round(100*time.Millisecond), composeGrace, composePeriod)
		if h, _ := listHealth(ctx, monitors["monitor-2"]); !unreachable(h["node-1"]) {
			// Both replicas serve the same store; allow one period of lag.
			poll(t, composePeriod+composeSlack, "monitor-2 to serve node-1 as unreachable too", nodeIs("monitor-2", "node-1", unreachable))
		}
		for _, n := range []string{"node-2", "node-3"} {
			if h, _ := listHealth(ctx, monitors["monitor-1"]); !h[n].healthy() {
				t.Errorf("%s is %s while only node-1's reporter is down", n, h[n])
			}
		}
		mustDocker(t, ctx, "start", id)
		restore(t, "reporter-1 restarted")
	})

	t.Run("reporter disconnected from the network", func(t *testing.T) {
		id := s.container(ctx, "reporter-2")
		network := strings.Fields(mustDocker(t, ctx, "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", id))
		if len(network) != 1 {
			t.Fatalf("reporter-2 networks %v, want exactly one", network)
		}
		mustDocker(t, ctx, "network", "disconnect", network[0], id)
		took := poll(t, composeGrace+composePeriod+composeSlack, "node-2 Unknown and tainted unreachable", nodeIs("monitor-1", "node-2", unreachable))
		t.Logf("node-2 Unknown+unreachable %s after its network was cut", took.Round(100*time.Millisecond))
		mustDocker(t, ctx, "network", "connect", network[0], id)
		// Back within the reporter's reconnect backoff; generous bound.
		took = poll(t, 2*time.Minute, "node-2 Ready again after the network came back", nodeIs("monitor-1", "node-2", nodeHealth.healthy))
		t.Logf("node-2 Ready %s after reconnecting", took.Round(100*time.Millisecond))
		restore(t, "reporter-2 reconnected")
	})

	t.Run("etcd member stopped", func(t *testing.T) {
		// etcd-1 is first in every --etcd.endpoints list: clients must move.
		id := s.container(ctx, "etcd-1")
		quiet(t, "monitor-1", func() { mustDocker(t, ctx, "stop", id) })
		for _, m := range []string{"monitor-1", "monitor-2"} {
			if _, err := listHealth(ctx, monitors[m]); err != nil {
				t.Errorf("%s stopped answering ListNodes with one etcd member down: %v", m, err)
			}
		}
		mustDocker(t, ctx, "start", id)
		poll(t, 2*time.Minute, "etcd-1 healthy again", func() (bool, string) {
			st, err := docker(ctx, "inspect", "--format", "{{.State.Health.Status}}", id)
			return st == "healthy", st + fmt.Sprint(err)
		})
		restore(t, "etcd-1 restarted")
	})

	t.Run("collector stopped", func(t *testing.T) {
		holders := func() (map[string]string, error) {
			m := map[string]string{}
			for _, n := range composeNodes {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				resp, err := monitors["monitor-1"].GetLease(rctx, &nodev1.GetLeaseRequest{Name: n})
				rcancel()
				if err != nil {
					return nil, err
				}
				m[n] = resp.GetCollector()
			}
			return m, nil
		}
		before, err := holders()
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, c := range before {
			count[c]++
		}
		victim := "collector-1"
		if count["collector-2"] > count["collector-1"] {
			victim = "collector-2"
		}
		survivor := map[string]string{"collector-1": "collector-2", "collector-2": "collector-1"}[victim]
		t.Logf("streams before: %v; stopping %s", before, victim)
		if count[victim] == 0 {
			t.Fatalf("no node streams to either collector id %v", before)
		}
		id := s.container(ctx, victim)
		quiet(t, "monitor-1", func() {
			mustDocker(t, ctx, "stop", id)
			poll(t, composeGrace+composeSlack, "every node's stream on "+survivor, func() (bool, string) {
				h, err := holders()
				if err != nil {
					return false, err.Error()
				}
				for _, c := range h {
					if !strings.Contains(c, survivor) {
						return false, fmt.Sprint(h)
					}
				}
				return true, ""
			})
		})
		mustDocker(t, ctx, "start", id)
		restore(t, victim+" restarted")
	})

	t.Run("leading monitor stopped", func(t *testing.T) {
		var leader string
		poll(t, time.Minute, "exactly one monitor to lead", func() (bool, string) {
			var leaders []string
			for _, m := range []string{"monitor-1", "monitor-2"} {
				if ok, err := isLeader(ctx, admin[m]); err != nil {
					return false, err.Error()
				} else if ok {
					leaders = append(leaders, m)
				}
			}
			if len(leaders) == 1 {
				leader = leaders[0]
			}
			return len(leaders) == 1, fmt.Sprintf("leaders: %v", leaders)
		})
		standby := other[leader]
		t.Logf("stopping the leader %s; %s should take over", leader, standby)
		id := s.container(ctx, leader)
		quiet(t, standby, func() {
			mustDocker(t, ctx, "stop", id)
			took := poll(t, composeGrace+composeSlack, standby+" to lead", func() (bool, string) {
				ok, err := isLeader(ctx, admin[standby])
				return ok, fmt.Sprint(err)
			})
			t.Logf("%s leads %s after %s stopped", standby, took.Round(100*time.Millisecond), leader)
		})
		mustDocker(t, ctx, "start", id)
		connect(t, leader)
		restore(t, leader+" restarted")
	})
}
