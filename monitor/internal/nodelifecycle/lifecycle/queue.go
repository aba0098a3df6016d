// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"container/heap"
	"time"

	"golang.org/x/time/rate"
)

// limiter is a zone's rate: a golang.org/x/time/rate limiter (as upstream's
// flowcontrol token bucket) always given the monitor's clock, so tests and
// the lifecycle logic control time. It starts full. A QPS ≤ 0 never grants
// a token: rate.Limiter with a zero limit would still hand out its burst.
type limiter struct {
	qps float64
	lim *rate.Limiter
}

func newLimiter(qps float64) limiter {
	return limiter{qps: qps, lim: rate.NewLimiter(rate.Limit(qps), Burst)}
}

// tryAccept takes a token if one is available at now.
func (l limiter) tryAccept(now time.Time) bool {
	return l.qps > 0 && l.lim.AllowN(now, 1)
}

// nextToken is how long after now the next token is available; -1 when
// never.
func (l limiter) nextToken(now time.Time) time.Duration {
	if l.qps <= 0 {
		return -1
	}
	tokens := l.lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / l.qps * float64(time.Second))
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
	limiter limiter
	heap    itemHeap
	set     map[string]*QueueItem // nil value: processed, still remembered
}

// Burst of every zone limiter.
const Burst = 1

// NewRateLimitedQueue returns an empty queue limited to qps.
func NewRateLimitedQueue(qps float64, now time.Time) *RateLimitedQueue {
	return &RateLimitedQueue{limiter: newLimiter(qps), set: map[string]*QueueItem{}}
}

// QPS of the limiter.
func (q *RateLimitedQueue) QPS() float64 { return q.limiter.qps }

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
func (q *RateLimitedQueue) NextToken(now time.Time) time.Duration { return q.limiter.nextToken(now) }

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
		if !q.limiter.tryAccept(now) {
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
	if q.limiter.qps == qps {
		return
	}
	nl := newLimiter(qps)
	if qps > 0 && !q.limiter.tryAccept(now) {
		nl.tryAccept(now)
	}
	q.limiter = nl
}
