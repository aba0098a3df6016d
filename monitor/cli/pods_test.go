// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// TestCLIPods drives the pod commands against a real monitor: create from
// protojson, list by node, describe, explain; then a user NoExecute taint
// the web pod does not tolerate makes the evictor delete it while the
// tolerating pod stays, and explain node says so.
func TestCLIPods(t *testing.T) {
	addr, _ := startMonitor(t)
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	web := write("web.json", `{"metadata": {"namespace": "shop", "name": "web-7", "labels": {"app": "web"},
	  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f", "controller": true}]},
	  "spec": {"nodeName": "web-1"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}`)
	keeper := write("keeper.json", `{"metadata": {"namespace": "shop", "name": "keeper"},
	  "spec": {"nodeName": "web-1", "tolerations": [{"key": "maint", "operator": "Exists", "effect": "NoExecute"}]}}`)
	if out := mustRun(t, addr, "create", "pod", "-f", web); !strings.HasPrefix(out, "pod/web-7 created (namespace shop") {
		t.Fatalf("create: %q", out)
	}
	mustRun(t, addr, "create", "pod", "-f", keeper)
	if _, err := run(t, addr, "create", "pod", "-f", web); err == nil || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Errorf("second create: %v", err)
	}
	bad := write("bad.json", `{"metadata": {"namespace": "shop", "name": "x"}, "spec": {"tolerations": [{"key": "k", "operator": "Sometimes"}]}}`)
	if _, err := run(t, addr, "create", "pod", "-f", bad); err == nil || !strings.Contains(err.Error(), "pod.spec.tolerations[0].operator") {
		t.Errorf("bad toleration: %v", err)
	}

	out := mustRun(t, addr, "get", "pods", "--node", "web-1", "-o", "wide")
	for _, want := range []string{"NAMESPACE", "shop", "web-7", "keeper", "ReplicaSet/web-5d4f"} {
		if !strings.Contains(out, want) {
			t.Errorf("get pods lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, addr, "get", "pods", "-n", "other"); !strings.Contains(out, "No pods found.") {
		t.Errorf("other namespace:\n%s", out)
	}
	d := mustRun(t, addr, "describe", "pod", "shop/web-7")
	for _, want := range []string{"Controlled By:", "ReplicaSet/web-5d4f", "node.kubernetes.io/unreachable op=Exists:NoExecute for 300s", "Explanation:", "not threatened"} {
		if !strings.Contains(d, want) {
			t.Errorf("describe pod lacks %q:\n%s", want, d)
		}
	}
	if out := mustRun(t, addr, "explain", "pod", "web-7", "-n", "shop"); !strings.Contains(out, "300 s after") {
		t.Errorf("explain pod:\n%s", out)
	}

	mustRun(t, addr, "taint", "web-1", "maint=now:NoExecute")
	// Evicted gracefully: web-7 turns Terminating and stays (spec §12.3).
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := mustRun(t, addr, "get", "pods", "-n", "shop")
		if row := rowOf(out, "web-7"); strings.Contains(row, "Terminating") {
			if !strings.Contains(rowOf(out, "keeper"), "Pending") {
				t.Fatalf("the tolerating pod changed:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web-7 not evicted by an untolerated NoExecute taint:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out = mustRun(t, addr, "explain", "node", "web-1")
	for _, want := range []string{"pod shop/keeper tolerates every NoExecute taint", "pod shop/web-7 is Terminating"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain node lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, addr, "explain", "pod", "shop/web-7"); !strings.Contains(out, "waits for the node's reporter, pod GC or a forced delete") {
		t.Errorf("explain terminating pod:\n%s", out)
	}
	if out := mustRun(t, addr, "describe", "pod", "shop/web-7"); !strings.Contains(out, "Terminating (lasts") || !strings.Contains(out, "Deletion Grace Period:") {
		t.Errorf("describe terminating pod:\n%s", out)
	}

	// A plain delete is graceful: keeper stays, Terminating.
	if out := mustRun(t, addr, "delete", "pod", "keeper", "-n", "shop"); out != "pod \"keeper\" deleted from shop namespace\n" {
		t.Errorf("delete: %q", out)
	}
	if out := mustRun(t, addr, "get", "pods", "-n", "shop"); !strings.Contains(rowOf(out, "keeper"), "Terminating") {
		t.Errorf("keeper after a graceful delete:\n%s", out)
	}
	if _, err := run(t, addr, "delete", "pod", "shop/keeper", "--force", "--grace-period=5"); err == nil ||
		err.Error() != "--force and --grace-period greater than 0 cannot be specified together" {
		t.Errorf("--force with a grace: %v", err)
	}
	var out2, errOut bytes.Buffer
	if err := Main(context.Background(), []string{"delete", "pod", "shop/web-7", "--force", "--server", addr}, &out2, &errOut); err != nil {
		t.Fatal(err)
	}
	if out2.String() != "pod \"web-7\" force deleted from shop namespace\n" || errOut.String() != ForceWarning+"\n" {
		t.Errorf("force delete: stdout %q stderr %q", out2.String(), errOut.String())
	}
	if out := mustRun(t, addr, "get", "pods", "-n", "shop", "-o", "name"); strings.Contains(out, "web-7") {
		t.Errorf("web-7 still listed after a forced delete:\n%s", out)
	}
}

// rowOf returns the table row of pod name ("" when absent).
func rowOf(table, name string) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == name {
			return l
		}
	}
	return ""
}

// TestDeleteGraceRules: kubectl delete's rules (pkg/cmd/delete).
func TestDeleteGraceRules(t *testing.T) {
	for _, tc := range []struct {
		grace  int64
		force  bool
		want   string // "nil", a number, or "error"
		forced bool
	}{
		{grace: -1, want: "nil"},
		{grace: 0, want: "1"},
		{grace: 7, want: "7"},
		{grace: -1, force: true, want: "0", forced: true},
		{grace: 0, force: true, want: "0", forced: true},
		{grace: 3, force: true, want: "error"},
	} {
		g, forced, err := deleteGrace(tc.grace, tc.force)
		got := "nil"
		switch {
		case err != nil:
			got = "error"
		case g != nil:
			got = strconv.FormatInt(*g, 10)
		}
		if got != tc.want || forced != tc.forced {
			t.Errorf("--grace-period=%d --force=%v: %s forced=%v, want %s forced=%v", tc.grace, tc.force, got, forced, tc.want, tc.forced)
		}
	}
}

// TestPodStatusColumn: the STATUS cell as kubectl's printPod computes it
// (spec §12.7).
func TestPodStatusColumn(t *testing.T) {
	ts := timestamppb.New(time.Unix(1000, 0))
	for _, tc := range []struct {
		name        string
		phase       string
		reason      string
		terminating bool
		want        string
	}{
		{"running", "Running", "", false, "Running"},
		{"reason wins", "Failed", "Evicted", false, "Evicted"},
		{"terminating", "Running", "", true, "Terminating"},
		{"terminating pending", "Pending", "", true, "Terminating"},
		{"terminal phase stays", "Succeeded", "", true, "Succeeded"},
		{"failed stays", "Failed", "", true, "Failed"},
		{"NodeLost terminating", "Running", "NodeLost", true, "Unknown"},
		{"no phase", "", "", false, "<none>"},
	} {
		p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: "p"}, Status: &podv1.PodStatus{Phase: tc.phase, Reason: tc.reason}}
		if tc.terminating {
			p.Metadata.DeletionTimestamp = ts
		}
		if got := PodStatus(p); got != tc.want {
			t.Errorf("%s: STATUS %q, want %q", tc.name, got, tc.want)
		}
	}
}
