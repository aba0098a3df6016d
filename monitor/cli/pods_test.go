// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := mustRun(t, addr, "get", "pods", "-n", "shop", "-o", "name")
		if !strings.Contains(out, "web-7") {
			if !strings.Contains(out, "keeper") {
				t.Fatalf("the tolerating pod went too:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web-7 not evicted by an untolerated NoExecute taint:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := mustRun(t, addr, "explain", "node", "web-1"); !strings.Contains(out, "pod shop/keeper tolerates every NoExecute taint") {
		t.Errorf("explain node lacks the pods:\n%s", out)
	}
	if out := mustRun(t, addr, "delete", "pod", "shop/keeper"); !strings.Contains(out, "pod/keeper deleted") {
		t.Errorf("delete: %q", out)
	}
}
