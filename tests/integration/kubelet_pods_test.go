// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	reporterapp "github.com/nodepulse/nodepulse/reporter/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestReporterActsAsItsNodesKubelet runs a collector on a real etcd and a
// real reporter with a static pod manifest, whose node has pods bound to it
// when it attaches: the pod deleted while it was away is finished (gone),
// the running one marked not ready gets Ready=True again, the failed one is
// left alone, and the static pod gets its mirror pod, which comes back
// (with a new uid) when deleted through the API. Deleting the node object
// makes the live reporter register again (a new uid), and the mirror pod
// follows the new node object.
func TestReporterActsAsItsNodesKubelet(t *testing.T) {
	cluster := etcdtest.Shared(t)
	store := etcdtest.NewStoreWith(t, cluster, etcdstore.Config{Prefix: cluster.Prefix(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startCollector(t, store, "", nil)

	const node = "kubelet-1"
	readyFalse := &podv1.PodCondition{Type: nodemodel.Ready, Status: nodemodel.False, LastTransitionTime: nodemodel.Timestamp(time.Now().Add(-time.Minute))}
	pods := []*podv1.Pod{
		{Metadata: &nodev1.ObjectMeta{Namespace: "apps", Name: "terminating", Uid: "u-term", DeletionTimestamp: nodemodel.Timestamp(time.Now().Add(-time.Minute))},
			Spec: &podv1.PodSpec{NodeName: node}, Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{readyFalse}}},
		{Metadata: &nodev1.ObjectMeta{Namespace: "apps", Name: "web", Uid: "u-web"},
			Spec: &podv1.PodSpec{NodeName: node}, Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{readyFalse,
				{Type: "DisruptionTarget", Status: "True", Reason: "DeletionByTaintManager"}}}},
		{Metadata: &nodev1.ObjectMeta{Namespace: "apps", Name: "done", Uid: "u-done"},
			Spec: &podv1.PodSpec{NodeName: node}, Status: &podv1.PodStatus{Phase: "Failed", Conditions: []*podv1.PodCondition{readyFalse}}},
	}
	for _, p := range pods {
		if _, err := store.Apply(ctx, nil, nodestore.Put(nodestore.Pods, p.Metadata.Namespace+"/"+p.Metadata.Name, p)); err != nil {
			t.Fatal(err)
		}
	}
	done0, err := store.Get(ctx, nodestore.Pods, "apps/done")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers: [{name: etcd, image: etcd}]\n"
	if err := os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := reporterapp.DefaultConfig()
	cfg.NodeName = node
	cfg.Collector.Addresses = c.GRPCAddr()
	cfg.Collector.TLS.Insecure = true
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.LeaseDurationSeconds = 2
	cfg.StatusUpdateFrequency = time.Second
	cfg.StaticPods = dir
	cfg.PodReconcilePeriod = 200 * time.Millisecond
	r, err := reporterapp.New(cfg, logger(t).Named("reporter"), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	rdone := make(chan error, 1)
	go func() { rdone <- r.Run(rctx) }()
	t.Cleanup(func() { rcancel(); <-rdone })

	getPod := func(key string) (*podv1.Pod, int64, bool) {
		o, err := store.Get(ctx, nodestore.Pods, key)
		if errors.Is(err, nodestore.ErrNotFound) {
			return nil, 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.Value.(*podv1.Pod), o.ModRevision, true
	}
	nodeUID := func() string {
		o, err := store.Get(ctx, nodestore.Nodes, node)
		if err != nil {
			return ""
		}
		return o.Value.(*nodev1.Node).GetMetadata().GetUid()
	}
	mirrorOwner := func() (string, string) {
		p, _, ok := getPod("kube-system/etcd-" + node)
		if !ok {
			return "", ""
		}
		return p.GetMetadata().GetUid(), p.GetMetadata().GetOwnerReferences()[0].GetUid()
	}

	eventually(t, "the terminating pod is gone", func() bool { _, _, ok := getPod("apps/terminating"); return !ok })
	eventually(t, "the running pod is Ready again", func() bool {
		p, _, _ := getPod("apps/web")
		for _, cd := range p.GetStatus().GetConditions() {
			if cd.GetType() == nodemodel.Ready {
				return cd.GetStatus() == nodemodel.True
			}
		}
		return false
	})
	web, _, _ := getPod("apps/web")
	if len(web.GetStatus().GetConditions()) != 2 {
		t.Fatalf("web conditions = %v, want DisruptionTarget kept", web.GetStatus().GetConditions())
	}
	uid1 := nodeUID()
	eventually(t, "the static pod's mirror pod exists, owned by the node", func() bool { _, owner := mirrorOwner(); return owner != "" && owner == uid1 })
	if _, rev, _ := getPod("apps/done"); rev != done0.ModRevision {
		t.Fatal("the failed pod was written")
	}

	// A mirror pod deleted through the API comes back with a new uid.
	m1, _ := mirrorOwner()
	if _, err := store.Apply(ctx, nil, nodestore.Delete(nodestore.Pods, "kube-system/etcd-"+node)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror pod recreated", func() bool { m, _ := mirrorOwner(); return m != "" && m != m1 })

	// The node object deleted while its reporter lives: it registers again.
	if _, err := store.Apply(ctx, nil, nodestore.Delete(nodestore.Nodes, node)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node registered again with a new uid", func() bool { u := nodeUID(); return u != "" && u != uid1 })
	uid2 := nodeUID()
	eventually(t, "the mirror pod owned by the new node object", func() bool { _, owner := mirrorOwner(); return owner == uid2 })
}
