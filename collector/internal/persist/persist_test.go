// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package persist

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// gateStore holds every registration read (GetMany) until the gate opens,
// and records how many were waiting at once: a stand-in for etcd round
// trips that take a while.
type gateStore struct {
	*memstore.Store
	maxOps   int
	gate     chan struct{}
	inFlight atomic.Int32
	peak     atomic.Int32
}

func (g *gateStore) MaxOps() int { return g.maxOps }

func (g *gateStore) GetMany(ctx context.Context, refs []nodestore.Ref) ([]nodestore.GetResult, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nodestore.GetMany(ctx, g.Store, 0, refs) // memstore has no multi-get: one Get per ref
}

func newGated(t *testing.T, concurrency int) (*Persister, *gateStore, context.Context) {
	t.Helper()
	// Three ops per Txn: one node per registration batch, so every
	// registration is its own batch and concurrency is visible directly.
	return newGatedOps(t, concurrency, 3, 0)
}

// newGatedOps: maxOps per Txn, and the commit window a batch waits for more.
func newGatedOps(t *testing.T, concurrency, maxOps int, window time.Duration) (*Persister, *gateStore, context.Context) {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	g := &gateStore{Store: mem, maxOps: maxOps, gate: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.CollectorID = "c-test"
	cfg.CommitWindow = window
	cfg.RegisterConcurrency = concurrency
	cfg.PingInterval = time.Hour
	p, err := New(cfg, g, live.New(1<<10), zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = mem.Close() })
	return p, g, ctx
}

func testNode(name, uid string) *nodev1.Node {
	return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: uid}, Spec: &nodev1.NodeSpec{}}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRegistrationBatchesRunConcurrently(t *testing.T) {
	const workers, regs = 8, 20
	p, g, ctx := newGated(t, workers)
	var wg sync.WaitGroup
	res := make([]Registered, regs)
	errs := make([]error, regs)
	for i := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = p.Register(ctx, testNode(fmt.Sprintf("node-%02d", i), fmt.Sprintf("uid-%02d", i)))
		}()
	}
	// With every read held, exactly `workers` batches are in flight.
	waitUntil(t, "8 registration batches in flight", func() bool { return g.inFlight.Load() == workers })
	time.Sleep(20 * time.Millisecond)
	if n := g.peak.Load(); n != workers {
		t.Fatalf("peak batches in flight = %d, want %d", n, workers)
	}
	close(g.gate)
	wg.Wait()
	for i := range regs {
		if errs[i] != nil {
			t.Fatalf("registration %d: %v", i, errs[i])
		}
		if !res[i].Created || res[i].Node.GetMetadata().GetUid() != fmt.Sprintf("uid-%02d", i) {
			t.Fatalf("registration %d: %+v", i, res[i])
		}
		o, err := g.Store.Get(ctx, nodestore.Nodes, fmt.Sprintf("node-%02d", i))
		if err != nil || o.Value.(*nodev1.Node).GetMetadata().GetUid() != fmt.Sprintf("uid-%02d", i) {
			t.Fatalf("node-%02d in store: %v %v", i, o.Value, err)
		}
	}
}

// registerPair starts Registers of a and b at once; finish waits for both
// answers.
func registerPair(ctx context.Context, p *Persister, a, b *nodev1.Node) (finish func() ([2]Registered, [2]error)) {
	var wg sync.WaitGroup
	var res [2]Registered
	var errs [2]error
	for i, n := range [2]*nodev1.Node{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = p.Register(ctx, n)
		}()
	}
	return func() ([2]Registered, [2]error) {
		wg.Wait()
		return res, errs
	}
}

// Two batches in flight at once for the same new node both read "absent";
// the IfAbsent create lets exactly one win, the other falls back to reading
// what the winner stored, so both streams are answered with the same node.
func TestConcurrentBatchesSameNameAgree(t *testing.T) {
	p, g, ctx := newGated(t, 4)
	finish := registerPair(ctx, p, testNode("node-dup", "uid-0"), testNode("node-dup", "uid-1"))
	waitUntil(t, "both batches in flight", func() bool { return g.inFlight.Load() == 2 })
	close(g.gate)
	res, errs := finish()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if res[0].Created == res[1].Created {
		t.Fatalf("created = %v, %v: want exactly one", res[0].Created, res[1].Created)
	}
	if u0, u1 := res[0].Node.GetMetadata().GetUid(), res[1].Node.GetMetadata().GetUid(); u0 != u1 {
		t.Fatalf("uids differ: %s vs %s", u0, u1)
	}
}

// Two requests for one name in the same batch (a reporter reconnecting
// while its registration is in flight) share the answer, each in its own
// objects: streams keep and modify what they get.
func TestDuplicatesInOneBatchGetTheirOwnCopies(t *testing.T) {
	// A window, so the batch also takes the second queued request (with
	// none, its timer may fire before it).
	p, g, ctx := newGatedOps(t, 1, 30, 200*time.Millisecond)
	blocked := make(chan error, 1)
	go func() { _, err := p.Register(ctx, testNode("node-first", "uid-first")); blocked <- err }()
	// The only worker holds node-first's batch at the gate while both
	// requests for node-dup queue behind it, so they make one batch.
	waitUntil(t, "the first batch at the gate", func() bool { return g.inFlight.Load() == 1 })
	finish := registerPair(ctx, p, testNode("node-dup", "uid-dup"), testNode("node-dup", "uid-dup"))
	waitUntil(t, "both requests queued", func() bool { return len(p.regQ) == 2 })
	close(g.gate)
	res, errs := finish()
	if err := <-blocked; err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatal(err, errs)
	}
	if !res[0].Created || !res[1].Created || res[0].Node.GetMetadata().GetUid() != "uid-dup" || res[1].Node.GetMetadata().GetUid() != "uid-dup" {
		t.Fatalf("answers %+v, %+v: want both created as uid-dup", res[0], res[1])
	}
	if res[0].Node == res[1].Node || res[0].Node.GetMetadata() == res[1].Node.GetMetadata() {
		t.Fatal("the two streams share one Node")
	}
	res[0].Node.Metadata.Labels = map[string]string{"changed": "by stream 0"}
	if len(res[1].Node.GetMetadata().GetLabels()) != 0 {
		t.Fatal("a change to one stream's answer shows in the other's")
	}
}

func TestRegisterRetryAfterGrowsWithQueue(t *testing.T) {
	p, g, ctx := newGated(t, 1)
	defer close(g.gate)
	short := p.RegisterRetryAfter()
	for i := range 200 {
		go func() { _, _ = p.Register(ctx, testNode(fmt.Sprintf("node-%03d", i), "u")) }()
	}
	waitUntil(t, "queue filled", func() bool { return len(p.regQ) >= 199 })
	if long := p.RegisterRetryAfter(); long <= short {
		t.Fatalf("retry after %s with a deep queue, %s with an empty one: want it to grow", long, short)
	}
}

func TestOneSlowPingDoesNotFlipAvailability(t *testing.T) {
	p, cfg := newIdle(t, nil)
	slow := fmt.Errorf("ping: %w", context.DeadlineExceeded)
	for round := range 3 {
		// Up to PingFailures-1 failed pings in a row, then an answer: never
		// unavailable.
		for range cfg.PingFailures - 1 {
			p.observePing(slow)
			if !p.Available() {
				t.Fatalf("round %d: unavailable after fewer than %d failed pings", round, cfg.PingFailures)
			}
		}
		p.observePing(nil)
	}
	// A successful write also resets the count.
	p.observePing(slow)
	p.observePing(slow)
	p.observe(nil)
	p.observePing(slow)
	if !p.Available() {
		t.Fatal("a write answered in between: the earlier failed pings must not count")
	}
	p.observePing(slow)
	p.observePing(slow)
	if p.Available() {
		t.Fatalf("still available after %d consecutive failed pings", cfg.PingFailures)
	}
	p.observePing(nil)
	if !p.Available() {
		t.Fatal("not available again after a ping answered")
	}
	// A failed write is an outage at once.
	p.observe(errors.New("etcdserver: request timed out"))
	if p.Available() {
		t.Fatal("a failed write must declare etcd unavailable at once")
	}
}

func TestWriteDeadlineIsNotAnOutage(t *testing.T) {
	p, cfg := newIdle(t, nil)
	// Late answers of a saturated etcd, as the client reports them.
	for _, late := range []error{
		fmt.Errorf("txn of 128 ops: %w", context.DeadlineExceeded),
		status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
	} {
		p.observe(late)
		if !p.Available() {
			t.Fatalf("a write that missed its deadline (%v) declared etcd unavailable", late)
		}
	}
	// The pings still decide.
	for range cfg.PingFailures {
		p.observePing(fmt.Errorf("ping: %w", context.DeadlineExceeded))
	}
	if p.Available() {
		t.Fatalf("still available after %d consecutive failed pings", cfg.PingFailures)
	}
}

func TestStatusRetryAfterGrowsWithQueue(t *testing.T) {
	p, _ := newIdle(t, nil) // not running: nothing drains
	if d := p.StatusRetryAfter(); d != time.Second {
		t.Fatalf("empty queue: retry after %s, want the 1s floor", d)
	}
	for range 5000 {
		p.statusQ <- &statusReq{name: "n"}
	}
	// 5,000 queued at the assumed 1,000/s before any measurement.
	if d := p.StatusRetryAfter(); d != 5*time.Second {
		t.Fatalf("5,000 queued: retry after %s, want 5s", d)
	}
	// A measured faster drain shortens it.
	p.statusRate.add(2500)
	p.statusRate.tick(len(p.statusQ))
	if d := p.StatusRetryAfter(); d != 2*time.Second {
		t.Fatalf("5,000 queued at 2,500/s: retry after %s, want 2s", d)
	}
}

func TestRegistrationsYieldToQueuedStatuses(t *testing.T) {
	p, _ := newIdle(t, func(c *Config) { c.QueueSize = 10 })
	for range 6 { // more than half of 10
		p.statusQ <- &statusReq{name: "n"}
	}
	done := make(chan struct{})
	go func() { defer close(done); p.yieldToStatuses(context.Background()) }()
	// It has waited once (the counter says so) and is still waiting.
	waitUntil(t, "a registration batch yielding", func() bool { return testutil.ToFloat64(p.m.regYields) >= 1 })
	select {
	case <-done:
		t.Fatal("a registration batch went ahead of a status queue more than half full")
	default:
	}
	for range 2 {
		<-p.statusQ
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("registrations still held back with the status queue at half")
	}
}

// newIdle builds a Persister over a memstore without running it: tests
// drive its queues and ticks themselves.
func newIdle(t *testing.T, mutate func(*Config)) (*Persister, Config) {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = mem.Close() })
	cfg := DefaultConfig()
	cfg.CollectorID = "c-test"
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg, mem, live.New(1<<10), zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg
}

// Refused registrations get one slot each, a registration's worth of time
// apart at the assumed rate (100/s for one worker before any measurement),
// from the queue's drain time up to maxRetryAfter; beyond it they share
// the last slot, and the slots left are not pushed further out.
func TestRefusedRegistrationsAreSpreadOverSlots(t *testing.T) {
	p, _ := newIdle(t, func(c *Config) { c.RegisterConcurrency = 1 })
	now := time.Unix(1_000_000, 0)
	p.now = func() time.Time { return now }
	var got []time.Duration
	for range 2500 {
		got = append(got, p.RegisterRetryAfter())
	}
	for i, want := range map[int]time.Duration{0: time.Second, 100: time.Second, 150: 1500 * time.Millisecond,
		1000: 10 * time.Second, 1999: 19990 * time.Millisecond, 2000: maxRetryAfter, 2499: maxRetryAfter} {
		if d := got[i] - want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("refusal %d: retry after %s, want %s", i, got[i], want)
		}
	}
	now = now.Add(10 * time.Second)
	if d, want := p.RegisterRetryAfter(), 10*time.Second+10*time.Millisecond; d-want < -time.Microsecond || d-want > time.Microsecond {
		t.Errorf("10 s later: retry after %s, want %s (the slot after the last one handed out)", d, want)
	}
}

// A queue that would take longer than RegisterMaxWait refuses only while
// another collector could take the node: alone, the reporter would come
// back here. A full queue refuses either way.
func TestWaitRefusalNeedsAPeer(t *testing.T) {
	p, cfg := newIdle(t, func(c *Config) {
		c.RegisterConcurrency, c.RegisterQueueSize, c.RegisterMaxWait = 1, 200, time.Second
	})
	// Nobody works the queue (Run is not started): 150 queued at the
	// assumed 100/s is 1.5 s of wait, over the 1 s bound.
	for range 150 {
		p.regQ <- &regReq{}
	}
	for _, c := range []struct {
		peers int
		full  bool
	}{{-1, true}, {1, true}, {0, false}, {2, true}} {
		if c.peers >= 0 {
			p.SetPeers(c.peers)
		}
		if got := p.RegisterQueueFull(); got != c.full {
			t.Errorf("peers %d, wait %s over %s: refuse %v, want %v", c.peers, p.RegisterWait(), cfg.RegisterMaxWait, got, c.full)
		}
	}
	p.SetPeers(0)
	for len(p.regQ) < cap(p.regQ) {
		p.regQ <- &regReq{}
	}
	if !p.RegisterQueueFull() {
		t.Error("a full queue does not refuse when alone")
	}
}

// stallFirst hangs the first registration read until its context ends, as
// a linearizable read sent to a SIGSTOPped etcd member does; later reads
// answer.
type stallFirst struct {
	*memstore.Store
	reads atomic.Int32
}

func (s *stallFirst) MaxOps() int { return 128 }

func (s *stallFirst) GetMany(ctx context.Context, refs []nodestore.Ref) ([]nodestore.GetResult, error) {
	if s.reads.Add(1) == 1 {
		<-ctx.Done()
		return nil, fmt.Errorf("get %d objects: %w", len(refs), ctx.Err())
	}
	return nodestore.GetMany(ctx, s.Store, 0, refs)
}

// A registration read that hangs is tried again after its attempt bound,
// and the registration answered, instead of being refused when the
// caller's whole wait has gone into one attempt.
func TestRegistrationReadRetriedAfterAttemptTimeout(t *testing.T) {
	mem := memstore.New(memstore.Config{})
	st := &stallFirst{Store: mem}
	cfg := DefaultConfig()
	cfg.CollectorID = "c-test"
	cfg.PingInterval = time.Hour
	cfg.RegisterReadAttempt = 50 * time.Millisecond
	p, err := New(cfg, st, live.New(1<<10), zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = mem.Close() })

	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	res, err := p.Register(rctx, testNode("node-a", "uid-a"))
	if err != nil {
		t.Fatalf("registration after one stalled read attempt: %v", err)
	}
	if !res.Created || st.reads.Load() != 2 {
		t.Fatalf("created %v after %d reads, want created after 2", res.Created, st.reads.Load())
	}
	if !p.Available() {
		t.Fatal("a timed-out read attempt declared etcd unavailable")
	}
}

// Status writes are conditional on the revision the writer knew: a stale
// one writes nothing and says what is stored; two of one node in one group
// commit keep the later and tell the earlier it was superseded.
func TestStatusWritesAreConditional(t *testing.T) {
	p, g, ctx := newGatedOps(t, 1, 128, 0) // the gate holds registration reads only
	mem := g.Store

	ready := func(s string) *nodev1.NodeStatus {
		return &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: s}}}
	}
	first, err := p.WriteStatus(ctx, "n", ready("True"), 0)
	if err != nil || !first.Written || first.Rev == 0 {
		t.Fatalf("first write: %+v, %v", first, err)
	}
	// A writer that still believes the node has no status writes nothing.
	stale, err := p.WriteStatus(ctx, "n", ready("False"), 0)
	if err != nil || stale.Written || stale.Rev != first.Rev || stale.Current.GetConditions()[0].GetStatus() != "True" {
		t.Fatalf("stale write: %+v, %v; want not written, the stored status at %d", stale, err, first.Rev)
	}
	// Two writers of one node in one batch: the later one wins.
	earlier := &statusReq{name: "n", status: ready("Unknown"), ifRev: first.Rev, done: make(chan statusDone, 1)}
	later := &statusReq{name: "n", status: ready("False"), ifRev: first.Rev, done: make(chan statusDone, 1)}
	p.commitStatuses(ctx, []*statusReq{earlier, later})
	if d := <-earlier.done; !errors.Is(d.err, ErrSuperseded) {
		t.Fatalf("earlier write of the same batch: %+v, want ErrSuperseded", d)
	}
	d := <-later.done
	if d.err != nil || !d.res.Written {
		t.Fatalf("later write: %+v", d)
	}
	o, err := mem.Get(ctx, nodestore.Statuses, "n")
	if err != nil || o.Value.(*nodev1.NodeStatus).GetConditions()[0].GetStatus() != "False" || o.ModRevision != d.res.Rev {
		t.Fatalf("stored %v at %d, %v; want Ready=False at %d", o.Value, o.ModRevision, err, d.res.Rev)
	}
}
