// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

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

	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/services/nodestore"
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
	leader *leadertest.Leader
	clock  *fakeClock
	c      *Compactor
	reg    *prometheus.Registry
	stop   func()
	// followed counts Config.Compacted calls (what the defragmenter hears).
	followed atomic.Int32
}

func start(t *testing.T, interval time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, store: &fakeStore{rev: 100}, leader: &leadertest.Leader{}, clock: newClock(), reg: prometheus.NewRegistry()}
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

// round ends the current wait after setting etcd's revision (or a read
// error) for the next round, and waits until that round is over.
func (h *harness) round(w waiter, rev int64, err error) waiter {
	h.t.Helper()
	h.store.set(rev, err)
	w.ch <- time.Time{}
	return h.clock.waiting(h.t)
}

func TestCompactsToTheRevisionOfOneIntervalAgo(t *testing.T) {
	const iv = 5 * time.Minute
	h := start(t, iv)
	h.leader.Set(true)
	// Start of leadership: observe 100; rounds come every fifth of the
	// interval, and nothing is compacted until one interval has passed.
	w := h.clock.waiting(t)
	if w.d != iv/Steps {
		t.Fatalf("rounds %s apart, want %s", w.d, iv/Steps)
	}
	for _, rev := range []int64{110, 120, 130, 140} {
		w = h.round(w, rev, nil)
	}
	if got := h.store.done(); len(got) != 0 {
		t.Fatalf("compacted %v within the first interval, want nothing", got)
	}
	// One interval after 100 was observed: compact to it; and from then
	// on every round compacts to the revision of one interval before.
	w = h.round(w, 150, nil)
	w = h.round(w, 160, nil)
	h.round(w, 170, nil)
	if got := h.store.done(); fmt.Sprint(got) != "[100 110 120]" {
		t.Fatalf("compacted to %v, want [100 110 120]", got)
	}
	if n := h.count(ResultCompacted); n != 3 {
		t.Fatalf("%s{result=compacted} = %v, want 3", MetricCompactions, n)
	}
	if r := testutil.ToFloat64(h.c.revision); r != 120 {
		t.Fatalf("%s = %v, want 120", MetricCompactedRevision, r)
	}
}

// An idle etcd keeps its revision: the same revision is not compacted twice.
func TestIdleRevisionCompactedOnce(t *testing.T) {
	h := start(t, time.Minute)
	h.leader.Set(true)
	w := h.clock.waiting(t)
	for i := 0; i < 2*Steps; i++ {
		w = h.round(w, 100, nil)
	}
	if got := h.store.done(); fmt.Sprint(got) != "[100]" {
		t.Fatalf("compacted to %v, want [100] once", got)
	}
	if n := h.count(ResultAlreadyCompacted); n != 0 {
		t.Fatalf("%s{result=already_compacted} = %v, want 0", MetricCompactions, n)
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
	h.leader.Set(true)
	h.store.set(200, nil)
	w := h.clock.waiting(t) // observed 200
	for _, rev := range []int64{210, 220, 230} {
		w = h.round(w, rev, nil)
	}
	// Leadership ends one round before the first compaction: no compaction.
	h.leader.Set(false)
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
	h.leader.Set(true)
	w = h.clock.waiting(t)
	for _, rev := range []int64{510, 520, 530, 540, 550} {
		w = h.round(w, rev, nil)
	}
	if got := h.store.done(); fmt.Sprint(got) != "[500]" {
		t.Fatalf("compacted to %v, want [500]", got)
	}
}

func TestToleratesAlreadyCompactedAndFutureRevisions(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	h.store.compactFn = func(rev int64) error {
		switch rev {
		case 100: // etcd's --auto-compaction, or another fleet, went further
			return fmt.Errorf("compact at %d: %w", rev, nodestore.ErrCompacted)
		case 110: // etcd was restored from an older snapshot under us
			return fmt.Errorf("compact at %d: %w", rev, nodestore.ErrFutureRevision)
		case 120:
			return errors.New("connection refused")
		}
		return nil
	}
	h.leader.Set(true)
	w := h.clock.waiting(t) // observed 100
	for _, rev := range []int64{110, 120, 130, 140, 150, 160, 170, 180} {
		w = h.round(w, rev, nil)
	}
	if got := h.store.done(); fmt.Sprint(got) != "[130]" {
		t.Fatalf("compacted to %v, want [130]", got)
	}
	for r, want := range map[string]float64{ResultCompacted: 1, ResultAlreadyCompacted: 1, ResultFuture: 1, ResultError: 1} {
		if n := h.count(r); n != want {
			t.Errorf("%s{result=%s} = %v, want %v", MetricCompactions, r, n, want)
		}
	}
	// The defragmenter hears of the rounds that found history compacted:
	// by this replica (130) or by someone else (100), not the others.
	if n := h.followed.Load(); n != 2 {
		t.Errorf("Compacted called %d times, want 2", n)
	}
}

func TestRevisionWentBackIsNotCompacted(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	h.store.set(1000, nil)
	h.leader.Set(true)
	w := h.clock.waiting(t)
	w = h.round(w, 1010, nil)
	// Restored: the remembered 1000 and 1010 are in its future; start over.
	for _, rev := range []int64{40, 50, 60, 70, 80} {
		w = h.round(w, rev, nil)
	}
	if got := h.store.done(); len(got) != 0 {
		t.Fatalf("compacted to %v within an interval of the restore, want nothing", got)
	}
	h.round(w, 90, nil)
	if got := h.store.done(); fmt.Sprint(got) != "[40]" {
		t.Fatalf("compacted to %v, want [40] (one interval after the restore)", got)
	}
	if n := h.count(ResultFuture); n != 1 {
		t.Fatalf("%s{result=future_revision} = %v, want 1", MetricCompactions, n)
	}
}

func TestUnreadableRevisionKeepsTheOldOne(t *testing.T) {
	const iv = time.Minute
	h := start(t, iv)
	h.leader.Set(true)
	w := h.clock.waiting(t) // observed 100
	w = h.round(w, 0, errors.New("etcd down"))
	for _, rev := range []int64{120, 130, 140} {
		w = h.round(w, rev, nil)
	}
	w = h.round(w, 150, nil) // one interval after 100: compact to it
	// One interval after the unread round: nothing new is due (the
	// newest observation that old is 100, compacted already).
	w = h.round(w, 160, nil)
	h.round(w, 170, nil) // one interval after 120
	if got := h.store.done(); fmt.Sprint(got) != "[100 120]" {
		t.Fatalf("compacted to %v, want [100 120]", got)
	}
}

func TestDisabled(t *testing.T) {
	h := start(t, 0)
	h.leader.Set(true)
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
	if _, err := New(Config{Interval: -time.Second}, &fakeStore{}, &leadertest.Leader{}, zap.NewNop(), nil); err == nil {
		t.Fatal("New accepted a negative interval")
	}
}
