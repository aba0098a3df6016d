// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package store

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestEvictionCheckedOnHealthRevision is the taint eviction's delete on a
// real etcd, fenced by a won election as on the leader: decided while
// health/n carried unreachable:NoExecute, it is refused once the leader
// has lifted the taint (ErrStale, the pod untouched: neither the
// DisruptionTarget write nor the delete lands), and goes through when
// decided on the current revision.
func TestEvictionCheckedOnHealthRevision(t *testing.T) {
	c := etcdtest.Start(t)
	s := etcdtest.NewStore(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := s.NewSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	l, err := s.Campaign(ctx, sess, "monitor", "m-1")
	if err != nil {
		t.Fatal(err)
	}
	fence := l.Fence()
	apply := func(ops ...nodestore.Op) int64 {
		t.Helper()
		rev, err := s.Apply(ctx, &fence, ops...)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	metaRev := apply(nodestore.Put(nodestore.Nodes, "n", &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n"}}))
	tainted := apply(nodestore.Put(nodestore.Health, "n", &nodev1.NodeHealth{NodeName: "n",
		Taints: []*nodev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: "NoExecute"}}}))
	grace := int64(30)
	podRev := apply(nodestore.Put(nodestore.Pods, "default/web", &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "web", Uid: "web-uid"},
		Spec:     &podv1.PodSpec{NodeName: "n", TerminationGracePeriodSeconds: &grace},
		Status:   &podv1.PodStatus{Phase: podlife.PhaseRunning},
	}))
	// The leader lifts the taint; the evictor's view has not seen it.
	apply(nodestore.Put(nodestore.Health, "n", &nodev1.NodeHealth{NodeName: "n"}))

	opts := func(healthRev int64) podlife.DeleteOptions {
		return podlife.DeleteOptions{UID: "web-uid", ResourceVersion: strconv.FormatInt(podRev, 10), Fence: &fence,
			Condition: &podv1.PodCondition{Type: podlife.DisruptionTarget, Status: "True", Reason: "DeletionByTaintManager"},
			Unchanged: []nodestore.Op{nodestore.Unchanged(nodestore.Nodes, "n", metaRev), nodestore.Unchanged(nodestore.Health, "n", healthRev)}}
	}
	if _, _, err := podlife.Delete(ctx, s, "default", "web", opts(tainted), time.Now()); !errors.Is(err, podlife.ErrStale) {
		t.Fatalf("delete decided on the tainted revision %d: %v, want ErrStale", tainted, err)
	}
	o, err := s.Get(ctx, nodestore.Pods, "default/web")
	if err != nil || o.ModRevision != podRev {
		t.Fatalf("pod written although the check failed: %v, revision %d (was %d)", err, o.ModRevision, podRev)
	}
	h, err := s.Get(ctx, nodestore.Health, "n")
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := podlife.Delete(ctx, s, "default", "web", opts(h.ModRevision), time.Now())
	if err != nil || !podlife.IsTerminating(p) {
		t.Fatalf("delete decided on the current revision: terminating=%v, %v", podlife.IsTerminating(p), err)
	}
}
