// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// stream is one Report stream. At 100,000 nodes per collector what a
// stream holds is what the collector costs per node, so it holds little:
//
//   - one goroutine while idle: the gRPC handler, which receives and
//     processes every message inline and sends its acks (serveInline).
//     When the server ends the stream (superseded, drain, register
//     timeout) end starts a goroutine that writes the final status, which
//     unblocks the pending Recv. Where the transport stream cannot do
//     that, a reader goroutine receives instead and the handler only
//     waits (serveWithReader);
//   - no context, timer or callback of its own while it is served inline:
//     it uses the gRPC stream's context and records the server's reason
//     for ending it in cause. A derived context, a context.AfterFunc and
//     the register timer cost ~1 KB per stream (their registrations in
//     the parents' children maps most of it), 15-20 % of the collector's
//     heap at 100,000 streams, all of it scanned by every GC cycle;
//   - a status writer goroutine only while status reports wait for etcd,
//     and a command sender only while commands wait to be sent;
//   - a digest of the stored status (statusDigest), not the status.
//
// Send is serialised by sendTok; no Send starts once the stream is closing
// (closed).
type stream struct {
	s   *Server
	srv collectorv1.CollectorService_ReportServer
	// ctx is done when the stream ended for any reason: the gRPC stream's
	// context, which ends when the client or the connection goes, and
	// when the server writes the final status (serveInline); a context
	// derived from it that end cancels under serveWithReader.
	ctx context.Context
	// cause is why the server ended the stream (errSuperseded, errDrained,
	// errRegisterTimeout, errHandlerReturned): the first one wins.
	cause atomic.Pointer[error]
	// How end ends the stream: the transport stream's status writer
	// (serveInline), else the derived context's cancel (serveWithReader).
	// Set before the stream can be ended.
	w            statusWriter
	cancelReader context.CancelFunc

	// Set at registration, before the stream is published in s.streams.
	name       string
	gen        uint64
	ref        live.Ref  // the attachment, for renewals
	phaseConn  string    // the connection its renewal phase was assigned for ("": none)
	leaseFresh time.Time // persist.Registered.LeaseFresh, for the first checkpoint

	// sendTok holds one token; whoever takes it may call srv.Send.
	sendTok  chan struct{}
	ackShard uint8       // the sender of its lease acks (acksend.go)
	closed   atomic.Bool // the handler returns: no Send may start
	first    atomic.Bool // the first message arrived (register timeout)
	// pendingPeer is the peer this stream counts against while it has
	// not registered (peers.go); nil from its stored Register on.
	pendingPeer atomic.Pointer[string]
	// moveAsked: Rebalance asked the reporter to move (counted as
	// accepted when the reporter then ends the stream).
	moveAsked atomic.Bool

	mu       sync.Mutex
	out      []*collectorv1.ReportResponse // commands waiting to be sent (≤ SendQueue)
	sending  bool                          // a command sender runs
	statuses []statusJob                   // status reports waiting for the writer (≤ StatusQueue)
	writing  bool                          // a status writer runs

	// What etcd holds as status/<name>: storedRev its revision (0: none),
	// the revision this stream's next write is conditional on; stored its
	// digest, valid only while hasStored. hasStored is set only by this
	// stream's own write or by what its conditional write found: a status
	// read at registration may still be overwritten by a write of the
	// node's previous stream that was sent before and lands after, so it
	// cannot stand for what etcd holds (writeStatus). Only the status
	// writer reads and writes these after registration (one writer at a
	// time, handed over under mu).
	stored    statusDigest
	hasStored bool
	storedRev int64

	// pods is set when the reporter asked for its node's pods (pods.go).
	pods atomic.Pointer[podState]
}

type statusJob struct {
	seq    uint64
	status *nodev1.NodeStatus
	// received: this collector's clock when the report arrived, which
	// dates it for the monitors (STATUS_REPORTED) however long its write
	// then waits for etcd.
	received time.Time
}

var errStreamClosed = errors.New("stream closed")

// sendDrainWait bounds how long an ending handler waits for a Send in
// progress (one blocked by flow control towards a client that stopped
// reading; it fails when the handler has returned).
const sendDrainWait = 250 * time.Millisecond

func newStream(s *Server, srv collectorv1.CollectorService_ReportServer) *stream {
	st := &stream{s: s, srv: srv, ctx: srv.Context(), sendTok: make(chan struct{}, 1), ackShard: s.acks.shard()}
	st.sendTok <- struct{}{}
	return st
}

// end records why the server ends the stream; only the first cause
// counts, none once the client or the connection ended it, and only one
// other than errHandlerReturned (which the handler records on its way out)
// ends the stream. Ending writes the final status on a goroutine of its
// own: it may wait briefly for a Send in progress, and end is called under
// Server.mu.
func (st *stream) end(cause error) {
	if st.ctx.Err() != nil || !st.cause.CompareAndSwap(nil, &cause) || cause == errHandlerReturned {
		return
	}
	switch {
	case st.w != nil:
		go st.endFromServer()
	case st.cancelReader != nil:
		st.cancelReader()
	}
}

// endCause is why the stream ended: the server's reason, else the
// context's (the client cancelled, the connection broke); nil while it
// lives.
func (st *stream) endCause() error {
	if c := st.cause.Load(); c != nil {
		return *c
	}
	return context.Cause(st.ctx)
}

// ending reports whether the stream ended or the server decided to end it.
func (st *stream) ending() bool { return st.cause.Load() != nil || st.ctx.Err() != nil }

// send sends m, waiting for any Send in progress on this stream.
func (st *stream) send(m *collectorv1.ReportResponse) error {
	select {
	case <-st.sendTok:
	case <-st.ctx.Done():
		return errStreamClosed
	}
	if st.closed.Load() {
		st.sendTok <- struct{}{}
		return errStreamClosed
	}
	err := st.srv.Send(m)
	st.sendTok <- struct{}{}
	return err
}

// close is called before the handler returns: no Send starts after it,
// and one in progress is waited for (briefly). Only the first call waits.
func (st *stream) close() {
	if st.closed.Swap(true) {
		return
	}
	t := time.NewTimer(sendDrainWait)
	defer t.Stop()
	select {
	case <-st.sendTok: // kept: nobody sends any more
	case <-t.C:
	}
}

// sendNow sends m (a command) at once when nothing is being sent or
// queued on the stream, else queues it behind (push), so commands keep
// their order. It blocks only in a Send that flow control holds. false: the
// stream is ending, or SendQueue messages are already waiting.
func (st *stream) sendNow(m *collectorv1.ReportResponse) bool {
	st.mu.Lock()
	queued := st.sending
	st.mu.Unlock()
	if queued {
		return st.push(m)
	}
	select {
	case <-st.sendTok:
	default:
		return st.push(m) // a Send in progress (an ack): queue behind it
	}
	if st.closed.Load() {
		st.sendTok <- struct{}{}
		return false
	}
	err := st.srv.Send(m)
	st.sendTok <- struct{}{}
	return err == nil
}

// push queues m (a command) without blocking; false when the stream is
// ending or SendQueue messages are already waiting.
func (st *stream) push(m *collectorv1.ReportResponse) bool {
	st.mu.Lock()
	if st.closed.Load() || len(st.out) >= st.s.cfg.SendQueue {
		st.mu.Unlock()
		return false
	}
	st.out = append(st.out, m)
	start := !st.sending
	st.sending = true
	st.mu.Unlock()
	if start {
		go st.sendQueued()
	}
	return true
}

// sendQueued runs while commands wait to be sent.
func (st *stream) sendQueued() {
	for {
		st.mu.Lock()
		if len(st.out) == 0 {
			st.out, st.sending = nil, false
			st.mu.Unlock()
			return
		}
		m := st.out[0]
		st.out[0] = nil
		st.out = st.out[1:]
		st.mu.Unlock()
		if err := st.send(m); err != nil {
			// The stream is ending: drop the rest. sending stays true, so
			// no other sender starts; push refuses once the queue is full.
			st.mu.Lock()
			st.out = nil
			st.mu.Unlock()
			return
		}
	}
}

// submitStatus queues a status report for the writer; false when
// StatusQueue reports already wait.
func (s *Server) submitStatus(st *stream, seq uint64, status *nodev1.NodeStatus, received time.Time) bool {
	st.mu.Lock()
	if len(st.statuses) >= s.cfg.StatusQueue {
		st.mu.Unlock()
		return false
	}
	st.statuses = append(st.statuses, statusJob{seq: seq, status: status, received: received})
	start := !st.writing
	st.writing = true
	st.mu.Unlock()
	if start {
		s.handlers.Add(1) // the reader holds a count: never Add from zero
		go s.writeStatuses(st)
	}
	return true
}

// writeStatuses runs while status reports wait: it writes them in order
// and acks each after its write committed (or was not needed).
func (s *Server) writeStatuses(st *stream) {
	defer s.handlers.Done()
	for {
		st.mu.Lock()
		if len(st.statuses) == 0 || st.ending() {
			st.statuses, st.writing = nil, false
			st.mu.Unlock()
			return
		}
		j := st.statuses[0]
		st.statuses[0] = statusJob{}
		st.statuses = st.statuses[1:]
		st.mu.Unlock()
		a := s.writeStatus(st, j)
		if a == nil || st.send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}) != nil {
			st.mu.Lock()
			st.statuses, st.writing = nil, false
			st.mu.Unlock()
			return
		}
	}
}
