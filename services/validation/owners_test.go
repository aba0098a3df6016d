// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"strings"
	"testing"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

func i32(v int32) *int32 { return &v }

func rsFixture() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: &appsv1.ReplicaSetSpec{Replicas: i32(3), Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "fe"}}}},
	}
}

// firstErr returns "<field>: <reason>" of the first error, "" when none.
func firstErr(l List) string {
	if len(l) == 0 {
		return ""
	}
	return l[0].Error()
}

func TestOwnerValidation(t *testing.T) {
	lim := DefaultLimits()
	for _, tc := range []struct {
		name   string
		mutate func(*appsv1.ReplicaSet)
		want   string // prefix of the first error; "" for valid
	}{
		{"valid", func(*appsv1.ReplicaSet) {}, ""},
		{"no name", func(r *appsv1.ReplicaSet) { r.Metadata.Name = "" }, "rs.metadata.name: "},
		{"bad namespace", func(r *appsv1.ReplicaSet) { r.Metadata.Namespace = "a.b" }, "rs.metadata.namespace: "},
		{"negative replicas", func(r *appsv1.ReplicaSet) { r.Spec.Replicas = i32(-1) }, "rs.spec.replicas: must be greater than or equal to 0"},
		{"zero replicas", func(r *appsv1.ReplicaSet) { r.Spec.Replicas = i32(0) }, ""},
		{"empty selector", func(r *appsv1.ReplicaSet) { r.Spec.Selector = &nodev1.LabelSelector{} }, "rs.spec.selector: empty selector is invalid"},
		{"bad selector key", func(r *appsv1.ReplicaSet) { r.Spec.Selector.MatchLabels = map[string]string{"-x": "web"} }, "rs.spec.selector.matchLabels[-x]: key:"},
		{"bad operator", func(r *appsv1.ReplicaSet) {
			r.Spec.Selector.MatchExpressions = []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "Equals", Values: []string{"fe"}}}
		}, `rs.spec.selector.matchExpressions[0].operator: "Equals" is not a valid selector operator`},
		{"In without values", func(r *appsv1.ReplicaSet) {
			r.Spec.Selector.MatchExpressions = []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "In"}}
		}, "rs.spec.selector.matchExpressions[0].values: must be specified"},
		{"Exists with values", func(r *appsv1.ReplicaSet) {
			r.Spec.Selector.MatchExpressions = []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "Exists", Values: []string{"x"}}}
		}, "rs.spec.selector.matchExpressions[0].values: may not be specified"},
		{"template not selected", func(r *appsv1.ReplicaSet) { r.Spec.Template.Metadata.Labels = map[string]string{"app": "db"} },
			"rs.spec.template.metadata.labels: `selector` does not match template `labels`"},
		{"expression not matched", func(r *appsv1.ReplicaSet) {
			r.Spec.Selector.MatchExpressions = []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"fe"}}}
		}, "rs.spec.template.metadata.labels: `selector` does not match"},
		{"no template", func(r *appsv1.ReplicaSet) { r.Spec.Template = nil }, "rs.spec.template: must be set"},
		{"bad volume", func(r *appsv1.ReplicaSet) {
			r.Spec.Template.Spec = &podv1.PodSpec{Volumes: []*podv1.Volume{{Name: "c", EmptyDir: &podv1.EmptyDirVolumeSource{Medium: "Disk"}}}}
		}, `rs.spec.template.spec.volumes[0].emptyDir.medium: "Disk" is not a storage medium`},
		{"duplicate volume", func(r *appsv1.ReplicaSet) {
			r.Spec.Template.Spec = &podv1.PodSpec{Volumes: []*podv1.Volume{{Name: "c"}, {Name: "c"}}}
		}, `rs.spec.template.spec.volumes[1].name: duplicate volume name "c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := rsFixture()
			tc.mutate(rs)
			got := firstErr(ReplicaSet("rs", rs, lim))
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) || tc.want != "" && got == "" {
				t.Fatalf("got %q, want prefix %q", got, tc.want)
			}
		})
	}
}

func TestStatefulSetAndDaemonSetValidation(t *testing.T) {
	lim := DefaultLimits()
	rs := rsFixture()
	ss := &appsv1.StatefulSet{Metadata: rs.Metadata, Spec: &appsv1.StatefulSetSpec{Replicas: i32(2), Selector: rs.Spec.Selector, Template: rs.Spec.Template,
		PodManagementPolicy: "Parallel"}}
	if got := firstErr(StatefulSet("ss", ss, lim)); got != "" {
		t.Fatal(got)
	}
	ss.Spec.PodManagementPolicy = "Serial"
	if got := firstErr(StatefulSet("ss", ss, lim)); !strings.HasPrefix(got, `ss.spec.podManagementPolicy: "Serial" is not`) {
		t.Fatal(got)
	}
	ss.Spec.PodManagementPolicy = ""
	ss.Metadata = &nodev1.ObjectMeta{Namespace: "default", Name: strings.Repeat("a", 57)}
	if got := firstErr(StatefulSet("ss", ss, lim)); !strings.HasPrefix(got, "ss.metadata.name: must be no more than 56 characters") {
		t.Fatal(got)
	}
	ds := &appsv1.DaemonSet{Metadata: rs.Metadata, Spec: &appsv1.DaemonSetSpec{Selector: rs.Spec.Selector, Template: rs.Spec.Template}}
	if got := firstErr(DaemonSet("ds", ds, lim)); got != "" {
		t.Fatal(got)
	}
	ds.Spec.Template.Spec = &podv1.PodSpec{NodeName: "n1"}
	if got := firstErr(DaemonSet("ds", ds, lim)); !strings.HasPrefix(got, "ds.spec.template.spec.nodeName: must not be set") {
		t.Fatal(got)
	}
}

func TestPodDisruptionBudgetValidation(t *testing.T) {
	lim := DefaultLimits()
	num := func(v int32) *policyv1.IntOrString {
		return &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: v}}
	}
	pct := func(s string) *policyv1.IntOrString {
		return &policyv1.IntOrString{Value: &policyv1.IntOrString_StrValue{StrValue: s}}
	}
	for _, tc := range []struct {
		name string
		spec *policyv1.PodDisruptionBudgetSpec
		want string
	}{
		{"min count", &policyv1.PodDisruptionBudgetSpec{MinAvailable: num(2)}, ""},
		{"max percent", &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: pct("50%")}, ""},
		{"neither", &policyv1.PodDisruptionBudgetSpec{}, "pdb.spec: exactly one of minAvailable and maxUnavailable"},
		{"both", &policyv1.PodDisruptionBudgetSpec{MinAvailable: num(1), MaxUnavailable: num(1)}, "pdb.spec: minAvailable and maxUnavailable cannot be both set"},
		{"negative", &policyv1.PodDisruptionBudgetSpec{MinAvailable: num(-1)}, "pdb.spec.minAvailable: must be greater than or equal to 0"},
		{"bad percent", &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: pct("50")}, `pdb.spec.maxUnavailable: "50" is not a valid percent value`},
		{"over 100", &policyv1.PodDisruptionBudgetSpec{MaxUnavailable: pct("150%")}, `pdb.spec.maxUnavailable: "150%" must be between 0% and 100%`},
		{"empty oneof", &policyv1.PodDisruptionBudgetSpec{MinAvailable: &policyv1.IntOrString{}}, "pdb.spec.minAvailable: must be a number or a percentage"},
		{"policy", &policyv1.PodDisruptionBudgetSpec{MinAvailable: num(1), UnhealthyPodEvictionPolicy: "Never"}, `pdb.spec.unhealthyPodEvictionPolicy: "Never" is not`},
	} {
		pdb := &policyv1.PodDisruptionBudget{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: tc.spec}
		got := firstErr(PodDisruptionBudget("pdb", pdb, lim))
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) || tc.want != "" && got == "" {
			t.Errorf("%s: got %q, want prefix %q", tc.name, got, tc.want)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "fe"}
	for _, tc := range []struct {
		sel  *nodev1.LabelSelector
		want bool
	}{
		{nil, false},
		{&nodev1.LabelSelector{}, true},
		{&nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
		{&nodev1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, false},
		{&nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "In", Values: []string{"fe", "be"}}}}, true},
		{&nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"fe"}}}}, false},
		{&nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "canary", Operator: "NotIn", Values: []string{"x"}}}}, true},
		{&nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "app", Operator: "Exists"}}}, true},
		{&nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "app", Operator: "DoesNotExist"}}}, false},
	} {
		if got := SelectorMatches(tc.sel, labels); got != tc.want {
			t.Errorf("%s: %v, want %v", FormatSelector(tc.sel), got, tc.want)
		}
	}
}
