// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package persist

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// meter counts what reaches the store: transactions, keys and bytes (key +
// encoded value, what etcd appends to its history per put).
type meter struct {
	nodestore.Store
	txns, keys, bytes atomic.Int64
}

func (m *meter) Apply(ctx context.Context, f *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	m.txns.Add(1)
	m.keys.Add(int64(len(ops)))
	for _, op := range ops {
		m.bytes.Add(int64(len(nodestore.Key("/nodepulse/", op.Kind, op.Name)) + proto.Size(op.Value)))
	}
	return m.Store.Apply(ctx, f, ops...)
}

// simulate runs the checkpointer's own steps (popDue, checkpointBatch) on a
// fake clock for a fleet of n nodes renewing every renew interval, after all
// attached at once, and returns the store traffic of the steady state: the
// window after the first checkpoint interval (attach checkpoints excluded).
// With statusEvery > 0 every node also has a status report acknowledged
// that often (its heartbeat rides on the checkpoints).
func simulate(tb testing.TB, n int, interval, renew, window, statusEvery time.Duration) (txns, keys, bytes int64) {
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	m := &meter{Store: mem}
	table := live.New(1 << 22)
	cfg := DefaultConfig()
	cfg.CollectorID = "collector-7f3a9c1e"
	cfg.CheckpointInterval = interval
	p, err := New(cfg, m, table, zap.NewNop(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	names := make([]string, n)
	gens := make([]uint64, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%06d.zone-a.example.com", i)
		gens[i] = table.Attach(names[i], "6f1c2a4e-0d7b-4c61-9a57-3e2f8b1d0c93", clock)
	}
	ctx := context.Background()
	step := checkpointTick
	renewSteps := int(renew / step)
	statusSteps := int(statusEvery / step)
	var base [3]int64
	total := interval + window
	for s := 0; time.Duration(s)*step < total; s++ {
		clock = clock.Add(step)
		// Renewals are jittered by the reporters; spread them evenly over
		// the renew interval by node index.
		for i := s % renewSteps; i < n; i += renewSteps {
			table.Renew(names[i], gens[i], clock, 40)
			if s < renewSteps {
				p.Attach(names[i], gens[i], time.Time{})
			}
		}
		for i := s % max(statusSteps, 1); statusSteps > 0 && i < n; i += statusSteps {
			if r, ok := table.Ref(names[i], gens[i]); ok {
				r.StatusReported(clock.Add(-time.Duration(i)*time.Microsecond), clock) // nanos, as a reporter's clock has
			}
		}
		for {
			items := p.popDue(clock, m.MaxOps())
			if len(items) == 0 {
				break
			}
			p.checkpointBatch(ctx, items)
		}
		if time.Duration(s+1)*step == interval {
			base = [3]int64{m.txns.Load(), m.keys.Load(), m.bytes.Load()}
		}
	}
	return m.txns.Load() - base[0], m.keys.Load() - base[1], m.bytes.Load() - base[2]
}

// TestSteadyStateWithinEtcdBudget checks the design goal of
// docs/architecture.md "Collector write path" at full scale: 100,000 nodes
// renewing every 10s with the default checkpoint interval stay within 50
// Txn/s and 100 KB/s of etcd writes. It counts operations, not time, so it is
// stable on a loaded machine.
func TestSteadyStateWithinEtcdBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 100,000 nodes")
	}
	const n = 100_000
	// Renewals every 30s instead of 10s: a checkpoint only needs the lease
	// to have advanced since the last one, so the write pattern is the same
	// and the simulation three times cheaper.
	window := 2 * time.Minute
	interval := DefaultConfig().CheckpointInterval
	// Statuses re-reported unchanged every 5 minutes (the report
	// frequency): their heartbeats ride on the checkpoints, which must
	// stay within the budget and not become more frequent.
	for _, statusEvery := range []time.Duration{0, 5 * time.Minute} {
		txns, keys, bytes := simulate(t, n, interval, 30*time.Second, window, statusEvery)
		secs := window.Seconds()
		t.Logf("100,000 nodes, steady state, status reports every %s: %.1f Txn/s, %.0f keys/s, %.1f KB/s, %.0f B/key, %.0f keys/Txn",
			statusEvery, float64(txns)/secs, float64(keys)/secs, float64(bytes)/secs/1000, float64(bytes)/float64(keys), float64(keys)/float64(txns))
		if tps := float64(txns) / secs; tps > 50 {
			t.Errorf("%.1f Txn/s exceeds the budget of 50", tps)
		}
		if kbps := float64(bytes) / secs / 1000; kbps > 100 {
			t.Errorf("%.1f KB/s exceeds the budget of 100", kbps)
		}
		// Every node is checkpointed once per interval, no more.
		if want := float64(n) * window.Seconds() / interval.Seconds(); float64(keys) > want*1.01 {
			t.Errorf("%d lease writes in %s for %d nodes, want about %.0f", keys, window, n, want)
		}
	}
}

// BenchmarkSteadyState1000Nodes reports etcd writes per 1,000 nodes per
// second in steady state (renewals every 10s, the default checkpoint
// interval).
func BenchmarkSteadyState1000Nodes(b *testing.B) {
	interval := DefaultConfig().CheckpointInterval
	for range b.N {
		window := interval
		txns, keys, bytes := simulate(b, 1000, interval, 10*time.Second, window, 0)
		b.ReportMetric(float64(txns)/window.Seconds(), "txn/s")
		b.ReportMetric(float64(keys)/window.Seconds(), "keys/s")
		b.ReportMetric(float64(bytes)/window.Seconds(), "B/s")
	}
}
