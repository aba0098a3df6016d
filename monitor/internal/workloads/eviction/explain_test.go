// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"strings"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func ownedPod(ns, name, node, owner string) *podv1.Pod {
	return &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []*nodev1.OwnerReference{{Kind: owner, Name: name + "-owner", Controller: true}}},
		Spec: &podv1.PodSpec{NodeName: node}}
}

func TestExplainPodWords(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 5, 0, 0, time.Local)
	added := time.Date(2026, 8, 1, 12, 3, 10, 0, time.Local)
	taint := &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoExecute, TimeAdded: nodemodel.Timestamp(added)}
	node := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n12"}, Spec: &nodev1.NodeSpec{Taints: []*nodev1.Taint{taint}}}
	p := ownedPod("default", "web-7", "n12", "ReplicaSet")
	p.Spec.Tolerations = []*nodev1.Toleration{{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: secs(300)}}
	sched := &Scheduled{UID: "u", Node: "n12", Created: added, FireAt: added.Add(300 * time.Second), Seconds: 300, Taint: taint}
	sum, details, at := ExplainPod(now, p, node, sched, true, "")
	if want := "pod web-7 on node n12 will be deleted at 12:08:10 (unreachable since 12:03:10, tolerates 300 s)"; sum != want {
		t.Errorf("summary %q, want %q", sum, want)
	}
	if !at.Equal(added.Add(300 * time.Second)) {
		t.Errorf("deletion time %v", at)
	}
	if !strings.Contains(strings.Join(details, "\n"), "processed the taint") {
		t.Errorf("details do not say where the wait counts from: %v", details)
	}
	// Not the leader: a prediction, and who knows exactly.
	sum, details, _ = ExplainPod(now, p, node, nil, false, "monitor-b")
	if !strings.Contains(sum, "at about 12:08:10") || !strings.Contains(strings.Join(details, "\n"), "monitor-b") {
		t.Errorf("follower: %q %v", sum, details)
	}
	ds := ownedPod("kube-system", "agent", "n12", "DaemonSet")
	ds.Spec.Tolerations = []*nodev1.Toleration{{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute}}
	if sum, _, _ := ExplainPod(now, ds, node, nil, true, ""); !strings.Contains(sum, "for ever") {
		t.Errorf("DaemonSet: %q", sum)
	}
	healthy := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n12"}}
	sum, details, _ = ExplainPod(now, p, healthy, nil, true, "")
	if !strings.Contains(sum, "not threatened") || !strings.Contains(strings.Join(details, "\n"), "300 s after") {
		t.Errorf("healthy node: %q %v", sum, details)
	}
	if lines := explainNodePods(now, node, nil, false, nil, GC{}); lines != nil {
		t.Errorf("no pods: %v", lines)
	}
	// A node's pods: the leader's schedule gives the time; a pod it has
	// not scheduled gets the prediction, named by namespace/name.
	other := ownedPod("default", "db-1", "n12", "StatefulSet")
	lines := explainNodePods(now, node, []*podv1.Pod{p, other}, true, []PodSchedule{{Namespace: "default", Name: "web-7", Scheduled: *sched}}, GC{})
	if len(lines) != 2 || lines[0] != "pod default/web-7 will be deleted at 12:08:10 (unreachable since 12:03:10, tolerates 300 s)" ||
		!strings.HasPrefix(lines[1], "pod default/db-1 will be deleted as soon as the evictor processes it") {
		t.Errorf("node's pods:\n%s", strings.Join(lines, "\n"))
	}
}
