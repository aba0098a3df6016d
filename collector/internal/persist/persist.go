// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package persist is the collector's write path to etcd (through
// nodestore). Three flows, each batched, because at fleet scale the number
// of etcd transactions, not their size, is what costs:
//
//   - Registrations: create nodes/<name> if absent and read the node's
//     stored status/ and health/ to answer with the served node, and its
//     lease/ for the first checkpoint. Concurrent
//     registrations (a storm after a collector restart) share one
//     multi-key read Txn and one create Txn per batch, and
//     RegisterConcurrency batches are in flight at once, so the rate scales
//     with etcd round trips in parallel rather than one batch at a time.
//     A full queue is refused with a retry delay that grows with its depth.
//   - Status: written only when it changed (the caller compares with the
//     stored copy); concurrent writes from many streams are group-committed
//     into one Txn per commit window. The caller acks only after commit.
//   - Lease checkpoints: renewals stay in memory (package live); each
//     attached node's lease is written once per checkpoint interval at a
//     per-node phase, so the load is flat whatever the attach pattern was,
//     and at attach only when its stored copy would go stale before then.
//
// Availability: a ping loop and every write result tell whether etcd
// answers; callers refuse durable work at once while it does not. One
// failed write is an outage; pings count only after PingFailures in a row,
// since a loaded etcd can miss one ping's deadline and still commit.
package persist

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/run"
)

// Errors returned to the ingest path, which maps them to gRPC codes.
var (
	// ErrUnavailable: etcd does not answer; retry later.
	ErrUnavailable = errors.New("etcd unavailable")
	// ErrBusy: the write queue is full; retry later.
	ErrBusy = errors.New("write queue full")
)

// Config of the write path.
type Config struct {
	// CollectorID is written into every lease checkpoint.
	CollectorID string
	// CommitWindow: how long the group committer waits for more writes
	// after the first one. A few ms costs each status ack that much latency
	// and turns N concurrent writes into one Txn.
	CommitWindow time.Duration
	// CheckpointInterval: each attached node's lease is written once per
	// interval at a per-node phase (and at attach when the stored copy would
	// go stale before that phase, see Attach). It is the documented
	// staleness bound of leases/ in etcd. It also sets how much history the
	// leases leave in etcd's database: the monitor keeps 5-6 minutes of
	// history (it compacts every minute to the revision of 5 minutes
	// before), which at a 10-minute interval holds about half a superseded
	// copy of every lease (a whole copy is ~16 MB of file per 100,000
	// nodes; docs/adr/0002-coarse-lease-checkpoints.md).
	CheckpointInterval time.Duration
	// CheckpointTxnPerSecond caps checkpoint Txns, so an attach storm of
	// 100,000 nodes spreads over tens of seconds instead of hitting etcd at
	// once (the feed carries liveness meanwhile).
	CheckpointTxnPerSecond float64
	// QueueSize bounds pending status writes.
	QueueSize int
	// RegisterQueueSize bounds registrations waiting for a worker, and
	// RegisterMaxWait how long the queue may take to answer the last of
	// them at the rate the workers answer now: more are refused with a
	// RetryInfo slot (RegisterRetryAfter). A queued reporter is told it is
	// queued and waits on its stream (ingest: Command.register_queued),
	// which costs less than a refusal and a second registration; the wait
	// bound keeps what a reporter is asked to wait, and a fleet's stay on
	// one busy collector, to about a minute. It applies only while another
	// collector is there to go to (SetPeers).
	RegisterQueueSize int
	RegisterMaxWait   time.Duration
	// StatusConcurrency: status batches in flight at once. One by default:
	// several committers split what one batch would carry into more etcd
	// Txns; they help only when one committer's round trips are the limit.
	StatusConcurrency int
	// RegisterConcurrency: registration batches in flight at once. Each
	// batch is one read Txn and (for new nodes) one create Txn, so the
	// registration rate is about RegisterConcurrency × batch size / (two
	// etcd round trips).
	RegisterConcurrency int
	// RegisterReadAttempt bounds one attempt of a registration batch's
	// read, and RegisterReadAttempts how many are made while the caller
	// still waits. etcd's client sends each request to the next member in
	// turn and keeps a SIGSTOPped member in that rotation until keepalive
	// gives up on it (10 + 5 s), because its TCP connections stay open; a
	// read sent there hangs until its deadline. One 5 s attempt plus the
	// reporter's retry delay outlasted a 10 s grace period in the
	// robustness suite; a bounded attempt and a retry, which lands on
	// another member, answers in about the attempt bound. Reads only:
	// they are safe to repeat.
	RegisterReadAttempt  time.Duration
	RegisterReadAttempts int
	// PingInterval of the availability probe.
	PingInterval time.Duration
	// PingFailures: consecutive failed pings before etcd is declared
	// unavailable. One slow ping under load is not an outage; a failed
	// write still declares it at once.
	PingFailures int
	// RetryInterval: a failed checkpoint is retried after this.
	RetryInterval time.Duration
}

// DefaultConfig is the production setting.
func DefaultConfig() Config {
	return Config{
		CommitWindow:           5 * time.Millisecond,
		CheckpointInterval:     10 * time.Minute,
		CheckpointTxnPerSecond: 25,
		QueueSize:              10000,
		RegisterQueueSize:      100000,
		RegisterMaxWait:        45 * time.Second,
		RegisterConcurrency:    8,
		RegisterReadAttempt:    2 * time.Second,
		RegisterReadAttempts:   3,
		StatusConcurrency:      1,
		PingInterval:           time.Second,
		PingFailures:           3,
		RetryInterval:          2 * time.Second,
	}
}

// Store is what the write path needs from nodestore.
type Store interface {
	nodestore.Reader
	nodestore.Writer
	nodestore.EachApplier
	Ping(ctx context.Context) error
}

// Persister runs the write path.
type Persister struct {
	cfg   Config
	lg    *zap.Logger
	store Store
	table *live.Table
	m     *metrics
	now   func() time.Time

	statusQ chan *statusReq
	regQ    chan *regReq

	ckMu   sync.Mutex
	ckHeap dueHeap
	ckWake chan struct{}

	available   atomic.Bool
	pingFails   atomic.Int32 // consecutive failed pings; reset by any answer
	peers       atomic.Int32 // other collectors to go to (SetPeers); -1: not known yet
	regRate     drainRate    // registrations answered per second
	slotMu      sync.Mutex
	nextSlot    time.Time    // the next refused registration's retry slot
	statusRate  drainRate    // status reports answered per second
	downSinceNs atomic.Int64 // unix nanos of the first failure of the current outage; 0 when up
	lastErr     atomic.Pointer[string]
}

// New builds a Persister; start it with Run.
func New(cfg Config, store Store, table *live.Table, lg *zap.Logger, reg prometheus.Registerer) (*Persister, error) {
	if cfg.CollectorID == "" {
		return nil, errors.New("persist: collector id is empty")
	}
	if cfg.RegisterConcurrency <= 0 {
		cfg.RegisterConcurrency = 1
	}
	if cfg.StatusConcurrency <= 0 {
		cfg.StatusConcurrency = 1
	}
	if cfg.PingFailures <= 0 {
		cfg.PingFailures = 1
	}
	if cfg.RegisterReadAttempts <= 0 {
		cfg.RegisterReadAttempts = 1
	}
	if cfg.CheckpointInterval <= 0 || cfg.CommitWindow < 0 || cfg.QueueSize <= 0 || cfg.RegisterQueueSize <= 0 || cfg.RegisterMaxWait <= 0 || cfg.CheckpointTxnPerSecond <= 0 {
		return nil, fmt.Errorf("persist: invalid config %+v", cfg)
	}
	m, err := newMetrics(reg, table)
	if err != nil {
		return nil, err
	}
	p := &Persister{
		cfg: cfg, lg: lg.Named("persist"), store: store, table: table, m: m, now: time.Now,
		statusQ: make(chan *statusReq, cfg.QueueSize),
		regQ:    make(chan *regReq, cfg.RegisterQueueSize),
		ckWake:  make(chan struct{}, 1),
	}
	p.peers.Store(-1)
	p.m.peers.Set(-1)
	// Optimistic until the first ping says otherwise, so a collector that
	// starts together with etcd does not refuse its first streams.
	p.available.Store(true)
	m.available.Set(1)
	return p, nil
}

// Run runs the committer, registration batcher, checkpointer and
// availability probe until ctx ends. Lease renewals not checkpointed by
// then are not written: they were acknowledged as not durable, and the
// collector a node moves to checkpoints it at once (Attach).
func (p *Persister) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){p.checkpointLoop, p.pingLoop, p.rateLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	// Several status committers: a stream writes its next status only after
	// the previous one committed, so one node is never in two batches and
	// concurrent batches cannot reorder a node's statuses.
	for range p.cfg.StatusConcurrency {
		wg.Add(1)
		go func() { defer wg.Done(); p.statusLoop(ctx) }()
	}
	for range p.cfg.RegisterConcurrency {
		wg.Add(1)
		go func() { defer wg.Done(); p.registerLoop(ctx) }()
	}
	wg.Wait()
	return nil
}

// Available reports whether etcd answered the latest ping or write.
func (p *Persister) Available() bool { return p.available.Load() }

// UnavailableFor is how long etcd has been failing, zero when it answers.
func (p *Persister) UnavailableFor() time.Duration {
	ns := p.downSinceNs.Load()
	if ns == 0 {
		return 0
	}
	return p.now().Sub(time.Unix(0, ns))
}

// ReadyCheck is the readiness check: nil while etcd answers.
func (p *Persister) ReadyCheck() error {
	if p.available.Load() {
		return nil
	}
	msg := "unknown error"
	if s := p.lastErr.Load(); s != nil {
		msg = *s
	}
	return fmt.Errorf("etcd unavailable for %s: %s", p.UnavailableFor().Round(time.Second), msg)
}

// observe records the outcome of an etcd call for availability. Conflicts
// are answers, so they count as success.
func (p *Persister) observe(err error) {
	if err == nil || errors.Is(err, nodestore.ErrConflict) || errors.Is(err, nodestore.ErrNotFound) {
		p.markUp()
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	if timedOut(err) {
		// A write or read that missed its deadline is not an outage: on a
		// saturated box etcd still commits, late. Declaring etcd down on
		// one late Txn refused every registration and status at once, and
		// their retries kept the box saturated (a 100,000-node ramp never
		// recovered). The pings decide: PingFailures in a row.
		p.m.timeouts.Inc()
		return
	}
	p.markDown(err)
}

func (p *Persister) markUp() {
	p.pingFails.Store(0)
	if !p.available.Swap(true) {
		p.lg.Info("etcd available again", zap.Duration("outage", p.UnavailableFor()))
	}
	p.downSinceNs.Store(0)
	p.m.available.Set(1)
}

func (p *Persister) markDown(err error) {
	s := err.Error()
	p.lastErr.Store(&s)
	if p.available.Swap(false) {
		p.downSinceNs.Store(p.now().UnixNano())
		p.lg.Warn("etcd unavailable: refusing status writes and registrations, acking leases from memory", zap.Error(err))
	}
	p.m.available.Set(0)
}

func (p *Persister) pingLoop(ctx context.Context) {
	run.Every(ctx, p.cfg.PingInterval, func() {
		// Bound the ping by the interval (at least 1s) so a hung etcd is
		// noticed within about two intervals, not after the client's
		// request timeout.
		pctx, cancel := context.WithTimeout(ctx, max(2*p.cfg.PingInterval, time.Second))
		err := p.store.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		p.observePing(err)
	})
}

// observePing records a ping result: a failure counts only once
// PingFailures pings in a row have failed, because under load a single ping
// can miss its deadline while etcd still commits every write.
func (p *Persister) observePing(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		if n := p.pingFails.Add(1); int(n) < p.cfg.PingFailures {
			p.m.pingFailures.Inc()
			p.lg.Debug("etcd ping failed", zap.Int32("consecutive", n), zap.Error(err))
			return
		}
		p.m.pingFailures.Inc()
		p.markDown(err)
		return
	}
	if err == nil {
		p.markUp()
	}
}

// timedOut reports whether err is a deadline, as a context error or as the
// gRPC status etcd's client returns.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

// apply is store.Apply with metrics and availability bookkeeping.
func (p *Persister) apply(ctx context.Context, kind string, ops []nodestore.Op) error {
	start := time.Now()
	_, err := p.store.Apply(ctx, nil, ops...)
	p.m.writeSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	p.m.batchOps.WithLabelValues(kind).Observe(float64(len(ops)))
	res := "ok"
	if err != nil {
		res = "error"
		if errors.Is(err, nodestore.ErrConflict) {
			res = "conflict"
		}
	}
	p.m.txns.WithLabelValues(kind, res).Inc()
	p.observe(err)
	return err
}

// applyEach is store.ApplyEach with the same metrics and bookkeeping.
func (p *Persister) applyEach(ctx context.Context, kind string, ops []nodestore.Op) ([]nodestore.EachResult, int64, error) {
	start := time.Now()
	res, rev, err := p.store.ApplyEach(ctx, ops)
	p.m.writeSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	p.m.batchOps.WithLabelValues(kind).Observe(float64(len(ops)))
	result := "ok"
	if err != nil {
		result = "error"
	}
	p.m.txns.WithLabelValues(kind, result).Inc()
	p.observe(err)
	return res, rev, err
}

// ---- status group commit ----

type statusReq struct {
	name   string
	status *nodev1.NodeStatus
	ifRev  int64 // the revision of status/<name> the writer last knew; 0: absent
	done   chan statusDone
}

type statusDone struct {
	res StatusResult
	err error
}

// StatusResult is the outcome of a status write that reached etcd.
type StatusResult struct {
	// Written: the status is stored at Rev. Otherwise status/<name> was no
	// longer at the caller's revision, and nothing was written: Rev and
	// Current are what etcd holds now (Current nil and Rev 0 when absent).
	Written bool
	Rev     int64
	Current *nodev1.NodeStatus
}

// ErrSuperseded: a later status of the same node in the same group commit
// took this one's place (two streams of one node, the older one ending).
var ErrSuperseded = errors.New("superseded by a later status of the node in the same commit")

// WriteStatus stores status/<name> if it is still at revision ifRev (0: the
// node has no status yet) and returns once etcd answered (see
// StatusResult), the write was refused (ErrUnavailable, ErrBusy) or ctx
// ends. The status is not copied: the caller must not modify it afterwards.
//
// The write is conditional because a stream's write can reach etcd after
// the node's next stream read the stored status: a request queued here or
// held by a frozen etcd member outlives the stream and even the process
// that sent it. Unconditional, it lands over whatever the newer stream
// stored or found stored, and etcd keeps an older status than the one the
// reporter was told is durable. Conditional, it fails, and the newer
// stream's own write fails instead when the older one got there first:
// whichever is later is told and decides again (docs/robustness.md,
// Findings).
func (p *Persister) WriteStatus(ctx context.Context, name string, st *nodev1.NodeStatus, ifRev int64) (StatusResult, error) {
	if !p.available.Load() {
		return StatusResult{}, ErrUnavailable
	}
	r := &statusReq{name: name, status: st, ifRev: ifRev, done: make(chan statusDone, 1)}
	select {
	case p.statusQ <- r:
	default:
		return StatusResult{}, ErrBusy
	}
	p.m.queued.Inc()
	select {
	case d := <-r.done:
		return d.res, d.err
	case <-ctx.Done():
		// The write may still commit; the caller did not ack it, so the
		// reporter resends and the stored copy converges.
		return StatusResult{}, ctx.Err()
	}
}

func (p *Persister) statusLoop(ctx context.Context) {
	// etcd counts each nested Txn of ApplyEach against its op limit.
	maxOps := p.store.MaxOps() - 1
	for {
		var first *statusReq
		select {
		case <-ctx.Done():
			p.failQueued(ctx.Err())
			return
		case first = <-p.statusQ:
		}
		batch := collectBatch(ctx, p.statusQ, first, maxOps, p.cfg.CommitWindow)
		p.m.queued.Sub(float64(len(batch)))
		p.commitStatuses(ctx, batch)
	}
}

func (p *Persister) commitStatuses(ctx context.Context, batch []*statusReq) {
	// One op per key: etcd refuses a Txn that puts the same key twice. Two
	// requests for one node come from two of its streams (each waits for
	// its own write before the next); the later-queued is the newer
	// stream's, and the older one is told it was superseded.
	idx := map[string]int{}
	var ops []nodestore.Op
	var reqs []*statusReq
	for _, r := range batch {
		if i, ok := idx[r.name]; ok {
			reqs[i].done <- statusDone{err: ErrSuperseded}
			reqs[i] = r
			ops[i] = statusOp(r)
			continue
		}
		idx[r.name] = len(ops)
		ops = append(ops, statusOp(r))
		reqs = append(reqs, r)
	}
	var res []nodestore.EachResult
	var rev int64
	var err error
	if !p.available.Load() {
		err = ErrUnavailable
	} else if res, rev, err = p.applyEach(ctx, "status", ops); err != nil {
		p.lg.Warn("status batch failed", zap.Int("ops", len(ops)), zap.Error(err))
		err = fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	p.statusRate.add(len(batch))
	for i, r := range reqs {
		if err != nil {
			r.done <- statusDone{err: err}
			continue
		}
		out := StatusResult{Written: res[i].Applied, Rev: rev}
		if !out.Written {
			p.m.statusConflicts.Inc()
			out.Rev = 0
			if cur := res[i].Current; cur.Found {
				out.Rev = cur.Object.ModRevision
				out.Current, _ = cur.Object.Value.(*nodev1.NodeStatus)
			}
		}
		r.done <- statusDone{res: out}
	}
}

// statusOp is r's write: conditional on the revision its writer knew.
func statusOp(r *statusReq) nodestore.Op {
	op := nodestore.Put(nodestore.Statuses, r.name, r.status)
	if r.ifRev > 0 {
		op.IfModRevision = r.ifRev
	} else {
		op.IfAbsent = true
	}
	return op
}

func (p *Persister) failQueued(err error) {
	for {
		select {
		case r := <-p.statusQ:
			p.m.queued.Dec()
			r.done <- statusDone{err: err}
		case r := <-p.regQ:
			r.done <- regResult{err: err}
		default:
			return
		}
	}
}

// ---- registration ----

// Registered is the answer to a registration.
type Registered struct {
	// Node as served: stored metadata and spec, stored status, health.
	Node *nodev1.Node
	// Status is the stored status (nil when none), and StatusRev its
	// revision (0 when none): the revision the stream's first status write
	// is conditional on.
	Status    *nodev1.NodeStatus
	StatusRev int64
	// Created says the node was created by this registration.
	Created bool
	// LeaseFresh is when the stored lease stops keeping its own promise
	// (its persistTime plus the maxStaleness it declares); zero when there
	// is no stored lease or it declares no bound. Attach uses it.
	LeaseFresh time.Time
}

type regReq struct {
	node *nodev1.Node
	done chan regResult
}

type regResult struct {
	reg Registered
	err error
}

// Register creates nodes/<name> if absent (node is the object to create:
// metadata with name, uid, labels and creation time, and spec) and reads the
// node's stored status and health. It waits for the batch it joins.
func (p *Persister) Register(ctx context.Context, node *nodev1.Node) (Registered, error) {
	if !p.available.Load() {
		return Registered{}, ErrUnavailable
	}
	r := &regReq{node: node, done: make(chan regResult, 1)}
	select {
	case p.regQ <- r:
	default:
		return Registered{}, ErrBusy
	}
	p.m.regQueued.Set(float64(len(p.regQ)))
	select {
	case res := <-r.done:
		return res.reg, res.err
	case <-ctx.Done():
		return Registered{}, ctx.Err()
	}
}

// RegisterQueueFull reports whether a registration now would be refused
// with ErrBusy: the queue is full, or would take longer than
// RegisterMaxWait to answer it while another collector could take the
// node. Checked before a stream's Register is even decoded: under a
// registration storm, refusing must cost less than registering.
//
// With no other collector, a reporter refused for the wait comes back here
// after its retry slot, later than waiting would have served it: a
// restarted collector alone, its rate still measured over its slowest
// first seconds, refused 16,000–38,000 streams of a 90,000-node fleet and
// then idled for ~10 s while they waited out their slots, so the restart
// took 50–59 s instead of ~30 (docs/adr/0011-registration-queue-and-refusals.md).
func (p *Persister) RegisterQueueFull() bool {
	if len(p.regQ) >= cap(p.regQ) {
		return true
	}
	return p.peers.Load() != 0 && p.RegisterWait() > p.cfg.RegisterMaxWait
}

// SetPeers records how many other collectors, not draining, discovery
// lists now; until the first call the collector assumes there may be some.
func (p *Persister) SetPeers(n int) {
	p.peers.Store(int32(n))
	p.m.peers.Set(float64(n))
}

// RegisterWait is how long a registration queued now would wait for its
// answer: the queue's depth at the rate the workers answered over the last
// seconds (at least the rate assumed before the first measurement, see
// RegisterRetryAfter).
func (p *Persister) RegisterWait() time.Duration {
	return time.Duration(float64(len(p.regQ)) / p.registerRate() * float64(time.Second))
}

// registerRate is the registrations answered per second, at least 100 per
// worker (RegisterRetryAfter says why).
func (p *Persister) registerRate() float64 {
	return max(p.regRate.perSecond(), 100*float64(p.cfg.RegisterConcurrency))
}

// RegisterBacklog reports whether registrations are backlogged: the queue
// needs a second or more (a fleet reconnecting at once; a fleet joining at
// a rate the workers keep up with leaves it nearly empty).
func (p *Persister) RegisterBacklog() bool { return p.RegisterWait() >= time.Second }

// RegisterRetryAfter is how long a refused registration should wait. Each
// refused reporter is given its own slot: the first after the time the
// workers need to drain the queue as it is now, each next one a
// registration's worth of time (at the rate they answered registrations
// over the last seconds) later. A fleet refused at once comes back spread
// at the rate the collector registers, so the queue stays fed and few are
// refused twice. (One delay for all — the queue's drain time, ~3 s — sent
// 90,000 reporters back within seconds of each other, again and again: the
// new collector of a restart refused 6,000–8,000 streams a second, CPU the
// registrations needed.) Slots end at maxRetryAfter: a reporter must be
// heard within the grace period, so beyond that, refusals share the last
// slot and its jitter.
func (p *Persister) RegisterRetryAfter() time.Duration {
	// Before the first measurement (a collector that just started, facing a
	// fleet coming back at once) assume 100 registrations per worker per
	// second — a batch of up to MaxOps/3 nodes per two etcd round trips
	// easily does that. Assuming 10 (as before) sent the fleet refused in
	// the first second away for the 30 s cap: the last nodes of a 30,000-node
	// restart came back 46 s after the new collector started.
	rate := p.registerRate()
	now := p.now()
	drained := now.Add(p.RegisterWait())
	p.slotMu.Lock()
	slot := p.nextSlot
	if slot.Before(drained) {
		slot = drained
	}
	if last := now.Add(maxRetryAfter); slot.After(last) {
		slot = last
	}
	p.nextSlot = slot.Add(time.Duration(float64(time.Second) / rate))
	p.slotMu.Unlock()
	return min(max(slot.Sub(now), time.Second), maxRetryAfter)
}

// StatusRetryAfter is how long a refused status report should wait, on the
// same reasoning as RegisterRetryAfter: the time the status committer needs
// for what is queued. A fixed delay sends every status refused in one busy
// second back in one later second, which may be just as busy.
func (p *Persister) StatusRetryAfter() time.Duration {
	// One committer, a batch of MaxOps per round trip: 1,000/s is a floor
	// it meets even on a loaded etcd.
	return retryAfter(len(p.statusQ), p.statusRate.perSecond(), 1000)
}

func retryAfter(depth int, rate, floorRate float64) time.Duration {
	d := time.Duration(float64(depth) / max(rate, floorRate) * float64(time.Second))
	return min(max(d, time.Second), maxRetryAfter)
}

// maxRetryAfter caps the retry delays: the reporter adds up to half again
// as jitter, so a refused reporter comes back within 30 s. Each refusal
// tells the monitors the node is alive and how long it may stay away (a
// WAITING feed event with retry_within), and they judge it from the end of
// that wait: a reporter kept waiting for registration capacity is not
// marked Unknown for it. The cap bounds how long a node that dies while
// refused goes unnoticed (30 s on top of the grace period).
const maxRetryAfter = 20 * time.Second

// drainRate measures requests answered per second: the larger of the last
// second and an exponentially weighted average, so the estimate catches up
// within a second when the workers speed up (an underestimate sends refused
// nodes away for too long) and does not drop to zero on one slow second.
type drainRate struct {
	done atomic.Int64 // answered since the last tick
	bits atomic.Uint64
	avg  float64 // owned by the rate loop
}

func (r *drainRate) add(n int) { r.done.Add(int64(n)) }

func (r *drainRate) perSecond() float64 { return math.Float64frombits(r.bits.Load()) }

// tick closes one second; queued is the queue's depth now.
func (r *drainRate) tick(queued int) {
	done := float64(r.done.Swap(0))
	if done > 0 || queued == 0 {
		r.avg = 0.5*r.avg + 0.5*done
	}
	r.bits.Store(math.Float64bits(max(r.avg, done)))
}

// rateLoop ticks the drain rates once a second.
func (p *Persister) rateLoop(ctx context.Context) {
	run.Every(ctx, time.Second, func() {
		p.regRate.tick(len(p.regQ))
		p.statusRate.tick(len(p.statusQ))
		p.m.regQueued.Set(float64(len(p.regQ)))
	})
}

// registerLoop is one registration worker; RegisterConcurrency of them take
// batches from the same queue, so that many batches are in flight at once.
// A batch takes what is queued (up to what fits one read Txn: regReads
// per node) and waits up to the commit window for more only while it is
// not full, so a deep queue yields full batches at once.
func (p *Persister) registerLoop(ctx context.Context) {
	// A batch's reads must fit one Txn (and the creates, one per node,
	// then fit too).
	per := max(1, p.store.MaxOps()/regReads)
	for {
		var first *regReq
		select {
		case <-ctx.Done():
			p.failQueued(ctx.Err())
			return
		case first = <-p.regQ:
		}
		p.yieldToStatuses(ctx)
		batch := collectBatch(ctx, p.regQ, first, per, p.cfg.CommitWindow)
		p.m.regInFlight.Inc()
		p.registerBatch(ctx, batch)
		p.m.regInFlight.Dec()
		p.regRate.add(len(batch))
	}
}

// yieldToStatuses holds a registration batch back while the status queue is
// more than half full. A registered node's first status is what makes it
// Ready; new registrations would add statuses faster than they commit and
// get the queued ones refused. Held back, registrations queue instead, and
// a full registration queue refuses newcomers with RegisterRetryAfter,
// which waits for the nodes it cannot serve yet rather than failing the
// ones it already has. Bounded, so registrations never stall for good.
func (p *Persister) yieldToStatuses(ctx context.Context) {
	for range 100 {
		if len(p.statusQ) <= cap(p.statusQ)/2 {
			return
		}
		p.m.regYields.Inc()
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.CommitWindow + 5*time.Millisecond):
		}
	}
}

func (p *Persister) registerBatch(ctx context.Context, batch []*regReq) {
	// Unique names, first request wins the create; duplicates (a reporter
	// reconnecting while its old registration is still in flight) share the
	// answer.
	var names []string
	want := map[string]*nodev1.Node{}
	for _, r := range batch {
		n := r.node.GetMetadata().GetName()
		if _, ok := want[n]; !ok {
			want[n] = r.node
			names = append(names, n)
		}
	}
	results, err := p.registerNames(ctx, names, want)
	handed := make(map[string]bool, len(names))
	for _, r := range batch {
		if err != nil {
			r.done <- regResult{err: err}
			continue
		}
		name := r.node.GetMetadata().GetName()
		res := results[name]
		// Callers keep and modify what they get: the first request for a
		// name takes the objects registerNames built for this batch, each
		// duplicate its own copy. (Copying every answer cost 4 % of the
		// collector's CPU in a registration storm.)
		if handed[name] {
			res = Registered{Node: proto.CloneOf(res.Node), Status: proto.CloneOf(res.Status), StatusRev: res.StatusRev, Created: res.Created, LeaseFresh: res.LeaseFresh}
		}
		handed[name] = true
		r.done <- regResult{reg: res}
	}
}

// regReads is what registration reads per node: its node, status, health
// and lease.
const regReads = 4

func (p *Persister) registerNames(ctx context.Context, names []string, want map[string]*nodev1.Node) (map[string]Registered, error) {
	const per = regReads // in this order:
	refs := make([]nodestore.Ref, 0, per*len(names))
	for _, n := range names {
		refs = append(refs, nodestore.Ref{Kind: nodestore.Nodes, Name: n}, nodestore.Ref{Kind: nodestore.Statuses, Name: n},
			nodestore.Ref{Kind: nodestore.Health, Name: n}, nodestore.Ref{Kind: nodestore.Leases, Name: n})
	}
	got, err := p.registerRead(ctx, refs)
	p.observe(err)
	if err != nil {
		return nil, fmt.Errorf("%w: read nodes: %v", ErrUnavailable, err)
	}
	out := map[string]Registered{}
	healths := map[string]*nodev1.NodeHealth{}
	var create []string
	for i, n := range names {
		nodeRes, stRes, hRes, lRes := got[per*i], got[per*i+1], got[per*i+2], got[per*i+3]
		var st *nodev1.NodeStatus
		var stRev int64
		var h *nodev1.NodeHealth
		var fresh time.Time
		if lRes.Found {
			fresh = leaseFresh(lRes.Object.Value.(*nodev1.Lease))
		}
		if stRes.Found {
			st, stRev = stRes.Object.Value.(*nodev1.NodeStatus), stRes.Object.ModRevision
		}
		if hRes.Found {
			h = hRes.Object.Value.(*nodev1.NodeHealth)
			healths[n] = h
		}
		if !nodeRes.Found {
			create = append(create, n)
			out[n] = Registered{Status: st, StatusRev: stRev, Node: nodemodel.Merge(want[n], st, h), Created: true, LeaseFresh: fresh}
			continue
		}
		meta := nodeRes.Object.Value.(*nodev1.Node)
		served := nodemodel.Merge(meta, st, h)
		served.Metadata.ResourceVersion = fmt.Sprint(nodeRes.Object.ModRevision)
		out[n] = Registered{Status: st, StatusRev: stRev, Node: served, LeaseFresh: fresh}
	}
	if len(create) == 0 {
		return out, nil
	}
	ops := make([]nodestore.Op, len(create))
	for i, n := range create {
		ops[i] = nodestore.Op{Kind: nodestore.Nodes, Name: n, Value: want[n], IfAbsent: true}
	}
	err = p.apply(ctx, "node", ops)
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, nodestore.ErrConflict) {
		return nil, fmt.Errorf("%w: create nodes: %v", ErrUnavailable, err)
	}
	// Someone created one of them between our read and our create (another
	// collector, an operator). Retry one by one: each either creates or
	// reads what the other writer stored.
	for _, n := range create {
		err := p.apply(ctx, "node", []nodestore.Op{{Kind: nodestore.Nodes, Name: n, Value: want[n], IfAbsent: true}})
		if err == nil {
			continue
		}
		if !errors.Is(err, nodestore.ErrConflict) {
			return nil, fmt.Errorf("%w: create node %s: %v", ErrUnavailable, n, err)
		}
		o, gerr := p.store.Get(ctx, nodestore.Nodes, n)
		p.observe(gerr)
		if gerr != nil {
			return nil, fmt.Errorf("%w: read node %s: %v", ErrUnavailable, n, gerr)
		}
		r := out[n]
		r.Node = nodemodel.Merge(o.Value.(*nodev1.Node), r.Status, healths[n])
		r.Node.Metadata.ResourceVersion = fmt.Sprint(o.ModRevision)
		r.Created = false
		out[n] = r
	}
	return out, nil
}

// registerRead reads a registration batch's refs, each attempt bounded by
// RegisterReadAttempt (when set), trying again after an attempt that timed
// out while the caller still waits (see Config.RegisterReadAttempt).
func (p *Persister) registerRead(ctx context.Context, refs []nodestore.Ref) ([]nodestore.GetResult, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if p.cfg.RegisterReadAttempt > 0 {
			actx, cancel = context.WithTimeout(ctx, p.cfg.RegisterReadAttempt)
		}
		start := time.Now()
		got, err := nodestore.GetMany(actx, p.store, p.store.MaxOps(), refs)
		cancel()
		p.m.writeSeconds.WithLabelValues("register-read").Observe(time.Since(start).Seconds())
		if err == nil || !timedOut(err) || ctx.Err() != nil || attempt >= p.cfg.RegisterReadAttempts {
			return got, err
		}
		p.m.timeouts.Inc()
		p.m.regRetries.Inc()
	}
}

// collectBatch is the group commit shared by the status and registration
// writers: starting from first, it takes what else arrives on q within
// window, up to limit items. The window opens at the first item, so an idle
// collector adds no latency beyond it.
func collectBatch[T any](ctx context.Context, q <-chan T, first T, limit int, window time.Duration) []T {
	batch := []T{first}
	timer := time.NewTimer(window)
	defer timer.Stop()
	for len(batch) < limit {
		select {
		case r := <-q:
			batch = append(batch, r)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}
