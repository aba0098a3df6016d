// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package admission

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/validation"
)

func secs(s int64) *int64 { return &s }

func pod(kind string, hostNetwork bool, tols ...*nodev1.Toleration) *podv1.Pod {
	p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: &podv1.PodSpec{HostNetwork: hostNetwork, Tolerations: tols}}
	if kind != "" {
		p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{Kind: kind, Name: "owner", Controller: true}}
	}
	return p
}

func tolsJSON(t *testing.T, p *podv1.Pod) string {
	t.Helper()
	b, err := protojson.Marshal(&podv1.PodSpec{Tolerations: p.GetSpec().GetTolerations()})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDefaults(t *testing.T) {
	nr := func(s *int64) *nodev1.Toleration {
		return &nodev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: s}
	}
	ur := func(s *int64) *nodev1.Toleration {
		return &nodev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: s}
	}
	ns := func(key string) *nodev1.Toleration {
		return &nodev1.Toleration{Key: key, Operator: "Exists", Effect: "NoSchedule"}
	}
	dsBase := []*nodev1.Toleration{nr(nil), ur(nil), ns("node.kubernetes.io/disk-pressure"), ns("node.kubernetes.io/memory-pressure"),
		ns("node.kubernetes.io/pid-pressure"), ns("node.kubernetes.io/unschedulable")}
	custom := &nodev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(60)}
	cases := []struct {
		name string
		cfg  Config
		in   *podv1.Pod
		want []*nodev1.Toleration
	}{
		{"ReplicaSet pod gets 300s both", DefaultConfig(), pod("ReplicaSet", false), []*nodev1.Toleration{nr(secs(300)), ur(secs(300))}},
		{"bare pod gets configured seconds", Config{NotReadySeconds: 7, UnreachableSeconds: 9}, pod("", false), []*nodev1.Toleration{nr(secs(7)), ur(secs(9))}},
		{"own unreachable toleration kept, not-ready added", DefaultConfig(), pod("StatefulSet", false, custom), []*nodev1.Toleration{custom, nr(secs(300))}},
		{"empty key Exists covers both", DefaultConfig(), pod("Job", false, &nodev1.Toleration{Operator: "Exists"}), []*nodev1.Toleration{{Operator: "Exists"}}},
		{"empty effect covers", DefaultConfig(), pod("", false, &nodev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: "Exists"}),
			[]*nodev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: "Exists"}, ur(secs(300))}},
		{"NoSchedule toleration does not cover", DefaultConfig(), pod("", false, ns("node.kubernetes.io/not-ready")),
			[]*nodev1.Toleration{ns("node.kubernetes.io/not-ready"), nr(secs(300)), ur(secs(300))}},
		{"DaemonSet pod tolerates for ever", DefaultConfig(), pod("DaemonSet", false), dsBase},
		{"DaemonSet host-network pod tolerates network-unavailable", DefaultConfig(), pod("DaemonSet", true),
			append(append([]*nodev1.Toleration(nil), dsBase...), ns("node.kubernetes.io/network-unavailable"))},
		{"DaemonSet replaces its own toleration with seconds", DefaultConfig(), pod("DaemonSet", false, nr(secs(300))), dsBase},
		{"static pod tolerates every NoExecute taint", DefaultConfig(), pod("Node", false), []*nodev1.Toleration{{Operator: "Exists", Effect: "NoExecute"}}},
	}
	for _, c := range cases {
		p := proto.CloneOf(c.in)
		c.cfg.Apply(p)
		if got, want := tolsJSON(t, p), tolsJSON(t, &podv1.Pod{Spec: &podv1.PodSpec{Tolerations: c.want}}); got != want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
		if c.cfg.Apply(p) {
			t.Errorf("%s: second Apply changed the pod (not idempotent)", c.name)
		}
	}
}

// Admit fills what the API sets on a create, applies the defaults to a copy
// (never to the request), and reports when the defaults overflow the bound.
func TestAdmit(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	in := pod("ReplicaSet", false)
	in.Metadata.ResourceVersion = "7"
	lim := validation.DefaultLimits()
	p, errs := DefaultConfig().Admit(in, now, lim)
	if errs != nil {
		t.Fatalf("Admit: %v", errs)
	}
	if len(p.Metadata.Uid) != 36 || p.Metadata.Uid[14] != '4' || !p.Metadata.CreationTimestamp.AsTime().Equal(now) {
		t.Errorf("uid %q, created %v", p.Metadata.Uid, p.Metadata.CreationTimestamp.AsTime())
	}
	if p.Metadata.ResourceVersion != "" || p.Status.GetPhase() != podutil.PhasePending || len(p.Spec.Tolerations) != 2 {
		t.Errorf("stored form: rv %q, phase %q, %d tolerations", p.Metadata.ResourceVersion, p.Status.GetPhase(), len(p.Spec.Tolerations))
	}
	if in.Metadata.Uid != "" || len(in.Spec.Tolerations) != 0 {
		t.Error("Admit changed the request")
	}
	lim.MaxTolerations = 1
	if _, errs := DefaultConfig().Admit(in, now, lim); errs == nil {
		t.Error("defaults over the bound were accepted")
	}
}
