// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestMonitorOwners runs the owner controllers and placement (spec §16) on
// a real etcd with short timers: three nodes, a ReplicaSet of 3, a Parallel
// StatefulSet of 2, a DaemonSet. Node "a" stops renewing: its ReplicaSet
// pod is replaced on another node while it is still Terminating, its
// StatefulSet pod is not replaced until the node is deleted (then it is,
// same name), its DaemonSet pod stays. Then the leader changes: nothing is
// created twice.
func TestMonitorOwners(t *testing.T) {
	c := etcdtest.Shared(t)
	store := etcdtest.NewStore(t, c)
	f := newFleet(t, store)
	for _, n := range []string{"a", "b", "c"} {
		f.add(n, true)
	}
	mods := func(cfg *app.Config) {
		cfg.Admission.UnreachableSeconds = 2
		cfg.Admission.NotReadySeconds = 2
		cfg.PodGCPeriod = 200 * time.Millisecond
		cfg.PodGCQuarantine = time.Second
		cfg.OwnersResync = 500 * time.Millisecond
	}
	m := startMonitor(t, c, store.Prefix(), "monitor-a", mods)
	waitFor(t, 30*time.Second, "monitor-a to lead", m.app.Leading)
	ctx := context.Background()

	sel := func(app string) *nodev1.LabelSelector {
		return &nodev1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	tmpl := func(app string) *podv1.PodTemplateSpec {
		return &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": app}}}
	}
	three, two := int32(3), int32(2)
	if _, err := store.Apply(ctx, nil,
		nodestore.Put(nodestore.ReplicaSets, "default/web", &appsv1.ReplicaSet{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web", Uid: "web-uid", Generation: 1},
			Spec: &appsv1.ReplicaSetSpec{Replicas: &three, Selector: sel("web"), Template: tmpl("web")}}),
		nodestore.Put(nodestore.StatefulSets, "default/db", &appsv1.StatefulSet{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "db", Uid: "db-uid", Generation: 1},
			Spec: &appsv1.StatefulSetSpec{Replicas: &two, Selector: sel("db"), Template: tmpl("db"), PodManagementPolicy: "Parallel"}}),
		nodestore.Put(nodestore.DaemonSets, "default/agent", &appsv1.DaemonSet{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "agent", Uid: "agent-uid", Generation: 1},
			Spec: &appsv1.DaemonSetSpec{Selector: sel("agent"), Template: tmpl("agent")}}),
	); err != nil {
		t.Fatal(err)
	}

	// pods lists "name@node[:T]" for the pods whose name starts with prefix.
	pods := func(prefix string) []*podv1.Pod {
		objs, _, err := store.List(ctx, nodestore.Pods, nodestore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []*podv1.Pod
		for _, o := range objs {
			_, name, _ := strings.Cut(o.Name, "/")
			if strings.HasPrefix(name, prefix) {
				p := o.Value.(*podv1.Pod)
				p.Metadata.Name = name
				out = append(out, p)
			}
		}
		return out
	}
	where := func(prefix string) string {
		var s []string
		for _, p := range pods(prefix) {
			e := p.GetSpec().GetNodeName()
			if podlife.IsTerminating(p) {
				e += ":T"
			}
			s = append(s, e)
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	waitFor(t, 20*time.Second, "the workloads to be placed", func() bool {
		return where("web-") == "a b c" && where("agent-") == "a b c" && where("db-") == "a b"
	})
	uidOf := func(name string) string {
		for _, p := range pods(name) {
			if p.GetMetadata().GetName() == name {
				return p.GetMetadata().GetUid()
			}
		}
		return ""
	}
	db0 := uidOf("db-0") // on a: fewest pods, then name

	// a stops renewing: Unknown after the grace period, tolerations of 2 s.
	f.mu.Lock()
	f.alive["a"] = false
	f.mu.Unlock()
	waitFor(t, time.Minute, "web's pod on a to be Terminating and replaced", func() bool {
		w := where("web-")
		return w == "a:T b b c" || w == "a:T b c c"
	})
	if got := where("db-"); got != "a:T b" {
		t.Fatalf("db pods %q, want db-0 Terminating on a and not replaced", got)
	}
	time.Sleep(2 * time.Second)
	if got := where("db-"); got != "a:T b" {
		t.Fatalf("db pods %q after 2 s more, want still no replacement", got)
	}
	if got := where("agent-"); got != "a b c" {
		t.Fatalf("agent pods %q, want the one on a kept", got)
	}

	// The node is deleted: pod GC removes its pods after the quarantine; the
	// StatefulSet recreates db-0 elsewhere.
	if _, err := store.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, "a"), nodestore.Delete(nodestore.Statuses, "a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "db-0 to be recreated on another node", func() bool {
		u := uidOf("db-0")
		w := where("db-")
		return u != "" && u != db0 && !strings.Contains(w, "a")
	})
	waitFor(t, 10*time.Second, "a's web and agent pods to be gone", func() bool {
		return !strings.Contains(where("web-"), "a") && where("agent-") == "b c"
	})

	// Failover: b takes over when a stops; nothing is created twice.
	before := fmt.Sprint(where("web-"), "|", where("db-"), "|", where("agent-"))
	m2 := startMonitor(t, c, store.Prefix(), "monitor-b", mods)
	m.stop()
	waitFor(t, 30*time.Second, "monitor-b to lead", m2.app.Leading)
	time.Sleep(2 * time.Second)
	after := fmt.Sprint(where("web-"), "|", where("db-"), "|", where("agent-"))
	if before != after || len(pods("web-")) != 3 {
		t.Fatalf("after the failover: %s, before: %s", after, before)
	}
}
