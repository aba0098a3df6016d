// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	reporterapp "github.com/nodepulse/nodepulse/reporter/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// TestForcedStatusUpdateRefreshesHeartbeatWithoutWrite: RequestStatusUpdate
// (NodeService → the collector's SendNodeCommand → the reporter's
// ReportStatus command) makes the reporter send its status now. Unchanged,
// it costs etcd nothing: no write of status/<name> (counted on a watch of
// the real embedded etcd). Yet every reporter-owned condition's served
// lastHeartbeatTime moves to the report's heartbeat within the feed's
// latency (spec §6.7), where it used to stay at the last change.
func TestForcedStatusUpdateRefreshesHeartbeatWithoutWrite(t *testing.T) {
	p := startPipeline(t)
	const node = "heartbeat-node-1"
	cfg := reporterapp.DefaultConfig()
	cfg.NodeName = node
	cfg.Collector.Addresses = p.collector.GRPCAddr()
	cfg.Collector.TLS.Insecure = true
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.LeaseDurationSeconds = leaseSecs
	cfg.StatusUpdateFrequency = time.Second
	// No periodic unchanged report during the test: only the forced one.
	cfg.StatusReportFrequency = time.Hour
	r, err := reporterapp.New(cfg, logger(t).Named("reporter"), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p.runApp("reporter", r.Run)
	p.waitReady(node, nodemodel.True, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	served := func() *nodev1.Node {
		t.Helper()
		resp, err := p.nodes.GetNode(ctx, &nodev1.GetNodeRequest{Name: node})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetNode()
	}
	readyHB := func(n *nodev1.Node) time.Time {
		return nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready).GetLastHeartbeatTime().AsTime()
	}
	stored := func() nodestore.Object {
		t.Helper()
		o, err := p.store.Get(ctx, nodestore.Statuses, node)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}

	// Settle: the reporter's startup reports (first status, then Ready)
	// are real changes. Wait until status/ held still for 2 s.
	before := stored()
	for settled := time.Now(); time.Since(settled) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
		if o := stored(); o.ModRevision != before.ModRevision {
			before, settled = o, time.Now()
		}
	}
	storedHB := nodemodel.ReportedHeartbeat(before.Value.(*nodev1.NodeStatus))
	servedBefore := readyHB(served())
	if servedBefore.Before(storedHB) {
		t.Fatalf("served heartbeat %v older than the stored one %v", servedBefore, storedHB)
	}

	// Count every write of status/<node> from here on.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := p.store.Watch(wctx, before.ModRevision)
	writes := make(chan int, 1)
	go func() {
		n := 0
		defer func() { writes <- n }()
		for b := range watch {
			for _, ev := range b.Events {
				if ev.Object.Kind == nodestore.Statuses && ev.Object.Name == node {
					n++
				}
			}
		}
	}()

	// The reporter's clock moves on; a second later it is asked to report.
	time.Sleep(1100 * time.Millisecond)
	asked := time.Now()
	resp, err := p.nodes.RequestStatusUpdate(ctx, &nodev1.RequestStatusUpdateRequest{Name: node})
	if err != nil || !resp.GetDelivered() {
		t.Fatalf("RequestStatusUpdate: %v, %v", resp, err)
	}
	var after *nodev1.Node
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after = served()
		if readyHB(after).After(servedBefore) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("served Ready heartbeat still %v 5 s after the forced report", readyHB(after))
		}
	}
	t.Logf("served heartbeat moved %v → %v, %s after the request", servedBefore, readyHB(after), time.Since(asked).Round(time.Millisecond))
	if hb := readyHB(after); hb.Before(asked.Add(-time.Second)) {
		t.Errorf("served heartbeat %v is not the forced report's (asked at %v)", hb, asked)
	}
	for _, typ := range nodemodel.ReporterConditions {
		if c := nodemodel.FindCondition(after.GetStatus().GetConditions(), typ); !c.GetLastHeartbeatTime().AsTime().Equal(readyHB(after)) {
			t.Errorf("%s heartbeat %v, want the report's %v", typ, c.GetLastHeartbeatTime().AsTime(), readyHB(after))
		}
	}

	// Let any write the report could have caused reach the watch.
	time.Sleep(500 * time.Millisecond)
	wcancel()
	if n := <-writes; n != 0 {
		t.Fatalf("the unchanged forced report cost %d etcd writes of status/%s, want 0", n, node)
	}
	if o := stored(); o.ModRevision != before.ModRevision || !nodemodel.ReportedHeartbeat(o.Value.(*nodev1.NodeStatus)).Equal(storedHB) {
		t.Fatalf("status/%s rewritten: rev %d → %d", node, before.ModRevision, o.ModRevision)
	}
}
