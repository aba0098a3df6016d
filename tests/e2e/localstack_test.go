// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/tests/binaries"
	"github.com/nodepulse/nodepulse/tests/procutil"
)

// freePorts finds a base port such that every port in base+offsets is free.
func freePorts(t *testing.T, offsets ...int) int {
	t.Helper()
	for range 200 {
		base := 20000 + rand.IntN(30000)
		ok := true
		for _, o := range offsets {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+o))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// syncBuffer collects a process's output for assertions and failure logs.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, last)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// localStack is `localstack` (what `make run` starts) running as a process
// for one test, with clients of its monitor's NodeService and PodService.
// The logs of its processes, and of the reporters a test adds, are files in
// logDir; a failed test prints their tails.
type localStack struct {
	t        *testing.T
	bin      string
	base     int // collector gRPC; monitor gRPC +1; kube API +3; admin ports +100..+102, +103 for an added reporter
	etcdPort int
	node     string // the name of localstack's own reporter's node
	data     string
	logDir   string
	pids     map[string]int // from localstack's "all ready" line
	out      syncBuffer
	cmd      *exec.Cmd
	exited   chan error
	nodes    nodev1.NodeServiceClient
	pods     podv1.PodServiceClient

	stopOnce sync.Once
	stopErr  error
	stopLate bool
}

// startLocalStack runs localstack on free ports with args added, its own
// reporter's node named prefix-<base port>, and returns once every process
// is ready. Cleanup stops it with Ctrl-C (an error if that takes over a
// minute).
func startLocalStack(t *testing.T, prefix string, args ...string) *localStack {
	t.Helper()
	s := &localStack{t: t, bin: binaries.Dir(t), data: t.TempDir(), pids: map[string]int{}, exited: make(chan error, 1)}
	etcdPort := freePorts(t, 0, 1)
	s.etcdPort = etcdPort
	s.base = freePorts(t, 0, 1, 3, 100, 101, 102, 103)
	s.node = s.name(prefix)
	s.logDir = filepath.Join(s.data, "logs")
	s.cmd = exec.Command(filepath.Join(s.bin, "localstack"), append([]string{
		"--bin-dir=" + s.bin, "--data-dir=" + s.data, "--table=false", "--node-name=" + s.node,
		"--etcd-port=" + strconv.Itoa(etcdPort), "--base-port=" + strconv.Itoa(s.base)}, args...)...)
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = pw, &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("localstack output:\n%s", s.out.String())
			logs, _ := filepath.Glob(filepath.Join(s.logDir, "*.log"))
			for _, l := range logs {
				t.Logf("--- %s (last 60 lines)\n%s", filepath.Base(l), procutil.Tail(l, 60))
			}
		}
		if err := s.stop(); s.stopLate {
			t.Error(err)
		}
	})
	readyLine := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.out.Write([]byte(line + "\n"))
			if strings.HasPrefix(line, "all ready") {
				readyLine <- line
			}
		}
	}()
	select {
	case line := <-readyLine:
		for _, f := range strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, "all ready (pids:"), ")")) {
			name, pid, _ := strings.Cut(f, "=")
			s.pids[name], _ = strconv.Atoi(pid)
		}
		// README's stop/continue demo signals the pid in <data-dir>/reporter.pid.
		for name, pid := range s.pids {
			b, err := os.ReadFile(filepath.Join(s.data, name+".pid"))
			if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || got != pid {
				t.Errorf("%s.pid: %q (%v), want %d", name, b, err, pid)
			}
		}
	case err := <-s.exited:
		s.exited <- err // for stop
		t.Fatalf("localstack exited before ready: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("localstack not ready within 2 minutes")
	}
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", s.base+1), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	s.nodes, s.pods = nodev1.NewNodeServiceClient(cc), podv1.NewPodServiceClient(cc)
	return s
}

// name is prefix-<base port>: unique among the stacks running at once.
func (s *localStack) name(prefix string) string { return prefix + "-" + strconv.Itoa(s.base) }

// stop sends localstack Ctrl-C and waits for it to exit: its exit error,
// or an error with stopLate set if it took over a minute.
func (s *localStack) stop() error {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case s.stopErr = <-s.exited:
		case <-time.After(time.Minute):
			s.stopErr, s.stopLate = errors.New("localstack did not stop within a minute of Ctrl-C"), true
			_ = s.cmd.Process.Kill()
		}
	})
	return s.stopErr
}

// addReporter starts one more reporter, for node, against the stack's
// collector (admin port base+103), logging to reporter-<node>.log in the
// stack's log dir. The process is the test's own, to stop, freeze or kill
// outright; cleanup kills it.
func (s *localStack) addReporter(node string, args ...string) *procutil.Proc {
	s.t.Helper()
	p, err := procutil.Start("reporter-"+node, s.logDir, filepath.Join(s.bin, "reporter"), append([]string{
		"--collector.insecure", fmt.Sprintf("--collector.addresses=127.0.0.1:%d", s.base),
		fmt.Sprintf("--admin.listen-address=127.0.0.1:%d", s.base+103), "--node-name=" + node, "--log.format=console"}, args...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(p.Kill)
	return p
}

// call is the context of one gRPC call to the monitor.
func (s *localStack) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func (s *localStack) getNode(name string) (*nodev1.Node, error) {
	c, cancel := s.call()
	defer cancel()
	r, err := s.nodes.GetNode(c, &nodev1.GetNodeRequest{Name: name})
	return r.GetNode(), err
}

// readyIs is a waitFor condition: node name's Ready condition is want.
func (s *localStack) readyIs(name, want string) func() (bool, string) {
	return func() (bool, string) {
		n, err := s.getNode(name)
		if err != nil {
			return false, err.Error()
		}
		c := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready)
		return c.GetStatus() == want, fmt.Sprintf("Ready=%s reason=%s", c.GetStatus(), c.GetReason())
	}
}

// TestLocalStack runs what `make run` runs, as processes: a node registers
// and becomes Ready; its reporter is frozen (SIGSTOP, so the stream stays
// open but renewals stop) and the node turns Unknown; it resumes and the node
// is Ready again; Ctrl-C stops every process and removes the etcd data.
func TestLocalStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const grace = 4 * time.Second
	s := startLocalStack(t, "e2e", "--grace-period="+grace.String(), "--monitor-args=--node-monitor-period=500ms",
		"--reporter-args=--node-lease-duration-seconds=2")
	node, pids := s.node, s.pids
	if len(pids) != 4 {
		t.Fatalf("pids = %v", pids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	waitFor(t, time.Minute, "node Ready", s.readyIs(node, nodemodel.True))
	n, err := s.getNode(node)
	if err != nil {
		t.Fatal(err)
	}
	st := n.GetStatus()
	if st.GetCapacity()["cpu"] == "" || st.GetCapacity()["memory"] == "" || st.GetNodeInfo().GetKernelVersion() == "" {
		t.Errorf("status lacks real host data: capacity=%v nodeInfo=%v", st.GetCapacity(), st.GetNodeInfo())
	}

	// The CLI against the stack `make run` starts: get, describe, cordon, uncordon.
	cli := func(args ...string) string {
		t.Helper()
		full := append([]string{"--server", fmt.Sprintf("127.0.0.1:%d", s.base+1)}, args...)
		out, err := exec.CommandContext(ctx, filepath.Join(s.bin, "nodepulse"), full...).CombinedOutput()
		if err != nil {
			t.Fatalf("nodepulse %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := cli("get", "nodes"); !strings.Contains(out, node) || !strings.Contains(out, "Ready") {
		t.Errorf("get nodes does not show %s Ready:\n%s", node, out)
	}
	if out := cli("describe", "node", node); !strings.Contains(out, "KubeletReady") || !strings.Contains(out, "Capacity:") {
		t.Errorf("describe node lacks conditions or capacity:\n%s", out)
	}
	cli("cordon", node)
	if out := cli("get", "nodes"); !strings.Contains(out, "SchedulingDisabled") {
		t.Errorf("cordoned node not shown as SchedulingDisabled:\n%s", out)
	}
	cli("uncordon", node)
	if out := cli("get", "nodes"); strings.Contains(out, "SchedulingDisabled") {
		t.Errorf("uncordoned node still SchedulingDisabled:\n%s", out)
	}

	// Freeze the reporter: no renewals, stream still open.
	frozen := time.Now()
	if err := syscall.Kill(pids["reporter"], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, grace+time.Minute, "node Unknown after the reporter froze", s.readyIs(node, nodemodel.Unknown))
	t.Logf("node Unknown %s after the reporter froze (grace %s)", time.Since(frozen).Round(time.Millisecond), grace)
	n, _ = s.getNode(node)
	if r := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready).GetReason(); r != nodemodel.ReasonNodeStatusUnknown {
		t.Errorf("Unknown reason = %q, want %q", r, nodemodel.ReasonNodeStatusUnknown)
	}
	if err := syscall.Kill(pids["reporter"], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "node Ready again after the reporter resumed", s.readyIs(node, nodemodel.True))

	// Ctrl-C: everything stops, nothing is left behind.
	if err := s.stop(); s.stopLate {
		t.Fatal(err)
	} else if err != nil {
		t.Errorf("localstack exit after Ctrl-C: %v", err)
	}
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running after Ctrl-C", name, pid)
		}
	}
	if _, err := os.Stat(filepath.Join(s.data, "etcd")); !os.IsNotExist(err) {
		t.Errorf("etcd data dir left behind: %v", err)
	}
}
