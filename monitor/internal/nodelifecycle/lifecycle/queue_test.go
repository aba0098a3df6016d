// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"testing"
	"time"
)

func TestQueueRateAndRemember(t *testing.T) {
	q := NewRateLimitedQueue(0.1, t0)
	for _, n := range []string{"a", "b", "c"} {
		q.Add(n, "", t0)
	}
	var done []string
	try := func(now time.Time) {
		q.Try(now, func(it QueueItem) (bool, time.Duration) { done = append(done, it.Name); return true, 0 })
	}
	try(t0)
	if len(done) != 1 {
		t.Fatalf("burst 1: processed %v", done)
	}
	try(t0.Add(9 * time.Second))
	if len(done) != 1 {
		t.Fatalf("before 10s: %v", done)
	}
	try(t0.Add(10 * time.Second))
	try(t0.Add(20 * time.Second))
	if len(done) != 3 || q.Len() != 0 {
		t.Fatalf("one per 10s: %v", done)
	}
	// Processed nodes are remembered: adding again is a no-op until removed.
	if q.Add("a", "", t0.Add(time.Minute)) {
		t.Error("re-add of a remembered node succeeded")
	}
	q.Remove("a")
	if !q.Add("a", "", t0.Add(time.Minute)) {
		t.Error("add after remove failed")
	}
}

func TestQueueRetryAndZeroRate(t *testing.T) {
	q := NewRateLimitedQueue(10, t0)
	q.Add("a", "", t0)
	calls := 0
	q.Try(t0, func(QueueItem) (bool, time.Duration) { calls++; return false, 50 * time.Millisecond })
	if calls != 1 || q.Len() != 1 {
		t.Fatalf("calls %d len %d", calls, q.Len())
	}
	q.Try(t0.Add(40*time.Millisecond), func(QueueItem) (bool, time.Duration) { calls++; return true, 0 })
	if calls != 1 {
		t.Fatal("retried before its wait")
	}
	q.Try(t0.Add(time.Second), func(QueueItem) (bool, time.Duration) { calls++; return true, 0 })
	if calls != 2 || q.Len() != 0 {
		t.Fatalf("retry: calls %d", calls)
	}
	q.SwapLimiter(0, t0.Add(2*time.Second))
	q.Add("b", "", t0.Add(2*time.Second))
	q.Try(t0.Add(time.Hour), func(QueueItem) (bool, time.Duration) { calls++; return true, 0 })
	if calls != 2 || q.NextToken(t0) != -1 {
		t.Fatal("QPS 0 must never process")
	}
}

func TestSwapLimiterCarriesDebt(t *testing.T) {
	q := NewRateLimitedQueue(0.1, t0)
	q.Add("a", "", t0)
	q.Add("b", "", t0)
	n := 0
	q.Try(t0, func(QueueItem) (bool, time.Duration) { n++; return true, 0 })
	// The bucket is empty; a new rate must not hand out a fresh token.
	q.SwapLimiter(0.5, t0)
	q.Try(t0, func(QueueItem) (bool, time.Duration) { n++; return true, 0 })
	if n != 1 {
		t.Fatalf("swap gave a free token: %d", n)
	}
	q.Try(t0.Add(2*time.Second), func(QueueItem) (bool, time.Duration) { n++; return true, 0 })
	if n != 2 {
		t.Fatalf("new rate not applied: %d", n)
	}
}
