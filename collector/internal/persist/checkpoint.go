// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package persist

import (
	"container/heap"
	"context"
	"hash/fnv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// checkpointTick is how often the checkpointer looks for due leases. It
// adds at most this much to a lease's staleness in etcd.
const checkpointTick = 250 * time.Millisecond

type dueItem struct {
	due  time.Time
	name string
	gen  uint64
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// Attach schedules the first checkpoint of attachment gen of name, called
// at the first renewal on a new stream. fresh is Registered.LeaseFresh:
// until then the stored copy, whoever wrote it, keeps the staleness bound
// it declares.
//
// A node with no stored lease, or one whose stored copy would outlive its
// bound before this collector's regular checkpoint of the node, is written
// at once (rate permitting). Any other waits for that regular checkpoint,
// at the node's phase of the interval: the stored copy stays honest until
// then, and its persistence.collector names the previous holder meanwhile
// (the monitors' feeds say which collector holds it now).
//
// Why: after a collector restart, or in any failover, the whole fleet
// attaches within a minute. Writing every node at once was ~100,000 lease
// puts in that minute: etcd write load while registrations wait for etcd,
// and 15–20 MiB of history in the database until the next compaction
// (docs/adr/0002-coarse-lease-checkpoints.md). The phase is a hash of the name, the
// same on every collector, so a fleet that moves keeps its checkpoints
// spread.
//
// persistTime is the previous collector's clock; collectors whose clocks
// disagree by d make the bound hold to within d.
func (p *Persister) Attach(name string, gen uint64, fresh time.Time) {
	var due time.Time // zero: at once
	if next := p.nextPhase(name, p.now()); !fresh.IsZero() && !next.Add(checkpointTick).After(fresh) {
		due = next
		p.m.ckDeferred.Inc()
	}
	p.schedule(name, gen, due)
}

// leaseFresh is when the stored lease l stops keeping its own promise: its
// persistTime plus its maxStaleness (zero when it declares neither).
func leaseFresh(l *nodev1.Lease) time.Time {
	ps := l.GetPersistence()
	if ps.GetPersistTime() == nil || ps.GetMaxStaleness() == nil {
		return time.Time{}
	}
	return ps.GetPersistTime().AsTime().Add(ps.GetMaxStaleness().AsDuration())
}

// CheckpointNow moves name's next checkpoint to now (a reporter that is
// leaving: its last renewal should reach etcd).
func (p *Persister) CheckpointNow(name string, gen uint64) { p.schedule(name, gen, time.Time{}) }

func (p *Persister) schedule(name string, gen uint64, due time.Time) {
	p.ckMu.Lock()
	heap.Push(&p.ckHeap, dueItem{due: due, name: name, gen: gen})
	p.m.ckPending.Set(float64(p.ckHeap.Len()))
	p.ckMu.Unlock()
	if due.IsZero() {
		select {
		case p.ckWake <- struct{}{}:
		default:
		}
	}
}

// nextPhase is the next instant after now at which name's checkpoint falls
// due: every node has a fixed offset in the interval (a hash of its name),
// so checkpoints of a fleet that attached all at once still spread evenly.
func (p *Persister) nextPhase(name string, now time.Time) time.Time {
	iv := int64(p.cfg.CheckpointInterval)
	h := fnv.New64a()
	h.Write([]byte(name))
	off := int64(h.Sum64() % uint64(iv))
	k := (now.UnixNano()-off)/iv + 1
	return time.Unix(0, k*iv+off)
}

func (p *Persister) popDue(now time.Time, n int) []dueItem {
	p.ckMu.Lock()
	defer p.ckMu.Unlock()
	var out []dueItem
	seen := map[string]bool{}
	for p.ckHeap.Len() > 0 && len(out) < n && !p.ckHeap[0].due.After(now) {
		it := heap.Pop(&p.ckHeap).(dueItem)
		// A node scheduled twice (attach, then leaving) is written once;
		// etcd refuses a Txn that puts a key twice.
		if seen[it.name] {
			continue
		}
		seen[it.name] = true
		out = append(out, it)
	}
	p.m.ckPending.Set(float64(p.ckHeap.Len()))
	return out
}

func (p *Persister) checkpointLoop(ctx context.Context) {
	lim := rate.NewLimiter(rate.Limit(p.cfg.CheckpointTxnPerSecond), 1)
	t := time.NewTicker(checkpointTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.ckWake:
		}
		// While etcd is down, due checkpoints wait in the heap; they are
		// written when the probe sees etcd again.
		for p.available.Load() {
			items := p.popDue(p.now(), p.store.MaxOps())
			if len(items) == 0 {
				break
			}
			if err := lim.Wait(ctx); err != nil {
				return
			}
			p.checkpointBatch(ctx, items)
		}
	}
}

// lease builds the stored lease of an entry.
func (p *Persister) lease(e live.Entry, now time.Time) *nodev1.Lease {
	l := &nodev1.Lease{
		Metadata: &nodev1.ObjectMeta{Name: e.Name},
		Spec: &nodev1.LeaseSpec{
			HolderIdentity:       e.Name,
			LeaseDurationSeconds: e.DurationSeconds,
			RenewTime:            nodemodel.Timestamp(e.RenewTime),
			AcquireTime:          nodemodel.Timestamp(e.AcquireTime),
		},
		Persistence: &nodev1.LeasePersistence{
			Collector:   p.cfg.CollectorID,
			PersistTime: nodemodel.Timestamp(now),
			// The live renewTime may run ahead of this copy by one interval
			// plus the checkpointer's tick while the node stays attached here.
			MaxStaleness: durationpb.New(p.cfg.CheckpointInterval + checkpointTick),
			Renewals:     e.Renewals,
			// Whole seconds, as Kubernetes serializes times: the nanos
			// would be ~5 more bytes on every checkpoint for a value
			// that is up to an interval old anyway.
			StatusHeartbeatTime: nodemodel.Timestamp(persistedStatus(e.StatusHeartbeat)),
		},
	}
	// No ownerReferences: the owner is nodes/<same name>, and the ~85 bytes
	// of a reference (with the uid) are a third of every checkpoint. At
	// 100,000 nodes that is the difference between ~90 and ~60 KB/s of etcd
	// writes against a budget of 100 (docs/architecture.md).
	return l
}

// persistedStatus is a status heartbeat as a checkpoint stores it.
func persistedStatus(hb time.Time) time.Time { return hb.Truncate(time.Second) }

func (p *Persister) checkpointBatch(ctx context.Context, items []dueItem) {
	now := p.now()
	// Sized once: grown by append, the entries were copied over and over,
	// a share of the collector's steady garbage.
	ops := make([]nodestore.Op, 0, len(items))
	written := make([]live.Entry, 0, len(items))
	for _, it := range items {
		e, ok := p.table.Get(it.name, it.gen)
		if !ok {
			continue // detached: nothing to keep fresh
		}
		if e.Persisted && !e.Dirty && persistedStatus(e.StatusHeartbeat).Equal(e.PersistedStatus) {
			// No renewal and no status report since the last checkpoint:
			// writing the same times again would tell nobody anything.
			p.schedule(it.name, it.gen, p.nextPhase(it.name, now))
			continue
		}
		ops = append(ops, nodestore.Put(nodestore.Leases, it.name, p.lease(e, now)))
		written = append(written, e)
	}
	if len(ops) == 0 {
		return
	}
	if err := p.apply(ctx, "lease", ops); err != nil {
		p.lg.Warn("lease checkpoint failed; will retry", zap.Int("leases", len(ops)), zap.Error(err))
		for _, e := range written {
			p.schedule(e.Name, e.Gen, now.Add(p.cfg.RetryInterval))
		}
		return
	}
	p.m.checkpoints.Add(float64(len(ops)))
	for _, e := range written {
		p.table.MarkPersisted(e.Name, e.Gen, e.RenewTime, persistedStatus(e.StatusHeartbeat))
		p.schedule(e.Name, e.Gen, p.nextPhase(e.Name, now))
	}
}
