// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestCollectorMTLS: with mTLS a node may only report for itself, FeedService
// is for control-plane identities, and a client without a certificate gets
// no stream at all.
func TestCollectorMTLS(t *testing.T) {
	cl := etcdtest.Start(t)
	store := etcdtest.NewStore(t, cl)
	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Nodes: []string{"node-a", "node-b"}, Operators: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	c := startCollector(t, store, dir, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// node-b reports for itself.
	rb, ack, err := openReport(t, ctx, dial(t, c.GRPCAddr(), dir, "node-node-b"), "node-b")
	if err != nil || ack.GetError() != nil {
		t.Fatalf("node-b registering itself: %v %v", ack, err)
	}
	if a, err := rb.status(nodeStatus("True", time.Now())); err != nil || !a.GetDurable() {
		t.Fatalf("node-b status: %v %v", a, err)
	}
	before := map[nodestore.Kind]int64{}
	for _, k := range []nodestore.Kind{nodestore.Nodes, nodestore.Statuses} {
		o, err := store.Get(ctx, k, "node-b")
		if err != nil {
			t.Fatal(err)
		}
		before[k] = o.ModRevision
	}

	// node-a's certificate cannot register (and so cannot write) node-b.
	_, _, err = openReport(t, ctx, dial(t, c.GRPCAddr(), dir, "node-node-a"), "node-b")
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !contains(st.Message(), "node-b") {
		t.Fatalf("node-a writing node-b: %v, want PermissionDenied naming node-b", err)
	}
	for k, rev := range before {
		o, err := store.Get(ctx, k, "node-b")
		if err != nil || o.ModRevision != rev {
			t.Fatalf("%s/node-b changed after a refused stream (rev %d -> %d, %v)", k, rev, o.ModRevision, err)
		}
	}
	if _, err := store.Get(ctx, nodestore.Statuses, "node-a"); err == nil {
		t.Fatal("node-a stored something")
	}

	// An operator certificate is not a node: no Report stream.
	_, _, err = openReport(t, ctx, dial(t, c.GRPCAddr(), dir, "operator-alice"), "node-b")
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("operator opening a Report stream: %v", err)
	}

	// No client certificate: the TLS handshake fails, no stream.
	_, _, err = openReport(t, ctx, dial(t, c.GRPCAddr(), dir, ""), "node-b")
	if err == nil || status.Code(err) == codes.OK {
		t.Fatal("stream without a client certificate")
	}

	// FeedService: a node may not follow it; the component certificate may.
	feedCall := func(cert string) error {
		w, err := collectorv1.NewFeedServiceClient(dial(t, c.GRPCAddr(), dir, cert)).WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: cert})
		if err != nil {
			return err
		}
		b, err := w.Recv()
		// node-b's ATTACHED, then its latest status heartbeat when its
		// status was acknowledged already (STATUS_REPORTED, spec §6.7).
		evs := b.GetEvents()
		if n := len(evs); err == nil && (!b.GetSnapshot() || n < 1 || n > 2 ||
			evs[0].GetNodeName() != "node-b" || evs[0].GetKind() != collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED ||
			n == 2 && (evs[1].GetNodeName() != "node-b" || evs[1].GetKind() != collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED)) {
			t.Errorf("snapshot for %s: %v", cert, b)
		}
		return err
	}
	if err := feedCall("node-node-a"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node following the feed: %v", err)
	}
	if err := feedCall("server"); err != nil {
		t.Fatalf("component following the feed: %v", err)
	}
	if err := feedCall("operator-alice"); err != nil {
		t.Fatalf("operator following the feed: %v", err)
	}

	// The stored node is as node-b registered it.
	o, _ := store.Get(ctx, nodestore.Nodes, "node-b")
	if o.Value.(*nodev1.Node).GetMetadata().GetLabels()["kubernetes.io/hostname"] != "node-b" {
		t.Fatalf("stored node %v", o.Value)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
