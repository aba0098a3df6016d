// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"strings"
	"testing"
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

func TestPodStatusUpdate(t *testing.T) {
	lim := DefaultLimits()
	ok := func() *collectorv1.PodStatusUpdate {
		return &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "web-1", Uid: "u1", Status: &podv1.PodStatus{Phase: PodRunning,
			Conditions: []*podv1.PodCondition{{Type: "Ready", Status: "True", LastTransitionTime: ts(now.Add(-time.Hour))}, {Type: "DisruptionTarget", Status: "True"}}}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*collectorv1.PodStatusUpdate)
		want string
	}{
		{"valid", func(*collectorv1.PodStatusUpdate) {}, ""},
		{"namespace with a dot", func(r *collectorv1.PodStatusUpdate) { r.Namespace = "a.b" }, "podStatus.namespace"},
		{"bad name", func(r *collectorv1.PodStatusUpdate) { r.Name = "Web" }, "podStatus.name"},
		{"no uid", func(r *collectorv1.PodStatusUpdate) { r.Uid = "" }, "podStatus.uid"},
		{"no status", func(r *collectorv1.PodStatusUpdate) { r.Status = nil }, "podStatus.status"},
		{"bad phase", func(r *collectorv1.PodStatusUpdate) { r.Status.Phase = "Dancing" }, "podStatus.status.phase"},
		{"bad condition status", func(r *collectorv1.PodStatusUpdate) { r.Status.Conditions[0].Status = "yes" }, "podStatus.status.conditions[0].status"},
		{"transition an hour ahead (the node's clock)", func(r *collectorv1.PodStatusUpdate) {
			r.Status.Conditions[0].LastTransitionTime = ts(now.Add(time.Hour))
		}, ""},
		{"duplicate condition", func(r *collectorv1.PodStatusUpdate) { r.Status.Conditions[1].Type = "Ready" }, "podStatus.status.conditions[1].type"},
		{"transition before 1970", func(r *collectorv1.PodStatusUpdate) {
			r.Status.Conditions[0].LastTransitionTime = ts(time.Unix(-1, 0))
		}, "podStatus.status.conditions[0].lastTransitionTime"},
		{"probe in year 1", func(r *collectorv1.PodStatusUpdate) {
			r.Status.Conditions[1].LastProbeTime = ts(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC))
		}, "podStatus.status.conditions[1].lastProbeTime"},
		{"transition years ago", func(r *collectorv1.PodStatusUpdate) {
			r.Status.Conditions[0].LastTransitionTime = ts(now.Add(-5 * 365 * 24 * time.Hour))
		}, ""},
		{"long reason", func(r *collectorv1.PodStatusUpdate) { r.Status.Reason = strings.Repeat("R", 1025) }, "podStatus.status.reason"},
	} {
		r := ok()
		tc.mod(r)
		check(t, tc.name, PodStatusUpdate(r, now, lim).Err(), tc.want)
	}
}

func TestPodDelete(t *testing.T) {
	lim := DefaultLimits()
	for _, tc := range []struct {
		name string
		r    *collectorv1.PodDelete
		want string
	}{
		{"no status", &collectorv1.PodDelete{Namespace: "ns", Name: "p", Uid: "u"}, ""},
		{"terminal status", &collectorv1.PodDelete{Namespace: "ns", Name: "p", Uid: "u", Status: &podv1.PodStatus{Phase: PodFailed}}, ""},
		{"running status", &collectorv1.PodDelete{Namespace: "ns", Name: "p", Uid: "u", Status: &podv1.PodStatus{Phase: PodRunning}}, "podDelete.status.phase"},
		{"no uid", &collectorv1.PodDelete{Namespace: "ns", Name: "p"}, "podDelete.uid"},
	} {
		check(t, tc.name, PodDelete(tc.r, now, lim).Err(), tc.want)
	}
}

func TestMirrorPod(t *testing.T) {
	lim := DefaultLimits()
	ok := func() *collectorv1.MirrorPod {
		return &collectorv1.MirrorPod{Pod: &podv1.Pod{
			Metadata: &nodev1.ObjectMeta{Namespace: "kube-system", Name: "etcd-n1", Annotations: map[string]string{MirrorPodAnnotation: "abc"},
				OwnerReferences: []*nodev1.OwnerReference{{Kind: "Node", Name: "n1", Uid: "nu", Controller: true}}},
			Spec: &podv1.PodSpec{NodeName: "n1", Tolerations: []*nodev1.Toleration{{Operator: "Exists", Effect: "NoExecute"}}},
		}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*podv1.Pod)
		want string
	}{
		{"valid", func(*podv1.Pod) {}, ""},
		{"no mirror annotation", func(p *podv1.Pod) { p.Metadata.Annotations = nil }, "mirrorPod.pod.metadata.annotations[" + MirrorPodAnnotation + "]"},
		{"owner not a node", func(p *podv1.Pod) { p.Metadata.OwnerReferences[0].Kind = "ReplicaSet" }, "mirrorPod.pod.metadata.ownerReferences[0].kind"},
		{"owner not controller", func(p *podv1.Pod) { p.Metadata.OwnerReferences[0].Controller = false }, "mirrorPod.pod.metadata.ownerReferences[0].controller"},
		{"two owners", func(p *podv1.Pod) {
			p.Metadata.OwnerReferences = append(p.Metadata.OwnerReferences, p.Metadata.OwnerReferences[0])
		}, "mirrorPod.pod.metadata.ownerReferences"},
		{"unbound", func(p *podv1.Pod) { p.Spec.NodeName = "" }, "mirrorPod.pod.spec.nodeName"},
		{"deletion timestamp", func(p *podv1.Pod) { p.Metadata.DeletionTimestamp = ts(now) }, "mirrorPod.pod.metadata.deletionTimestamp"},
		{"bad toleration", func(p *podv1.Pod) { p.Spec.Tolerations[0].Value = "x" }, "mirrorPod.pod.spec.tolerations[0].value"},
	} {
		r := ok()
		tc.mod(r.Pod)
		check(t, tc.name, MirrorPod(r, now, lim).Err(), tc.want)
	}
}
