// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package storetest

import (
	"context"
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// testWatchKind: nodestore.WatchKind (the backend's KindWatcher, or the
// filtered prefix watch) delivers the kind's changes only, and with
// DeletesOnly only its deletions, in order.
func testWatchKind(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	start := currentRev(t, s)
	pods := nodestore.WatchKind(c, s, nodestore.Pods, start, nodestore.KindWatchOptions{})
	nodeDeletes := nodestore.WatchKind(c, s, nodestore.Nodes, start, nodestore.KindWatchOptions{DeletesOnly: true})

	apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	r2 := apply(t, s, nil,
		nodestore.Put(nodestore.Statuses, "a", &nodev1.NodeStatus{}),
		nodestore.Put(nodestore.Pods, "ns/p", &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "ns", Name: "p"}}),
	)
	r3 := apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "a"))
	apply(t, s, nil, nodestore.Put(nodestore.Leases, "a", &nodev1.Lease{}))
	r5 := apply(t, s, nil, nodestore.Delete(nodestore.Pods, "ns/p"))

	wantEvents(t, collect(t, pods, 2), put(nodestore.Pods, "ns/p", r2), del(nodestore.Pods, "ns/p", r5))
	wantEvents(t, collect(t, nodeDeletes, 1), del(nodestore.Nodes, "a", r3))

	// Nothing else arrives before a marker of the watched kind.
	r6 := apply(t, s, nil, nodestore.Put(nodestore.Pods, "ns/marker", &podv1.Pod{}))
	wantEvents(t, collect(t, pods, 1), put(nodestore.Pods, "ns/marker", r6))
	apply(t, s, nil, nodestore.Put(nodestore.Nodes, "marker", node("marker", "1")))
	r8 := apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "marker"))
	wantEvents(t, collect(t, nodeDeletes, 1), del(nodestore.Nodes, "marker", r8))
}
