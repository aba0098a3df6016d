package simulate

import (
	"testing"
	"time"

	"go.uber.org/zap"

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
