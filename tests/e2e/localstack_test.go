// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"bufio"
	"context"
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
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/tests/binaries"
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

// TestLocalStack runs what `make run` runs, as processes: a node registers
// and becomes Ready; its reporter is frozen (SIGSTOP, so the stream stays
// open but renewals stop) and the node turns Unknown; it resumes and the node
// is Ready again; Ctrl-C stops every process and removes the etcd data.
func TestLocalStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := binaries.Dir(t)
	etcdPort := freePorts(t, 0, 1)
	base := freePorts(t, 0, 1, 100, 101, 102)
	data := t.TempDir()
	node := "e2e-" + strconv.Itoa(base)
	const grace = 4 * time.Second

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "localstack"),
		"--bin-dir="+bin, "--data-dir="+data, "--table=false", "--node-name="+node,
		"--etcd-port="+strconv.Itoa(etcdPort), "--base-port="+strconv.Itoa(base),
		"--grace-period="+grace.String(), "--monitor-args=--node-monitor-period=500ms",
		"--reporter-args=--node-lease-duration-seconds=2")
	var out syncBuffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	defer func() {
		if t.Failed() {
			t.Logf("localstack output:\n%s", out.String())
			for _, n := range []string{"etcd", "collector", "monitor", "reporter"} {
				b, _ := os.ReadFile(filepath.Join(data, "logs", n+".log"))
				lines := strings.Split(string(b), "\n")
				t.Logf("--- %s.log (last 40 lines)\n%s", n, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
		_ = cmd.Process.Signal(os.Interrupt)
	}()

	pids := map[string]int{}
	readyLine := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if strings.HasPrefix(line, "all ready") {
				readyLine <- line
			}
		}
	}()
	select {
	case line := <-readyLine:
		for _, f := range strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, "all ready (pids:"), ")")) {
			name, pid, _ := strings.Cut(f, "=")
			pids[name], _ = strconv.Atoi(pid)
		}
	case err := <-exited:
		t.Fatalf("localstack exited before ready: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("localstack not ready within 2 minutes")
	}
	if len(pids) != 4 {
		t.Fatalf("pids = %v", pids)
	}

	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", base+1), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := nodev1.NewNodeServiceClient(cc)
	ready := func(want string) func() (bool, string) {
		return func() (bool, string) {
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			defer rcancel()
			resp, err := client.GetNode(rctx, &nodev1.GetNodeRequest{Name: node})
			if err != nil {
				return false, err.Error()
			}
			c := nodemodel.FindCondition(resp.GetNode().GetStatus().GetConditions(), nodemodel.Ready)
			return c.GetStatus() == want, fmt.Sprintf("Ready=%s reason=%s", c.GetStatus(), c.GetReason())
		}
	}

	waitFor(t, time.Minute, "node Ready", ready(nodemodel.True))
	resp, err := client.GetNode(ctx, &nodev1.GetNodeRequest{Name: node})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetNode().GetStatus()
	if st.GetCapacity()["cpu"] == "" || st.GetCapacity()["memory"] == "" || st.GetNodeInfo().GetKernelVersion() == "" {
		t.Errorf("status lacks real host data: capacity=%v nodeInfo=%v", st.GetCapacity(), st.GetNodeInfo())
	}

	// The CLI against the stack `make run` starts: get, describe, cordon, uncordon.
	cli := func(args ...string) string {
		t.Helper()
		full := append([]string{"--server", fmt.Sprintf("127.0.0.1:%d", base+1)}, args...)
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "nodepulse"), full...).CombinedOutput()
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
	waitFor(t, grace+time.Minute, "node Unknown after the reporter froze", func() (bool, string) {
		ok, s := ready(nodemodel.Unknown)()
		return ok, s
	})
	t.Logf("node Unknown %s after the reporter froze (grace %s)", time.Since(frozen).Round(time.Millisecond), grace)
	resp, _ = client.GetNode(ctx, &nodev1.GetNodeRequest{Name: node})
	if r := nodemodel.FindCondition(resp.GetNode().GetStatus().GetConditions(), nodemodel.Ready).GetReason(); r != nodemodel.ReasonNodeStatusUnknown {
		t.Errorf("Unknown reason = %q, want %q", r, nodemodel.ReasonNodeStatusUnknown)
	}
	if err := syscall.Kill(pids["reporter"], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "node Ready again after the reporter resumed", ready(nodemodel.True))

	// Ctrl-C: everything stops, nothing is left behind.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("localstack exit after Ctrl-C: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("localstack did not stop within a minute of Ctrl-C")
	}
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running after Ctrl-C", name, pid)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "etcd")); !os.IsNotExist(err) {
		t.Errorf("etcd data dir left behind: %v", err)
	}
}
