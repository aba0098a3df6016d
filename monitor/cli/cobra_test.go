// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOneLetterFlagsHaveNoEnvironment: NODEPULSE_O and NODEPULSE_L (and
// the long names) no longer change what get prints; the connection
// settings still come from the environment.
func TestOneLetterFlagsHaveNoEnvironment(t *testing.T) {
	addr, _ := startMonitor(t)
	for k, v := range map[string]string{"NODEPULSE_O": "json", "NODEPULSE_L": "role=db", "NODEPULSE_OUTPUT": "name", "NODEPULSE_SELECTOR": "role=db", "NODEPULSE_SERVER": addr} {
		t.Setenv(k, v)
	}
	var out bytes.Buffer
	if err := Main(context.Background(), []string{"get", "nodes"}, &out, io.Discard); err != nil {
		t.Fatalf("get nodes with NODEPULSE_SERVER: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "web-1 ") {
		t.Fatalf("stray NODEPULSE_O/NODEPULSE_L changed the output:\n%s", out.String())
	}
}

func TestGetJSONPathAndCustomColumns(t *testing.T) {
	addr, _ := startMonitor(t)
	if out := mustRun(t, addr, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"); out != "web-1" {
		t.Errorf("jsonpath over the list: %q", out)
	}
	if out := mustRun(t, addr, "get", "node", "web-1", "-o", `jsonpath='{.status.conditions[?(@.type=="Ready")].status}{"\n"}'`); out != "True\n" {
		t.Errorf("jsonpath filter on one node: %q", out)
	}
	out := mustRun(t, addr, "get", "nodes", "-o", `custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,ROLE:{.metadata.labels.role},TAINTS:spec.taints[*].key`)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 || strings.Join(strings.Fields(rows[0]), " ") != "NAME READY ROLE TAINTS" || strings.Join(strings.Fields(rows[1]), " ") != "web-1 True web <none>" {
		t.Errorf("custom-columns:\n%s", out)
	}
	mustRun(t, addr, "taint", "web-1", "a=1:NoSchedule")
	mustRun(t, addr, "taint", "web-1", "b:PreferNoSchedule")
	if out := mustRun(t, addr, "get", "nodes", "-o", "custom-columns=TAINTS:.spec.taints[*].key"); !strings.Contains(out, "a,b") {
		t.Errorf("custom-columns with several values:\n%s", out)
	}
	for _, bad := range []string{"jsonpath={.items[", "custom-columns=NAME", "custom-columns=:.metadata.name", "table"} {
		if _, err := run(t, addr, "get", "nodes", "-o", bad); err == nil {
			t.Errorf("-o %s accepted", bad)
		}
	}
}

// syncBuffer is a bytes.Buffer a watch writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// background runs a command until the test ends it with stop, which
// returns the command's error.
func background(t *testing.T, args ...string) (*syncBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Main(ctx, args, out, io.Discard) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the command did not end with its context")
			return nil
		}
	}
	t.Cleanup(func() { cancel() })
	return out, stop
}

func waitFor(t *testing.T, what string, out *syncBuffer, ok func(string) bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(out.String()); {
		if time.Now().After(deadline) {
			t.Fatalf("%s; output:\n%s", what, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGetWatch: get nodes -w prints the table, then a row per change,
// aligned with the header; Ctrl-C (the context) ends it cleanly. With -o
// json each object is one JSON line.
func TestGetWatch(t *testing.T) {
	addr, _ := startMonitor(t)
	out, stop := background(t, "get", "nodes", "-w", "--server", addr)
	waitFor(t, "no initial row", out, func(s string) bool { return strings.Contains(s, "web-1") })
	mustRun(t, addr, "cordon", "web-1")
	waitFor(t, "no row for the cordon", out, func(s string) bool { return strings.Contains(s, "Ready,SchedulingDisabled") })
	mustRun(t, addr, "uncordon", "web-1")
	waitFor(t, "no row for the uncordon", out, func(s string) bool {
		i := strings.LastIndex(s, "SchedulingDisabled")
		return i >= 0 && strings.Contains(s[i:], "\nweb-1   Ready ")
	})
	if err := stop(); err != nil {
		t.Fatalf("get -w ended with %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "NAME ") || strings.Count(out.String(), "NAME") != 1 {
		t.Fatalf("one header first:\n%s", out.String())
	}
	last := lines[len(lines)-1]
	if col := strings.Index(lines[0], "AGE"); col < 0 || len(last) <= col || last[col-1] != ' ' || last[col] == ' ' {
		t.Errorf("the last change's row is not aligned with the header:\n%s", out.String())
	}

	js, stop := background(t, "get", "nodes", "--watch", "-o", "json", "--server", addr)
	waitFor(t, "no initial object", js, func(s string) bool { return strings.Contains(s, "\n") })
	mustRun(t, addr, "cordon", "web-1")
	waitFor(t, "no object for the cordon", js, func(s string) bool { return strings.Count(s, "\n") >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(js.String()), "\n") {
		var n struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(l), &n); err != nil || n.Metadata.Name != "web-1" {
			t.Errorf("not one node a line: %q (%v)", l, err)
		}
	}
	if _, err := run(t, addr, "get", "pdb", "-w"); err == nil {
		t.Error("get pdb -w accepted (budgets have no watch)")
	}
}

// TestGetPodsWatchSelector: get pods -w -l filters the watch as it filters
// the list (WatchPods has no label selector of its own).
func TestGetPodsWatchSelector(t *testing.T) {
	addr, _ := startMonitor(t)
	mustRunStdin(t, addr, "kind: Pod\nmetadata: {name: web-first, namespace: shop, labels: {app: web}}\nspec: {nodeName: web-1}\n", "create", "-f", "-")
	out, stop := background(t, "get", "pods", "-w", "-l", "app=web", "-o", "name", "--server", addr)
	// The list printed its pod: what is created now comes after the list's
	// version, so only the watch can deliver it.
	waitFor(t, "no line for the listed pod", out, func(s string) bool { return strings.Contains(s, "pod/shop/web-first") })
	for _, doc := range []string{
		"kind: Pod\nmetadata: {name: db-0, namespace: shop, labels: {app: db}}\nspec: {nodeName: web-1}\n",
		"kind: Pod\nmetadata: {name: web-0, namespace: shop, labels: {app: web}}\nspec: {nodeName: web-1}\n",
	} {
		mustRunStdin(t, addr, doc, "create", "-f", "-")
	}
	waitFor(t, "no line for the web pod", out, func(s string) bool { return strings.Contains(s, "pod/shop/web-0") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "db-0") {
		t.Errorf("the selector let db-0 through:\n%s", out.String())
	}
}

// TestGetOwnersWatch: get rs -w follows ReplicaSets, in the -o format.
func TestGetOwnersWatch(t *testing.T) {
	addr, _ := startMonitor(t)
	mustRunStdin(t, addr, "kind: ReplicaSet\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template: {metadata: {labels: {app: web}}}\n", "create", "-f", "-")
	out, stop := background(t, "get", "rs", "-n", "shop", "-w", "-o", "custom-columns=NAME:.metadata.name,WANT:.spec.replicas", "--server", addr)
	waitFor(t, "no initial row", out, func(s string) bool { return strings.Contains(s, "web    2") })
	mustRun(t, addr, "scale", "rs", "shop/web", "--replicas=5")
	waitFor(t, "no row for the scale", out, func(s string) bool { return strings.Contains(s, "web    5") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "NAME   WANT\n") {
		t.Errorf("header:\n%s", out.String())
	}
}

// TestWatchJSONLines: watch nodes -o json prints JSON lines and nothing
// else (no table header), so it pipes into jq.
func TestWatchJSONLines(t *testing.T) {
	addr, _ := startMonitor(t)
	out, stop := background(t, "watch", "nodes", "-o", "json", "--server", addr)
	waitFor(t, "no event", out, func(s string) bool { return strings.Contains(s, "\n") })
	mustRun(t, addr, "cordon", "web-1")
	waitFor(t, "no event for the cordon", out, func(s string) bool { return strings.Contains(s, `"MODIFIED"`) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev struct {
			Type string `json:"type"`
			Node struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"node"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type == "" {
			t.Fatalf("line %d is not a JSON event: %q (%v)", i+1, l, err)
		}
		if i == 0 && (ev.Type != "ADDED" || ev.Node.Metadata.Name != "web-1") {
			t.Errorf("first event %q", l)
		}
	}
}

// TestCommandLine: cobra's parts a user meets: a suggestion for a
// mistyped command, examples in every command's help, completion scripts
// for the four shells, and node names completed from the monitor.
func TestCommandLine(t *testing.T) {
	var out bytes.Buffer
	err := Main(context.Background(), []string{"cordn", "web-1"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unknown command "cordn"`) || !strings.Contains(err.Error(), "Did you mean this?\n\tcordon") {
		t.Errorf("mistyped command: %v", err)
	}
	for _, cmd := range NewCommand(io.Discard, io.Discard).Commands() {
		if cmd.Name() == "help" || cmd.Name() == "completion" || cmd.HasSubCommands() {
			continue
		}
		if cmd.Example == "" {
			t.Errorf("%s --help has no example", cmd.Name())
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		out.Reset()
		if err := Main(context.Background(), []string{"completion", sh}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "nodepulse") {
			t.Errorf("completion %s: %v (%d bytes)", sh, err, out.Len())
		}
	}
	addr, _ := startMonitor(t)
	complete := func(args ...string) string {
		var out bytes.Buffer
		if err := Main(context.Background(), append([]string{"__complete", "--server", addr}, args...), &out, io.Discard); err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		return out.String()
	}
	if out := complete("cordon", "we"); !strings.HasPrefix(out, "web-1\n") {
		t.Errorf("node name completion: %q", out)
	}
	if out := complete("describe", "node", ""); !strings.HasPrefix(out, "web-1\n") {
		t.Errorf("describe node completion: %q", out)
	}
	if out := complete("get", ""); !strings.Contains(out, "nodes\n") || !strings.Contains(out, "pdb\n") {
		t.Errorf("resource type completion: %q", out)
	}
	if _, err := run(t, addr, "get"); err == nil || !strings.Contains(err.Error(), "usage: nodepulse get TYPE [NAME]") {
		t.Errorf("get without a type: %v", err)
	}
}

func mustRunStdin(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := execute(context.Background(), append(args, "--server", addr), strings.NewReader(stdin), &out, io.Discard); err != nil {
		t.Fatalf("nodepulse %v: %v", args, err)
	}
	return out.String()
}
