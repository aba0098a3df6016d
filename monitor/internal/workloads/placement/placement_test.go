// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package placement

import (
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func node(name string, ready bool, cordoned bool, taints ...*nodev1.Taint) *nodev1.Node {
	st := nodemodel.False
	if ready {
		st = nodemodel.True
	}
	return &nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: name},
		Spec:     &nodev1.NodeSpec{Unschedulable: cordoned, Taints: taints},
		Status:   &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: st}}},
	}
}

func pod(nodeName, phase string, tols ...*nodev1.Toleration) *podv1.Pod {
	return &podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: "p"}, Spec: &podv1.PodSpec{NodeName: nodeName, Tolerations: tols}, Status: &podv1.PodStatus{Phase: phase}}
}

var (
	unreachableNS = &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoSchedule}
	unreachableNE = &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute}
	unschedTaint  = &nodev1.Taint{Key: nodemodel.TaintUnschedulable, Effect: nodemodel.NoSchedule}
	preferNS      = &nodev1.Taint{Key: "x", Effect: nodemodel.PreferNoSchedule}
)

func TestPlace(t *testing.T) {
	defaultTols := []*nodev1.Toleration{{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute}}
	for _, tc := range []struct {
		name    string
		nodes   []*nodev1.Node
		pods    []*podv1.Pod
		pod     *podv1.Pod
		want    string
		message string
	}{
		{name: "no nodes", pod: pod("", "Pending"), message: "0/0 nodes are available: no nodes available to schedule pods."},
		{name: "fewest pods wins", nodes: []*nodev1.Node{node("a", true, false), node("b", true, false)},
			pods: []*podv1.Pod{pod("a", "Running")}, pod: pod("", "Pending"), want: "b"},
		{name: "terminal pods are not counted, name breaks ties",
			nodes: []*nodev1.Node{node("b", true, false), node("a", true, false)},
			pods:  []*podv1.Pod{pod("a", "Failed"), pod("b", "Succeeded"), pod("", "Pending")}, pod: pod("", "Pending"), want: "a"},
		{name: "PreferNoSchedule only scores (not at all here)", nodes: []*nodev1.Node{node("a", true, false, preferNS)}, pod: pod("", "Pending"), want: "a"},
		{name: "upstream message", pod: pod("", "Pending", defaultTols...),
			nodes:   []*nodev1.Node{node("a", true, true, unschedTaint), node("b", false, false, unreachableNS, unreachableNE), node("c", false, false, unreachableNS)},
			message: "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."},
		{name: "NoExecute taint tolerated only for a while still counts as tolerated",
			nodes: []*nodev1.Node{node("a", true, false, unreachableNE)}, pod: pod("", "Pending", defaultTols...), want: "a"},
		{name: "cordon tolerated", nodes: []*nodev1.Node{node("a", true, true, unschedTaint)},
			pod: pod("", "Pending", &nodev1.Toleration{Key: nodemodel.TaintUnschedulable, Operator: "Exists", Effect: nodemodel.NoSchedule}), want: "a"},
		{name: "not ready without taints", nodes: []*nodev1.Node{node("a", false, false)}, pod: pod("", "Pending"),
			message: "0/1 nodes are available: 1 node(s) were not ready."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Place(tc.nodes, tc.pods, tc.pod)
			if got.Node != tc.want || got.Message != tc.message {
				t.Fatalf("Place = %+v, want node %q message %q", got, tc.want, tc.message)
			}
		})
	}
}
