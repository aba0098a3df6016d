// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Lease acks are sent by a few sender goroutines, not by the stream's own.
//
// Why: the Go runtime resets every goroutine's GC assist credit when a
// cycle starts, and a goroutine whose first allocation falls in the cycle
// marks at least 64 KB before it goes on, unless the background workers
// have that much credit to spare. gRPC's Send allocates (a message header,
// a data frame, a control-buffer node), so with acks sent inline every
// renewal during a cycle was such a first allocation: at 10,000 renewals
// a second on 100,000 streams the renewals did the cycle's marking
// themselves, 64 KB each, as fast as they arrived, which on two shared
// cores was more CPU than there was, and renewals waited up to 2 s for
// their acks (docs/adr/0006-empty-renewals-and-ack-senders.md; tests/cmd/gcassist shows the
// rule without gRPC). A sender goroutine carries its credit from one ack
// to the next and pays for its allocations at the pacer's rate. With an
// empty renewal (see recvBuf) the stream's goroutine then allocates
// nothing at all for a renewal, and the cycle is marked by the background
// workers.
//
// Each stream keeps to one sender, so its acks stay in order. A Send
// blocks only when the reporter does not read what it is sent (gRPC flow
// control); the stream is then ended after ackStuckAfter, so one such
// reporter cannot hold up the other streams of its sender for longer.
type ackSenders struct {
	s      *Server
	once   sync.Once
	shards []ackShard
	next   atomic.Uint32
}

type ackShard struct {
	q     chan ackJob
	since atomic.Int64 // UnixNano when the Send in progress started; 0: none
	cur   atomic.Pointer[stream]
}

type ackJob struct {
	st  *stream
	seq uint64
}

const (
	// ackQueueDepth per sender: a full queue makes the streams behind it
	// wait in their own loop, which is backpressure on their reporters.
	ackQueueDepth = 4096
	// ackStuckAfter is how long one ack's Send may block before its
	// stream is ended (errAcksUnread). A reporter reading its stream
	// takes microseconds; gRPC blocks a Send only once 64 KB of a stream's
	// messages are unread, thousands of acks.
	ackStuckAfter = 10 * time.Second
)

// maxAckSenders bounds the senders (a stream's is a uint8 index).
const maxAckSenders = 64

func newAckSenders(s *Server) *ackSenders {
	return &ackSenders{s: s, shards: make([]ackShard, min(maxAckSenders, max(4, 2*runtime.GOMAXPROCS(0))))}
}

// shard picks a new stream's sender, round robin.
func (a *ackSenders) shard() uint8 {
	return uint8(a.next.Add(1) % uint32(len(a.shards)))
}

// send queues the ack of a renewal; it waits while the stream's sender
// has ackQueueDepth acks queued.
func (a *ackSenders) send(st *stream, seq uint64) {
	a.once.Do(a.start)
	a.shards[st.ackShard].q <- ackJob{st: st, seq: seq}
}

// start runs the senders and their watchdog for the life of the process
// (a collector has one Server).
func (a *ackSenders) start() {
	for i := range a.shards {
		sh := &a.shards[i]
		sh.q = make(chan ackJob, ackQueueDepth)
		go a.run(sh)
	}
	go a.watch()
}

func (a *ackSenders) run(sh *ackShard) {
	for j := range sh.q {
		sh.cur.Store(j.st)
		sh.since.Store(a.s.now().UnixNano())
		// An error means the stream ended: its loop sees that in Recv.
		_ = a.s.ackLease(j.st, j.seq)
		sh.since.Store(0)
		sh.cur.Store(nil)
	}
}

// watch ends the stream of any Send blocked for ackStuckAfter.
func (a *ackSenders) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for range t.C {
		a.check(a.s.now())
	}
}

func (a *ackSenders) check(now time.Time) {
	for i := range a.shards {
		sh := &a.shards[i]
		since := sh.since.Load()
		if since == 0 || now.Sub(time.Unix(0, since)) < ackStuckAfter {
			continue
		}
		st := sh.cur.Load()
		// since again: the stuck Send may have returned and the next one
		// begun between the two loads, and that one's stream is not stuck.
		if st != nil && sh.since.Load() == since && !st.ending() {
			a.s.lg.Warn("ending a stream whose reporter does not read it: an ack could not be sent", zapNode(st.name), zap.Duration("waited", now.Sub(time.Unix(0, since))))
			st.end(errAcksUnread) // counted in streams_detached_total{code="ResourceExhausted"}
		}
	}
}
