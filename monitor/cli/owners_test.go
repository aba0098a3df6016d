// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

// TestCLIOwners drives create -f (YAML manifests as kubectl takes them,
// a Deployment among them), get with kubectl's columns, scale and delete
// against a real monitor.
func TestCLIOwners(t *testing.T) {
	addr, _ := startMonitor(t)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "app.yaml")
	doc := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 3
  strategy: {type: RollingUpdate}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      creationTimestamp: null
      labels: {app: web}
    spec:
      containers: [{name: nginx, image: nginx:1.27}]
      volumes: [{name: cache, emptyDir: {}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  replicas: 2
  serviceName: db
  selector:
    matchExpressions: [{key: app, operator: In, values: [db]}]
  template:
    metadata: {labels: {app: db}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec:
  maxUnavailable: "50%"
  selector: {matchLabels: {app: db}}
`
	if err := os.WriteFile(manifests, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, addr, "create", "-f", manifests)
	for _, want := range []string{"deployment.apps/web created (stored as replicaset.apps/web", "statefulset.apps/db created", "daemonset.apps/agent created",
		"poddisruptionbudget.policy/web created", "poddisruptionbudget.policy/db created"} {
		if !strings.Contains(out, want) {
			t.Errorf("create -f lacks %q:\n%s", want, out)
		}
	}

	fields := func(out string) [][]string {
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			rows = append(rows, strings.Fields(l))
		}
		return rows
	}
	rs := fields(mustRun(t, addr, "get", "rs"))
	if strings.Join(rs[0], " ") != "NAMESPACE NAME DESIRED CURRENT READY AGE" || strings.Join(rs[1][:5], " ") != "shop web 3 0 0" {
		t.Fatalf("get rs: %v", rs)
	}
	sts := fields(mustRun(t, addr, "get", "statefulsets", "-n", "shop"))
	if strings.Join(sts[0], " ") != "NAMESPACE NAME READY AGE" || strings.Join(sts[1][:3], " ") != "shop db 0/2" {
		t.Fatalf("get sts: %v", sts)
	}
	ds := mustRun(t, addr, "get", "ds", "-o", "wide")
	for _, want := range []string{"DESIRED", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "SELECTOR", "agent", "app=agent"} {
		if !strings.Contains(ds, want) {
			t.Errorf("get ds -o wide lacks %q:\n%s", want, ds)
		}
	}
	pdb := fields(mustRun(t, addr, "get", "pdb"))
	if strings.Join(pdb[0], " ") != "NAMESPACE NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE" ||
		strings.Join(pdb[1][:5], " ") != "default db N/A 50% 0" || strings.Join(pdb[2][:5], " ") != "shop web 2 N/A 0" {
		t.Fatalf("get pdb: %v", pdb)
	}
	if out := mustRun(t, addr, "get", "rs", "web", "-n", "shop", "-o", "json"); !strings.Contains(out, `"emptyDir"`) || !regexp.MustCompile(`"replicas":\s+3`).MatchString(out) {
		t.Errorf("get rs web -o json:\n%s", out)
	}
	if out := mustRun(t, addr, "get", "sts", "-o", "name"); strings.TrimSpace(out) != "statefulset.apps/shop/db" {
		t.Errorf("get sts -o name: %q", out)
	}

	if out := mustRun(t, addr, "scale", "rs", "web", "-n", "shop", "--replicas=5"); strings.TrimSpace(out) != "replicaset.apps/web scaled" {
		t.Errorf("scale: %q", out)
	}
	if rs := fields(mustRun(t, addr, "get", "rs", "-n", "shop")); rs[1][2] != "5" {
		t.Errorf("after scale: %v", rs)
	}
	if _, err := run(t, addr, "scale", "ds", "agent", "--replicas=2"); err == nil {
		t.Error("scale ds succeeded")
	}
	if _, err := run(t, addr, "scale", "rs", "shop/web"); err == nil || !strings.Contains(err.Error(), "--replicas") {
		t.Errorf("scale without --replicas: %v", err)
	}
	if _, err := run(t, addr, "scale", "sts", "shop/db", "--replicas=-3"); err == nil {
		t.Error("scale to -3 succeeded")
	}

	// Refusals name the field.
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("kind: ReplicaSet\nmetadata: {name: x}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: other}}}\n"), 0o600)
	if _, err := run(t, addr, "create", "-f", bad); err == nil || !strings.Contains(err.Error(), "workload.replicaSet.spec.template.metadata.labels") {
		t.Errorf("mismatched template: %v", err)
	}
	_ = os.WriteFile(bad, []byte(`{"kind": "Service", "metadata": {"name": "x"}}`), 0o600)
	if _, err := run(t, addr, "create", "-f", bad); err == nil || !strings.Contains(err.Error(), `kind "Service"`) {
		t.Errorf("unknown kind: %v", err)
	}

	if out := mustRun(t, addr, "delete", "rs", "web", "-n", "shop"); strings.TrimSpace(out) != `replicaset.apps "web" deleted from shop namespace` {
		t.Errorf("delete rs: %q", out)
	}
	mustRun(t, addr, "delete", "pdb", "shop/web")
	mustRun(t, addr, "delete", "sts", "shop/db")
	mustRun(t, addr, "delete", "ds", "kube-system/agent")
	if out := mustRun(t, addr, "get", "rs"); !strings.Contains(out, "No resources found.") {
		t.Errorf("after delete:\n%s", out)
	}
	if _, err := run(t, addr, "delete", "rs", "shop/web"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("second delete: %v", err)
	}
}

func TestManifestConversion(t *testing.T) {
	kind, obj, err := Manifest([]byte(`{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"minAvailable": "30%", "selector": {}}}`))
	if err != nil || kind != "PodDisruptionBudget" || obj.(*policyv1.PodDisruptionBudget).GetSpec().GetMinAvailable().GetStrValue() != "30%" {
		t.Fatalf("pdb: %v %v %v", kind, obj, err)
	}
	_, obj, err = Manifest([]byte("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: 0, paused: true, selector: {matchLabels: {a: b}}}\n"))
	if rs, ok := obj.(*appsv1.ReplicaSet); err != nil || !ok || rs.GetSpec().Replicas == nil || rs.GetSpec().GetReplicas() != 0 {
		t.Fatalf("deployment: %v %v", obj, err)
	}
	if _, _, err := Manifest([]byte("metadata: {name: x}\n")); err == nil || !strings.Contains(err.Error(), "no kind") {
		t.Fatalf("no kind: %v", err)
	}
}
