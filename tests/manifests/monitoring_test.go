// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the PrometheusRule and the chart's copy of the rules from deploy/prometheus/alerts.yml")

// scrapeJobs returns the job names the ServiceMonitors and PodMonitors set
// (a relabeling with targetLabel job), and every problem with them: each
// selects a Service (or pods) of the set, on a port it names.
func checkMonitoring(objs []object) (jobs []string, problems []string) {
	add := func(id, format string, args ...any) {
		problems = append(problems, id+": "+fmt.Sprintf(format, args...))
	}
	jobOf := func(id string, eps []scrapeEndpoint) {
		for _, ep := range eps {
			job := ""
			for _, r := range ep.Relabelings {
				if r.TargetLabel == "job" && r.Replacement != nil && len(r.SourceLabels) == 0 {
					job = *r.Replacement
				}
			}
			if job == "" {
				add(id, "endpoint %q does not set a job name (relabel targetLabel job): the rules need one they can rely on", ep.Port)
				continue
			}
			jobs = append(jobs, job)
		}
	}
	for _, o := range objs {
		id := o.kind + "/" + o.name
		switch v := o.obj.(type) {
		case *serviceMonitor:
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.Selector)
			var svc *corev1.Service
			for _, s := range objs {
				if cand, ok := s.obj.(*corev1.Service); ok && err == nil && !sel.Empty() && sel.Matches(labels.Set(cand.Labels)) {
					svc = cand
				}
			}
			if svc == nil {
				add(id, "selects no Service of the manifests")
				continue
			}
			for _, ep := range v.Spec.Endpoints {
				if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					add(id, "port %q is not a port of Service/%s", ep.Port, svc.Name)
				}
			}
			// The monitor exports kube_lease_renew_time{namespace="kube-node-lease"};
			// without honorLabels the target's namespace label replaces it.
			// Its kube_* node series are on a path of their own.
			if svc.Name == "monitor" {
				paths := map[string]bool{}
				for _, ep := range v.Spec.Endpoints {
					if !ep.HonorLabels {
						add(id, "endpoint %q must set honorLabels: the monitor's kube_lease_renew_time carries its own namespace label", ep.Port)
					}
					paths[ep.Path] = true
				}
				if !paths["/metrics"] || !paths["/metrics/kube-state"] {
					add(id, "must scrape both /metrics and /metrics/kube-state (the kube_* node series), has %v", paths)
				}
			}
			jobOf(id, v.Spec.Endpoints)
		case *podMonitor:
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.Selector)
			var pod *corev1.PodTemplateSpec
			for _, w := range objs {
				if t := podTemplate(w.obj); t != nil && err == nil && !sel.Empty() && sel.Matches(labels.Set(t.Labels)) {
					pod = t
				}
			}
			if pod == nil {
				add(id, "selects no pods of the manifests")
				continue
			}
			for _, ep := range v.Spec.PodMetricsEndpoints {
				if !hasNamedPort(pod.Spec.Containers, ep.Port) {
					add(id, "port %q is not a named container port of the pods it selects", ep.Port)
				}
			}
			jobOf(id, v.Spec.PodMetricsEndpoints)
		}
	}
	sort.Strings(jobs)
	return slices.Compact(jobs), problems // the monitor's two endpoints share its job
}

// alertsFile reads deploy/prometheus/alerts.yml and its groups.
func alertsFile(t *testing.T) ([]byte, []ruleGroup) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	return b, f.Groups
}

const ruleHeader = `# GENERATED from deploy/prometheus/alerts.yml, the single source of the
# rules; do not edit. Regenerate (tests/manifests checks they are equal):
#   cd tests && go test ./manifests -run TestPrometheusRule -args -update
`

// TestPrometheusRule: the PrometheusRule of the monitoring component and the
// chart's copy of the rules are deploy/prometheus/alerts.yml, group for
// group (-update rewrites them).
func TestPrometheusRule(t *testing.T) {
	root := repoRoot(t)
	raw, groups := alertsFile(t)
	if len(groups) == 0 {
		t.Fatal("alerts.yml has no groups")
	}
	rulePath := filepath.Join(root, "deploy", "kubernetes", "components", "monitoring", "prometheusrule.yaml")
	chartCopy := filepath.Join(root, "deploy", "helm", "nodepulse", "files", "alerts.yml")
	if *update {
		want := map[string]any{
			"apiVersion": "monitoring.coreos.com/v1",
			"kind":       "PrometheusRule",
			"metadata":   map[string]any{"name": "nodepulse"},
			"spec":       map[string]any{"groups": groups},
		}
		b, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(rulePath, append([]byte(ruleHeader), b...), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(chartCopy, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(rulePath)
	if err != nil {
		t.Fatal(err)
	}
	objs, problems := decode(mustJSONDocs(t, b))
	for _, p := range problems {
		t.Error(p)
	}
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want one PrometheusRule", rulePath, len(objs))
	}
	pr, ok := objs[0].obj.(*prometheusRule)
	if !ok || !reflect.DeepEqual(pr.Spec.Groups, groups) {
		t.Errorf("%s differs from deploy/prometheus/alerts.yml: regenerate with `cd tests && go test ./manifests -run TestPrometheusRule -args -update`", rulePath)
	}
	c, err := os.ReadFile(chartCopy)
	if err != nil || !bytes.Equal(c, raw) {
		t.Errorf("%s is not a copy of deploy/prometheus/alerts.yml (%v): regenerate with -update", chartCopy, err)
	}
}

// mustJSONDocs splits a YAML stream into JSON documents.
func mustJSONDocs(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		if string(j) != "null" {
			docs = append(docs, j)
		}
	}
	return docs
}

// TestMonitoringComponent renders an overlay with the monitoring component
// and checks that every job name the alert rules select is one the shipped
// monitors set (CollectorDown once tested a job nothing defined).
func TestMonitoringComponent(t *testing.T) {
	objs, problems := renderAndCheck(t, filepath.Join(repoRoot(t), "deploy", "kubernetes", "overlays", "cert-manager"))
	for _, p := range problems {
		t.Error(p)
	}
	jobs, _ := checkMonitoring(objs)
	want := []string{"nodepulse-collector", "nodepulse-etcd", "nodepulse-monitor", "nodepulse-reporter"}
	if !slices.Equal(jobs, want) {
		t.Errorf("jobs %v, want %v", jobs, want)
	}
	_, groups := alertsFile(t)
	jobRef := regexp.MustCompile(`job\s*=~?\s*"([^"]+)"`)
	for _, g := range groups {
		for _, r := range g.Rules {
			for _, m := range jobRef.FindAllStringSubmatch(r.Expr, -1) {
				if !slices.Contains(jobs, m[1]) {
					t.Errorf("%s selects job %q, which no shipped ServiceMonitor/PodMonitor sets (%v)", r.Alert, m[1], jobs)
				}
			}
		}
	}
}

// podTemplate returns the pod template of a workload, or nil.
func podTemplate(o any) *corev1.PodTemplateSpec {
	b, err := json.Marshal(o)
	if err != nil {
		return nil
	}
	var w struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if json.Unmarshal(b, &w) != nil {
		return nil
	}
	return w.Spec.Template
}
