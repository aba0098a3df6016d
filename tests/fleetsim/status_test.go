// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// TestPeriodicStatusIsUnchanged: a virtual node's periodic re-send (nothing
// changed on the "host") must be identical to what it sent first, by the
// collector's own test, or every 5-minute report costs an etcd write.
func TestPeriodicStatusIsUnchanged(t *testing.T) {
	sim, err := New(simConfig("127.0.0.1:1", 20), zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 20 {
		n := &sim.nodes[i]
		n.bootTime = reg.UnixNano()
		first := sim.status(i, n, reg)
		n.sentStatus = true
		later := sim.status(i, n, reg.Add(5*time.Minute))
		if nodemodel.StatusChanged(first, later) {
			t.Fatalf("node %d: periodic status differs from the first one:\nfirst %v\nlater %v", i, first.GetConditions(), later.GetConditions())
		}
		if !later.GetConditions()[0].GetLastHeartbeatTime().AsTime().After(reg) {
			t.Errorf("node %d: heartbeat time did not advance", i)
		}
	}
}

// BenchmarkStatusResend is the simulator's cost of one periodic status
// re-send of an unchanged virtual node: building the status with the real
// setters and encoding it, as Send does. At 100,000 nodes the fleet re-sends
// ~333 statuses a second, and the benchmark's simulator runs with its GC off
// (tests/bench), so every byte allocated here is fresh memory it touches.
func BenchmarkStatusResend(b *testing.B) {
	sim, err := New(simConfig("127.0.0.1:1", 1000), zap.NewNop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	reg := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range sim.nodes {
		n := &sim.nodes[i]
		n.bootTime = reg.UnixNano()
		sim.status(i, n, reg)
		n.sentStatus = true
	}
	b.ReportAllocs()
	now := reg.Add(5 * time.Minute)
	for i := 0; b.Loop(); i++ {
		k := i % len(sim.nodes)
		st := sim.status(k, &sim.nodes[k], now)
		req := &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: st}}}
		if _, err := proto.Marshal(req); err != nil {
			b.Fatal(err)
		}
	}
}
