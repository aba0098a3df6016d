// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package storetest

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// testOwnerKinds: the owners and disruption budgets are stored, read,
// listed, updated under CAS and watched like pods, each under its own
// prefix ("poddisruptionbudgets/" must not show up in a list of "pods/").
func testOwnerKinds(t *testing.T, s nodestore.Store) {
	sel := &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tmpl := &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: &podv1.PodSpec{Volumes: []*podv1.Volume{{Name: "scratch", EmptyDir: &podv1.EmptyDirVolumeSource{SizeLimit: "1Gi"}}}}}
	meta := func(gen int64) *nodev1.ObjectMeta {
		return &nodev1.ObjectMeta{Namespace: "shop", Name: "web", Uid: "u-1", Generation: gen}
	}
	objects := map[nodestore.Kind]func(gen int64) proto.Message{
		nodestore.ReplicaSets: func(gen int64) proto.Message {
			return &appsv1.ReplicaSet{Metadata: meta(gen), Spec: &appsv1.ReplicaSetSpec{Replicas: proto.Int32(int32(gen)), Selector: sel, Template: tmpl},
				Status: &appsv1.ReplicaSetStatus{Replicas: 1, TerminatingReplicas: 1}}
		},
		nodestore.StatefulSets: func(gen int64) proto.Message {
			return &appsv1.StatefulSet{Metadata: meta(gen), Spec: &appsv1.StatefulSetSpec{Replicas: proto.Int32(int32(gen)), Selector: sel, Template: tmpl,
				PodManagementPolicy: "OrderedReady"}}
		},
		nodestore.DaemonSets: func(gen int64) proto.Message {
			return &appsv1.DaemonSet{Metadata: meta(gen), Spec: &appsv1.DaemonSetSpec{Selector: sel, Template: tmpl},
				Status: &appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(gen)}}
		},
		nodestore.PodDisruptionBudgets: func(gen int64) proto.Message {
			return &policyv1.PodDisruptionBudget{Metadata: meta(gen), Spec: &policyv1.PodDisruptionBudgetSpec{Selector: sel,
				MaxUnavailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_StrValue{StrValue: "50%"}}},
				Status: &policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(gen)}}
		},
	}
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	start := currentRev(t, s)
	rsWatch := nodestore.WatchKind(c, s, nodestore.ReplicaSets, start, nodestore.KindWatchOptions{})
	apply(t, s, nil, nodestore.Put(nodestore.Pods, "shop/web", &podv1.Pod{}))

	var rsRevs []int64
	for _, k := range []nodestore.Kind{nodestore.ReplicaSets, nodestore.StatefulSets, nodestore.DaemonSets, nodestore.PodDisruptionBudgets} {
		mk := objects[k]
		r1 := apply(t, s, nil, nodestore.Op{Kind: k, Name: "shop/web", Value: mk(1), IfAbsent: true})
		o := mustGet(t, s, k, "shop/web")
		wantValue(t, o, mk(1))
		if _, err := s.Apply(ctx(t), nil, nodestore.Op{Kind: k, Name: "shop/web", Value: mk(1), IfAbsent: true}); !errors.Is(err, nodestore.ErrConflict) {
			t.Fatalf("%s: second create: %v, want ErrConflict", k, err)
		}
		r2 := apply(t, s, nil, nodestore.Op{Kind: k, Name: "shop/web", Value: mk(2), IfModRevision: r1})
		if _, err := s.Apply(ctx(t), nil, nodestore.Op{Kind: k, Name: "shop/web", Value: mk(3), IfModRevision: r1}); !errors.Is(err, nodestore.ErrConflict) {
			t.Fatalf("%s: stale CAS: %v, want ErrConflict", k, err)
		}
		wantValue(t, mustGet(t, s, k, "shop/web"), mk(2))
		objs, _, err := s.List(ctx(t), k, nodestore.ListOptions{})
		if err != nil || len(objs) != 1 || objs[0].Kind != k || objs[0].Name != "shop/web" || objs[0].ModRevision != r2 {
			t.Fatalf("%s: list = %v, %v", k, names(objs), err)
		}
		if k == nodestore.ReplicaSets {
			rsRevs = append(rsRevs, r1, r2)
		}
	}
	pods, _, err := s.List(ctx(t), nodestore.Pods, nodestore.ListOptions{})
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods list = %v, %v (budgets must not show up)", names(pods), err)
	}
	r := apply(t, s, nil, nodestore.Delete(nodestore.ReplicaSets, "shop/web"))
	mustNotFound(t, s, nodestore.ReplicaSets, "shop/web")
	wantValue(t, mustGet(t, s, nodestore.StatefulSets, "shop/web"), objects[nodestore.StatefulSets](2))
	wantEvents(t, collect(t, rsWatch, 3), put(nodestore.ReplicaSets, "shop/web", rsRevs[0]), put(nodestore.ReplicaSets, "shop/web", rsRevs[1]),
		del(nodestore.ReplicaSets, "shop/web", r))
}
