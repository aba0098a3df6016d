// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// helmBinary finds the pinned helm (make deploy-tools puts it in
// .tmp/bin; $HELM overrides). Without it the chart tests skip, unless
// NODEPULSE_REQUIRE_DEPLOY_TOOLS=1 (make check-deploy, CI) makes that a
// failure.
func helmBinary(t *testing.T) string {
	t.Helper()
	for _, c := range []string{os.Getenv("HELM"), filepath.Join(repoRoot(t), ".tmp", "bin", "helm")} {
		if c != "" {
			if _, err := os.Stat(c); err == nil {
				return c
			}
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("NODEPULSE_REQUIRE_DEPLOY_TOOLS") == "1" {
		t.Fatal("helm not found (make deploy-tools installs it into .tmp/bin)")
	}
	t.Skip("helm not found: make deploy-tools installs it (NODEPULSE_REQUIRE_DEPLOY_TOOLS=1 makes this a failure)")
	return ""
}

// helmTemplate renders the chart in namespace nodepulse with extra args and
// decodes every object strictly.
func helmTemplate(t *testing.T, args ...string) ([]object, []string) {
	t.Helper()
	chart := filepath.Join(repoRoot(t), "deploy", "helm", "nodepulse")
	cmd := exec.Command(helmBinary(t), append([]string{"template", "nodepulse", chart, "--namespace", "nodepulse"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, errb.String())
	}
	objs, problems := decode(mustJSONDocs(t, out.Bytes()))
	return objs, append(problems, check(objs)...)
}

// specJSON is an object's spec as canonical JSON (after decoding into its
// type, so formatting and defaults-free spellings compare equal).
func specJSON(t *testing.T, o any) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return string(m["spec"])
}

// TestHelmChartDefaultsEqualKustomizeBase: with default values the chart
// renders the base's objects (but the Namespace, which `helm install
// --create-namespace` makes) with the same specs.
func TestHelmChartDefaultsEqualKustomizeBase(t *testing.T) {
	objs, problems := helmTemplate(t)
	for _, p := range problems {
		t.Error(p)
	}
	base, _ := renderAndCheck(t, filepath.Join(repoRoot(t), "deploy", "kubernetes", "base"))
	helm := map[string]object{}
	for _, o := range objs {
		helm[o.kind+"/"+o.name] = o
	}
	for _, b := range base {
		id := b.kind + "/" + b.name
		if b.kind == "Namespace" {
			continue
		}
		h, ok := helm[id]
		if !ok {
			t.Errorf("the chart does not render %s", id)
			continue
		}
		delete(helm, id)
		if hs, bs := specJSON(t, h.obj), specJSON(t, b.obj); hs != bs {
			t.Errorf("%s: the chart's spec differs from the base's:\nchart: %s\nbase:  %s", id, hs, bs)
		}
	}
	for id := range helm {
		t.Errorf("the chart renders %s, which the base does not have", id)
	}
}

// TestHelmChartAllOn renders ci/all-on-values.yaml (every option on) and
// checks what each value promises.
func TestHelmChartAllOn(t *testing.T) {
	objs, problems := helmTemplate(t, "-f", filepath.Join(repoRoot(t), "deploy", "helm", "nodepulse", "ci", "all-on-values.yaml"))
	for _, p := range problems {
		t.Error(p)
	}
	have := map[string]bool{}
	for _, o := range objs {
		have[o.kind+"/"+o.name] = true
	}
	for _, w := range []string{
		"ServiceMonitor/nodepulse-collector", "ServiceMonitor/nodepulse-monitor", "ServiceMonitor/nodepulse-etcd",
		"PodMonitor/nodepulse-reporter", "PrometheusRule/nodepulse",
		"Issuer/nodepulse-selfsigned", "Certificate/nodepulse-root-ca", "Issuer/nodepulse-ca",
		"Certificate/nodepulse-collector", "Certificate/nodepulse-monitor", "Certificate/nodepulse-etcd",
		"Certificate/nodepulse-operator-admin", "Certificate/nodepulse-operator-oncall", "Certificate/nodepulse-ca",
		"Certificate/nodepulse-node-node-a", "Certificate/nodepulse-node-node-b",
	} {
		if !have[w] {
			t.Errorf("missing %s", w)
		}
	}
	// A node's certificate carries its node name the way the collector
	// authorises node writes (services/identity).
	if c := find[*certificate](objs, "Certificate", "nodepulse-node-node-a"); c == nil ||
		c.Spec.CommonName != "system:node:node-a" || c.Spec.Subject == nil || !slices.Equal(c.Spec.Subject.Organizations, []string{"system:nodes"}) ||
		slices.Contains(c.Spec.Usages, "server auth") || c.Spec.Duration != "720h" {
		t.Errorf("node certificate: %+v", c)
	}
	_, groups := alertsFile(t)
	if pr := find[*prometheusRule](objs, "PrometheusRule", "nodepulse"); pr == nil || !reflect.DeepEqual(pr.Spec.Groups, groups) || pr.Labels["release"] != "kube-prometheus-stack" {
		t.Error("the chart's PrometheusRule is not deploy/prometheus/alerts.yml with the configured labels")
	}
	jobs, _ := checkMonitoring(objs)
	if want := []string{"nodepulse-collector", "nodepulse-etcd", "nodepulse-monitor", "nodepulse-reporter"}; !slices.Equal(jobs, want) {
		t.Errorf("jobs %v, want %v", jobs, want)
	}
	if sts := find[*appsv1.StatefulSet](objs, "StatefulSet", "etcd"); sts == nil || *sts.Spec.Replicas != 5 {
		t.Error("etcd.replicas=5 not rendered")
	}
	mon := find[*appsv1.Deployment](objs, "Deployment", "monitor")
	c := mon.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example.com/nodepulse/monitor:v9.9.9" || !slices.Contains(c.Args, "--kube-api.listen-address=:6443") || *mon.Spec.Replicas != 3 {
		t.Errorf("monitor: image %s, args %v", c.Image, c.Args)
	}
	if !slices.ContainsFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, "--etcd.endpoints=") && strings.Count(a, ",") == 4
	}) {
		t.Errorf("monitor: --etcd.endpoints does not name 5 members: %v", c.Args)
	}
	for _, o := range objs {
		if np, ok := o.obj.(*networkingv1.NetworkPolicy); ok {
			b, _ := json.Marshal(np.Spec)
			if strings.Contains(string(b), `"kubernetes.io/metadata.name":"monitoring"`) {
				t.Errorf("NetworkPolicy/%s still names the default monitoring namespace", np.Name)
			}
		}
	}
}
