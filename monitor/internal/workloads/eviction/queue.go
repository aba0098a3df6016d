// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"container/heap"
	"time"
)

// timedQueue orders pending deletions by fire time (upstream
// TimedWorkerQueue). Not safe for concurrent use.
type timedQueue struct {
	items []*queued
	index map[string]*queued
}

type queued struct {
	key string
	s   Scheduled
	pos int
}

func newTimedQueue() *timedQueue { return &timedQueue{index: map[string]*queued{}} }

func (q *timedQueue) Len() int           { return len(q.items) }
func (q *timedQueue) Less(i, j int) bool { return q.items[i].s.FireAt.Before(q.items[j].s.FireAt) }
func (q *timedQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].pos, q.items[j].pos = i, j
}
func (q *timedQueue) Push(x any) {
	it := x.(*queued)
	it.pos = len(q.items)
	q.items = append(q.items, it)
}
func (q *timedQueue) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it
}

// get returns the schedule of key.
func (q *timedQueue) get(key string) (Scheduled, bool) {
	it, ok := q.index[key]
	if !ok {
		return Scheduled{}, false
	}
	return it.s, true
}

// set adds or replaces the schedule of key.
func (q *timedQueue) set(key string, s Scheduled) {
	if it, ok := q.index[key]; ok {
		it.s = s
		heap.Fix(q, it.pos)
		return
	}
	it := &queued{key: key, s: s}
	q.index[key] = it
	heap.Push(q, it)
}

// remove drops key and reports whether it was scheduled.
func (q *timedQueue) remove(key string) (Scheduled, bool) {
	it, ok := q.index[key]
	if !ok {
		return Scheduled{}, false
	}
	heap.Remove(q, it.pos)
	delete(q.index, key)
	return it.s, true
}

// next returns the earliest fire time.
func (q *timedQueue) next() (time.Time, bool) {
	if len(q.items) == 0 {
		return time.Time{}, false
	}
	return q.items[0].s.FireAt, true
}

// popDue removes and returns every schedule due at now, earliest first.
func (q *timedQueue) popDue(now time.Time) []queued {
	var out []queued
	for len(q.items) > 0 && !q.items[0].s.FireAt.After(now) {
		it := heap.Pop(q).(*queued)
		delete(q.index, it.key)
		out = append(out, *it)
	}
	return out
}

// all returns every schedule (unordered).
func (q *timedQueue) all() []queued {
	out := make([]queued, len(q.items))
	for i, it := range q.items {
		out[i] = *it
	}
	return out
}
