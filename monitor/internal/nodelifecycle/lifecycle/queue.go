// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"container/heap"
	"math"
	"time"
)

// TokenBucket is a token bucket rate limiter with an injected clock (the
// upstream flowcontrol token bucket over golang.org/x/time/rate, which needs
// the same arithmetic). It starts full. A QPS ≤ 0 never grants a token.
type TokenBucket struct {
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewTokenBucket returns a full bucket.
func NewTokenBucket(qps float64, burst int, now time.Time) *TokenBucket {
	return &TokenBucket{qps: qps, burst: float64(burst), tokens: float64(burst), last: now}
}

// QPS is the refill rate.
func (b *TokenBucket) QPS() float64 { return b.qps }

// TryAccept takes a token if one is available at now.
func (b *TokenBucket) TryAccept(now time.Time) bool {
	if b.qps <= 0 {
		return false
	}
	if now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.qps)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// NextToken is how long after now the next token is available; -1 when
// never.
func (b *TokenBucket) NextToken(now time.Time) time.Duration {
	if b.qps <= 0 {
		return -1
	}
	tokens := b.tokens
	if now.After(b.last) {
		tokens = math.Min(b.burst, tokens+now.Sub(b.last).Seconds()*b.qps)
	}
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / b.qps * float64(time.Second))
}

// QueueItem is one queued node.
type QueueItem struct {
	Name      string
	UID       string
	AddedAt   time.Time
	ProcessAt time.Time
	index     int
}

type itemHeap []*QueueItem

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].ProcessAt.Equal(h[j].ProcessAt) {
		return h[i].ProcessAt.Before(h[j].ProcessAt)
	}
	return h[i].Name < h[j].Name
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *itemHeap) Push(x any)   { it := x.(*QueueItem); it.index = len(*h); *h = append(*h, it) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	it.index = -1
	return it
}

// RateLimitedQueue is a zone's NoExecute taint queue (upstream
// RateLimitedTimedQueue): a set of node names ordered by the time they are
// due, drained through a token bucket with burst 1. A processed node stays
// remembered (in the set, out of the heap) until Remove, so enqueueing it
// again is a no-op: this is what keeps a tainted node from being re-processed
// every pass. The queue is reused by the evictor later (spec §7).
type RateLimitedQueue struct {
	limiter *TokenBucket
	heap    itemHeap
	set     map[string]*QueueItem // nil value: processed, still remembered
}

// Burst of every zone limiter.
const Burst = 1

// NewRateLimitedQueue returns an empty queue limited to qps.
func NewRateLimitedQueue(qps float64, now time.Time) *RateLimitedQueue {
	return &RateLimitedQueue{limiter: NewTokenBucket(qps, Burst, now), set: map[string]*QueueItem{}}
}

// QPS of the limiter.
func (q *RateLimitedQueue) QPS() float64 { return q.limiter.QPS() }

// Len counts queued (not yet processed) nodes.
func (q *RateLimitedQueue) Len() int { return len(q.heap) }

// Has reports whether name is queued or remembered.
func (q *RateLimitedQueue) Has(name string) bool { _, ok := q.set[name]; return ok }

// Queued returns the item for name if it is waiting (not processed).
func (q *RateLimitedQueue) Queued(name string) (QueueItem, int, bool) {
	it := q.set[name]
	if it == nil {
		return QueueItem{}, 0, false
	}
	pos := 0
	for _, o := range q.heap {
		if q.heap.Less(o.index, it.index) {
			pos++
		}
	}
	return *it, pos, true
}

// NextToken tells when the limiter grants its next token (-1: never).
func (q *RateLimitedQueue) NextToken(now time.Time) time.Duration { return q.limiter.NextToken(now) }

// Add queues name unless it is queued or remembered; it reports whether it
// was added.
func (q *RateLimitedQueue) Add(name, uid string, now time.Time) bool {
	if _, ok := q.set[name]; ok {
		return false
	}
	it := &QueueItem{Name: name, UID: uid, AddedAt: now, ProcessAt: now}
	heap.Push(&q.heap, it)
	q.set[name] = it
	return true
}

// Remove forgets name entirely; it reports whether it was known.
func (q *RateLimitedQueue) Remove(name string) bool {
	it, ok := q.set[name]
	if !ok {
		return false
	}
	if it != nil {
		heap.Remove(&q.heap, it.index)
	}
	delete(q.set, name)
	return true
}

// Clear forgets every node.
func (q *RateLimitedQueue) Clear() {
	q.heap = nil
	q.set = map[string]*QueueItem{}
}

// Try processes due items while the limiter grants tokens. fn returns
// (true, _) when done with the item, which stays remembered, or (false, wait)
// to retry it after wait (+1ns, as upstream, so a zero wait still moves it
// behind the present). As upstream, a token is taken before the head's due
// time is checked, so a waiting head also consumes the rate.
func (q *RateLimitedQueue) Try(now time.Time, fn func(QueueItem) (bool, time.Duration)) {
	for len(q.heap) > 0 {
		if !q.limiter.TryAccept(now) {
			return
		}
		it := q.heap[0]
		if now.Before(it.ProcessAt) {
			return
		}
		if ok, wait := fn(*it); !ok {
			it.ProcessAt = now.Add(wait + time.Nanosecond)
			heap.Fix(&q.heap, it.index)
			continue
		}
		heap.Remove(&q.heap, it.index)
		q.set[it.Name] = nil
	}
}

// SwapLimiter changes the rate. With burst 1, a limiter that is currently
// empty hands its debt to the new one, so a rate change cannot be used to
// skip the wait (upstream behaviour).
func (q *RateLimitedQueue) SwapLimiter(qps float64, now time.Time) {
	if q.limiter.QPS() == qps {
		return
	}
	nl := NewTokenBucket(qps, Burst, now)
	if qps > 0 && !q.limiter.TryAccept(now) {
		nl.TryAccept(now)
	}
	q.limiter = nl
}
