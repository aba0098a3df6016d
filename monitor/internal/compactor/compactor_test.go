package compactor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
)

// fakeStore hands out scripted revisions and records compactions.
type fakeStore struct {
	mu        sync.Mutex
	rev       int64
	revErr    error
	compactFn func(rev int64) error
	compacted []int64
	calls     chan int64 // every Compact's rev, if not nil
}

func (s *fakeStore) Revision(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev, s.revErr
}

func (s *fakeStore) set(rev int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev, s.revErr = rev, err
}

func (s *fakeStore) Compact(_ context.Context, rev int64) error {
	s.mu.Lock()
	fn := s.compactFn
	s.mu.Unlock()
	var err error
	if fn != nil {
		err = fn(rev)
	}
	s.mu.Lock()
	if err == nil {
		s.compacted = append(s.compacted, rev)
	}
	s.mu.Unlock()
	if s.calls != nil {
		s.calls <- rev
	}
	return err
}

func (s *fakeStore) done() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.compacted...)
}

// fakeLeader switches leadership on and off.
type fakeLeader struct {
	mu      sync.Mutex
	leading bool
	done    chan struct{}
	changed chan struct{}
}

func newLeader() *fakeLeader { return &fakeLeader{changed: make(chan struct{})} }

func (l *fakeLeader) Leadership() (nodestore.Fence, <-chan struct{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return nodestore.Fence{}, nil, false
	}
	return nodestore.Fence{Key: "k", Revision: 1}, l.done, true
}

func (l *fakeLeader) LeaderChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *fakeLeader) set(leading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if leading == l.leading {
		return
	}
	l.leading = leading
	if leading {
		l.done = make(chan struct{})
	} else {
		close(l.done)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// fakeClock: every After registers a waiter the test fires with tick.
type fakeClock struct {
	waits chan waiter
}

type waiter struct {
	d  time.Duration
	ch chan time.Time
}

func newClock() *fakeClock { return &fakeClock{waits: make(chan waiter, 16)} }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- waiter{d, ch}
	return ch
}

// waiting waits until the compactor waits for the interval, without ending
// the wait: everything of the round before it has happened.
func (c *fakeClock) waiting(t *testing.T) waiter {
	t.Helper()
	select {
	case w := <-c.waits:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("compactor never waited for the interval")
	}
	return waiter{}
}

type harness struct {
	t      *testing.T
	store  *fakeStore
	leader *fakeLeader
	clock  *fakeClock
	c      *Compactor
	reg    *prometheus.Registry
	stop   func()
	// followed counts Config.Compacted calls (what the defragmenter hears).
	followed atomic.Int32
}

func start(t *testing.T, interval time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, store: &fakeStore{rev: 100}, leader: newLeader(), clock: newClock(), reg: prometheus.NewRegistry()}
	var err error
	h.c, err = New(Config{Interval: interval, After: h.clock.After, Compacted: func() { h.followed.Add(1) }}, h.store, h.leader, zap.NewNop(), h.reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	h.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) count(result string) float64 {
	return testutil.ToFloat64(h.c.rounds.WithLabelValues(result))
}

func TestCompactsToTheRevisionOfOneIntervalAgo(t *testing.T) {
	const iv = 5 * time.Minute
	h := start(t, iv)
	h.leader.set(true)
	// Start of leadership: observe 100, compact nothing yet.
	w := h.clock.waiting(t)
	if got := h.store.done(); len(got) != 0 {
		t.Fatalf("compacted %v at the start of leadership, want nothing until one interval has passed", got)
	}
	// One interval later etcd is at 250: compact to 100, remember 250.
	h.store.set(250, nil)
	w.ch <- time.Time{}
	w = h.clock.waiting(t)
	// Another interval: at 400, compact to 250.
	h.store.set(400, nil)
	w.ch <- time.Time{}
	h.clock.waiting(t)
	if got := h.store.done(); fmt.Sprint(got) != "[100 250]" {
		t.Fatalf("compacted to %v, want [100 250]", got)
	}
	if n := h.count(ResultCompacted); n != 2 {
		t.Fatalf("%s{result=compacted} = %v, want 2", MetricCompactions, n)
	}
	if r := testutil.ToFloat64(h.c.revision); r != 250 {
		t.Fatalf("%s = %v, want 250", MetricCompactedRevision, r)
	}
}

func TestOnlyTheLeaderCompacts(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	// Not leading: no waiter appears, nothing is compacted.
	select {
	case w := <-h.clock.waits:
		t.Fatalf("a follower waits %s for a compaction round", w.d)
	case <-time.After(100 * time.Millisecond):
	}
	h.leader.set(true)
	h.store.set(200, nil)
	w := h.clock.waiting(t) // observed 200
	// Leadership ends mid-interval: the round is abandoned, no compaction.
	h.leader.set(false)
	h.store.set(300, nil)
	select {
	case w.ch <- time.Time{}:
	default:
	}
	time.Sleep(50 * time.Millisecond)
	if got := h.store.done(); len(got) != 0 {
		t.Fatalf("compacted %v after leadership ended", got)
	}
	// A new leadership starts over: observe first, compact one interval on,
	// never to a revision remembered from the previous leadership.
	h.store.set(500, nil)
	h.leader.set(true)
	w = h.clock.waiting(t)
	h.store.set(600, nil)
	w.ch <- time.Time{}
	h.clock.waiting(t)
	if got := h.store.done(); fmt.Sprint(got) != "[500]" {
		t.Fatalf("compacted to %v, want [500] (the new leadership's first observation)", got)
	}
}

func TestToleratesAlreadyCompactedAndFutureRevisions(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	h.store.compactFn = func(rev int64) error {
		switch rev {
		case 100: // etcd's --auto-compaction, or another fleet, went further
			return fmt.Errorf("compact at %d: %w", rev, nodestore.ErrCompacted)
		case 200: // etcd was restored from an older snapshot under us
			return fmt.Errorf("compact at %d: %w", rev, etcdstore.ErrFutureRevision)
		case 300:
			return errors.New("connection refused")
		}
		return nil
	}
	h.leader.set(true)
	for _, next := range []int64{200, 300, 400, 500} {
		w := h.clock.waiting(t)
		h.store.set(next, nil)
		w.ch <- time.Time{}
	}
	h.clock.waiting(t)
	if got := h.store.done(); fmt.Sprint(got) != "[400]" {
		t.Fatalf("compacted to %v, want [400]", got)
	}
	for r, want := range map[string]float64{ResultCompacted: 1, ResultAlreadyCompacted: 1, ResultFuture: 1, ResultError: 1} {
		if n := h.count(r); n != want {
			t.Errorf("%s{result=%s} = %v, want %v", MetricCompactions, r, n, want)
		}
	}
	// The defragmenter hears of the rounds that found history compacted:
	// by this replica (400) or by someone else (100), not the others.
	if n := h.followed.Load(); n != 2 {
		t.Errorf("Compacted called %d times, want 2", n)
	}
}

func TestRevisionWentBackIsNotCompacted(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	h.store.set(1000, nil)
	h.leader.set(true)
	w := h.clock.waiting(t)
	h.store.set(40, nil) // restored: the remembered 1000 is in its future
	w.ch <- time.Time{}
	w = h.clock.waiting(t)
	h.store.set(90, nil)
	w.ch <- time.Time{}
	h.clock.waiting(t)
	if got := h.store.done(); fmt.Sprint(got) != "[40]" {
		t.Fatalf("compacted to %v, want [40] (nothing while the remembered revision was ahead)", got)
	}
	if n := h.count(ResultFuture); n != 1 {
		t.Fatalf("%s{result=future_revision} = %v, want 1", MetricCompactions, n)
	}
}

func TestUnreadableRevisionKeepsTheOldOne(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	h.leader.set(true)
	w := h.clock.waiting(t) // observed 100
	h.store.set(0, errors.New("etcd down"))
	w.ch <- time.Time{}
	w = h.clock.waiting(t) // nothing read, nothing compacted
	h.store.set(300, nil)
	w.ch <- time.Time{}
	h.clock.waiting(t)
	if got := h.store.done(); fmt.Sprint(got) != "[100]" {
		t.Fatalf("compacted to %v, want [100] (the last revision read, two intervals old)", got)
	}
}

func TestDisabled(t *testing.T) {
	h := start(t, 0)
	h.leader.set(true)
	select {
	case w := <-h.clock.waits:
		t.Fatalf("disabled compactor waits %s", w.d)
	case <-time.After(100 * time.Millisecond):
	}
	if got := h.store.done(); len(got) != 0 {
		t.Fatalf("disabled compactor compacted %v", got)
	}
}

func TestNegativeIntervalRejected(t *testing.T) {
	if _, err := New(Config{Interval: -time.Second}, &fakeStore{}, newLeader(), zap.NewNop(), nil); err == nil {
		t.Fatal("New accepted a negative interval")
	}
}
