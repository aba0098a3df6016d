// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package table

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeStatusAndRoles(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(ready corev1.ConditionStatus, cordoned bool, labels map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, CreationTimestamp: metav1.Time{Time: now.Add(-90 * time.Minute)}}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		}
		n.Spec.Unschedulable = cordoned
		return n
	}
	for _, c := range []struct {
		n    *corev1.Node
		want string
	}{
		{node(corev1.ConditionTrue, false, nil), "Ready <none> 90m"},
		{node(corev1.ConditionTrue, true, map[string]string{"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": ""}), "Ready,SchedulingDisabled infra,worker 90m"},
		{node(corev1.ConditionUnknown, false, map[string]string{"kubernetes.io/role": "master"}), "NotReady master 90m"},
		{node(corev1.ConditionFalse, true, nil), "NotReady,SchedulingDisabled <none> 90m"},
		{node("", false, nil), "Unknown <none> 90m"},
	} {
		tb := New("nodes")
		Add(tb, now, c.n, c.n.ObjectMeta)
		r := tb.Rows[0].Cells
		if got := fmt.Sprintf("%v %v %v", r[1], r[2], r[3]); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
		if len(r) != len(tb.ColumnDefinitions) {
			t.Errorf("%d cells for %d columns", len(r), len(tb.ColumnDefinitions))
		}
	}
}

func TestPodRows(t *testing.T) {
	now := time.Now()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "x"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	tb := New("pods")
	Add(tb, now, p, p.ObjectMeta)
	ts := metav1.Now()
	p2 := p.DeepCopy()
	p2.DeletionTimestamp = &ts
	p2.Status.Conditions = nil
	Add(tb, now, p2, p2.ObjectMeta)
	p3 := p.DeepCopy()
	p3.Status.Phase = corev1.PodSucceeded
	Add(tb, now, p3, p3.ObjectMeta)
	got := fmt.Sprint(tb.Rows[0].Cells[1:3], tb.Rows[0].Cells[6], tb.Rows[1].Cells[1:3], len(tb.Rows[2].Conditions))
	if got != "[1/1 Running]x[0/1 Terminating] 1" {
		t.Fatalf("pod rows %s", got)
	}
	if md := tb.Rows[0].Object.Object.(*metav1.PartialObjectMetadata); md.Namespace != "ns" {
		t.Fatalf("row object namespace %q (kubectl -A needs it)", md.Namespace)
	}
}

func TestOwnerAndBudgetRows(t *testing.T) {
	now := time.Now()
	three := int32(3)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: metav1.Time{Time: now.Add(-time.Hour)}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2}}
	tb := New("replicasets")
	Add(tb, now, rs, rs.ObjectMeta)
	if got := fmt.Sprint(tb.Rows[0].Cells); got != "[web 3 3 2 60m app=web]" {
		t.Fatalf("replicaset row %s", got)
	}
	min := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web-pdb", CreationTimestamp: metav1.Time{Time: now}},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &min}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
	tb = New("poddisruptionbudgets")
	Add(tb, now, pdb, pdb.ObjectMeta)
	if got := fmt.Sprint(tb.Rows[0].Cells); got != "[web-pdb 2 N/A 1 0s]" {
		t.Fatalf("budget row %s", got)
	}
	if len(tb.ColumnDefinitions) != len(tb.Rows[0].Cells) {
		t.Fatalf("%d columns, %d cells", len(tb.ColumnDefinitions), len(tb.Rows[0].Cells))
	}
}

func TestPodReadyCountsContainers(t *testing.T) {
	now := time.Now()
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: "x", Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "a", Ready: true, State: running}, {Name: "b", Ready: true, State: running, RestartCount: 2}}}}
	cells, _ := podCells(now, p)
	if cells[1] != "2/2" || cells[2] != "Running" || cells[3] != "2" || cells[8] != "1/1" {
		t.Fatalf("cells %v", cells)
	}
	p.Status.ContainerStatuses[1] = corev1.ContainerStatus{Name: "b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}}
	p.Status.Phase = corev1.PodFailed
	if cells, _ := podCells(now, p); cells[1] != "1/2" || cells[2] != "Error" {
		t.Fatalf("a killed container: %v", cells)
	}
}
