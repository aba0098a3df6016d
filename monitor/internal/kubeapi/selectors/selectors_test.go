// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package selectors

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFieldSelectors(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "x"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for sel, want := range map[string]bool{
		"spec.nodeName=x": true, "spec.nodeName=y": false,
		"spec.nodeName=x,status.phase!=Succeeded,status.phase!=Failed": true,
		"status.phase!=Running": false,
	} {
		s, err := Parse("pods", "", sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Matches(p.Labels, PodFields(p)); got != want {
			t.Errorf("%s: %v", sel, got)
		}
	}
	if v, ok := mustParse(t, "pods", "spec.nodeName=x").RequiredField("spec.nodeName"); !ok || v != "x" {
		t.Fatalf("required field %q %v", v, ok)
	}
	_, err := Parse("nodes", "", "spec.nodeName=x")
	if err == nil || !strings.Contains(err.Error(), `"spec.nodeName" is not a known field selector: only "metadata.name", "spec.unschedulable"`) {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := Parse("nodes", "a in (", ""); err == nil {
		t.Fatal("bad label selector accepted")
	}
	e := &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if !mustParse(t, "events", "involvedObject.name=n1,involvedObject.kind=Node").Matches(nil, EventFields(e)) {
		t.Fatal("event selector")
	}
}

func mustParse(t *testing.T, res, f string) Selectors {
	t.Helper()
	s, err := Parse(res, "", f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
