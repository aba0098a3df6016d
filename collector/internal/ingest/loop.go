// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

// slowDownEvery: a throttled node is sent at most one SlowDown per this.
const slowDownEvery = 30 * time.Second

// bucket is the per-node token bucket (the semantics of
// golang.org/x/time/rate.Limiter.Allow, without its mutex, allocation and
// clock reads: the loop owns it and passes the time it already read).
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) allow(now time.Time, perSecond float64, burst int) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(burst), b.tokens+d.Seconds()*perSecond)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// leaseAcks recycles lease acks, the one response every renewal costs.
// A response may be reused once Send returned: Send has encoded it, and no
// stats handler or interceptor of this server keeps messages.
var leaseAcks = sync.Pool{New: func() any {
	return &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{}}}
}}

func (s *Server) ackLease(st *stream, seq uint64) error {
	r := leaseAcks.Get().(*collectorv1.ReportResponse)
	a := r.GetAck()
	a.Seq, a.Durable, a.CollectorId = seq, false, s.cfg.CollectorID
	err := st.send(r)
	leaseAcks.Put(r)
	return err
}

// conn is the state the loop keeps for one attached stream, on the heap
// (its receive buffer is handed to gRPC); the work per message is in
// handle and its callees, so the frame that stays on the stack while the
// stream waits in Recv is small (the stack of an idle stream is most of
// what it costs).
type conn struct {
	s            *Server
	st           *stream
	rb           recvBuf // every message is decoded here (see recvBuf)
	lim          bucket
	lastSeq      uint64
	lastRenew    time.Time // the last renewTime forwarded (advancing)
	lastSeconds  int32     // the last renewal's lease duration, for empty ones
	lastArrival  time.Time // this collector's clock when the last renewal arrived
	lastSlowDown time.Time
	renewed      bool
	left         bool // Leaving was acked: nothing but the end of the stream
}

// loop serves an attached stream until the reporter ends it or a message
// ends it; server-side ends are the handler's (see stream). Each message
// is processed inline; status writes go to the stream's status writer.
func (s *Server) loop(st *stream, registerSeq uint64) error {
	c := &conn{s: s, st: st, lim: bucket{tokens: float64(s.cfg.MessageBurst), last: s.now()}, lastSeq: registerSeq}
	for {
		if err := st.srv.RecvMsg(&c.rb); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the reporter closed its side on purpose
			}
			return endErr(err)
		}
		if c.left {
			return c.afterLeaving()
		}
		if c.rb.empty {
			c.rb.empty = false
			if !c.renewed {
				if err := c.refuseEmpty(); err != nil {
					return err
				}
				continue
			}
			c.rb.emptyRenewal(c.lastSeq+1, c.emptyRenewTime(s.now()), c.lastSeconds)
		}
		if err := c.handle(&c.rb.req); err != nil {
			return err
		}
	}
}

func (c *conn) ack(a *collectorv1.Ack) error {
	a.CollectorId = c.s.cfg.CollectorID
	return c.st.send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}})
}

func (c *conn) refuse(seq uint64, code codes.Code, field, msg string, retry time.Duration) error {
	a := &collectorv1.Ack{Seq: seq, Error: &collectorv1.Error{Code: uint32(code), Field: field, Message: msg}}
	if retry > 0 {
		a.RetryAfter = durationpb.New(retry)
	}
	return c.ack(a)
}

// refuseInvalid answers the first validation failure of a message.
func (c *conn) refuseInvalid(kind string, seq uint64, l validation.List) error {
	c.s.invalid(kind, l)
	return c.refuse(seq, codes.InvalidArgument, l[0].Field, l[0].Reason, 0)
}

// handle processes one message; an error ends the stream.
func (c *conn) handle(m *collectorv1.ReportRequest) error {
	s, st := c.s, c.st
	now := s.now()
	seq := m.GetSeq()
	if seq <= c.lastSeq {
		return c.refuseSeq(m)
	}
	c.lastSeq = seq
	if isPodWrite(m) {
		return c.podWrite(m, seq, now) // its own bucket: pods.go
	}
	if !c.lim.allow(now, s.cfg.MessagesPerSecond, s.cfg.MessageBurst) {
		return c.rateLimited(m, now)
	}
	switch msg := m.GetMessage().(type) {
	case *collectorv1.ReportRequest_Lease:
		if l := validation.LeaseRenewal(msg.Lease, s.cfg.Limits); len(l) > 0 {
			return c.refuseInvalid("lease", seq, l)
		}
		// Forwarded renewTimes advance on a stream: the monitors take one
		// that does not as no news. A renewal dated before the previous
		// one (the reporter's clock stepped back, by any amount) is dated
		// like an empty renewal instead: the previous one plus what this
		// collector measured between their arrivals.
		rt := msg.Lease.GetRenewTime().AsTime()
		if !c.lastRenew.IsZero() && rt.Before(c.lastRenew) {
			rt = c.emptyRenewTime(now)
		}
		c.lastRenew = rt
		c.lastSeconds = msg.Lease.GetLeaseDurationSeconds()
		c.lastArrival = now
		if !st.ref.Renew(c.lastRenew, msg.Lease.GetLeaseDurationSeconds()) {
			return status.Errorf(codes.Aborted, "node %q is no longer attached to this stream", st.name)
		}
		if !c.renewed {
			c.renewed = true
			s.p.Attach(st.name, st.gen, st.leaseFresh)
		}
		s.m.leaseOK.Inc()
		s.acks.send(st, seq) // not from this goroutine: see acksend.go
		return nil
	case *collectorv1.ReportRequest_Status:
		var l validation.List
		onFreshStack(func() { l = validation.StatusReport(msg.Status, now, s.cfg.Limits) }) // deep: off the stream's stack
		if len(l) > 0 {
			return c.refuseInvalid("status", seq, l)
		}
		if !s.p.Available() {
			// Refuse at once rather than queue: the reporter keeps the
			// status and resends it; leases keep flowing meanwhile.
			s.m.statusUnavailable.Inc()
			return c.refuse(seq, codes.Unavailable, "", "etcd unavailable: status not stored", s.cfg.RetryAfter)
		}
		if !s.submitStatus(st, seq, msg.Status.GetStatus(), now) {
			s.m.statusBusy.Inc()
			return c.refuse(seq, codes.ResourceExhausted, "", "too many status reports waiting for etcd on this stream", s.p.StatusRetryAfter())
		}
		return nil
	case *collectorv1.ReportRequest_Leaving:
		if l := validation.Leaving(msg.Leaving); len(l) > 0 {
			return c.refuseInvalid("leaving", seq, l)
		}
		s.table.Leaving(st.name, st.gen)
		if c.renewed {
			s.p.CheckpointNow(st.name, st.gen)
		}
		s.lg.Info("node leaving", zapNode(st.name), zapReason(msg.Leaving.GetReason()))
		s.m.leavingOK.Inc()
		c.left = true
		return c.ack(&collectorv1.Ack{Seq: seq})
	case *collectorv1.ReportRequest_Register:
		s.m.messages.WithLabelValues("register", "failed_precondition").Inc()
		return c.refuse(seq, codes.FailedPrecondition, "register", "the stream is already registered; open a new stream to register again", 0)
	default:
		s.m.messages.WithLabelValues(kindOf(m), "invalid").Inc()
		s.m.validation.WithLabelValues("message").Inc()
		return c.refuse(seq, codes.InvalidArgument, "message", "must be one of register, lease, status, leaving", 0)
	}
}

// afterLeaving ends a stream that sent anything after its Leaving: the
// node said it is gone on purpose, and the monitors were told so (LEAVING);
// renewals or statuses acked after that would contradict it. Nothing of the
// message is acked or stored.
func (c *conn) afterLeaving() error {
	kind := kindOf(&c.rb.req)
	if c.rb.empty {
		kind = "lease"
	}
	c.s.m.messages.WithLabelValues(kind, "failed_precondition").Inc()
	return status.Errorf(codes.FailedPrecondition, "node %q is Leaving: after Leaving a Report stream takes nothing but its end (got %s)", c.st.name, kind)
}

// refuseEmpty answers an empty message sent before any lease renewal on
// the stream: there is no duration to renew with.
func (c *conn) refuseEmpty() error {
	c.lastSeq++
	c.s.m.messages.WithLabelValues("lease", "invalid").Inc()
	c.s.m.validation.WithLabelValues("message").Inc()
	return c.refuse(c.lastSeq, codes.InvalidArgument, "message", "an empty message renews the lease only after a lease renewal on this stream", 0)
}

// emptyRenewTime dates an empty renewal: the previous renewal's time plus
// what this collector measured between their arrivals. So it stays on the
// reporter's clock, as its LeaseRenewals are, and always advances: dated by
// the collector's own clock instead, a reporter whose clock is ahead of
// it by more than a renewal interval (validation allows a minute) would
// send renewals that do not advance, and the monitors would count the
// node's grace from the last one that did.
func (c *conn) emptyRenewTime(now time.Time) time.Time {
	return c.lastRenew.Add(max(0, now.Sub(c.lastArrival)))
}

func (c *conn) refuseSeq(m *collectorv1.ReportRequest) error {
	c.s.m.messages.WithLabelValues(kindOf(m), "invalid").Inc()
	c.s.m.validation.WithLabelValues("seq").Inc()
	return c.refuse(m.GetSeq(), codes.InvalidArgument, "seq", fmt.Sprintf("%d is not greater than the previous seq %d", m.GetSeq(), c.lastSeq), 0)
}

func (c *conn) rateLimited(m *collectorv1.ReportRequest, now time.Time) error {
	s := c.s
	s.m.messages.WithLabelValues(kindOf(m), "rate_limited").Inc()
	retry := time.Duration(float64(time.Second) / s.cfg.MessagesPerSecond)
	if err := c.refuse(m.GetSeq(), codes.ResourceExhausted, "", fmt.Sprintf("node %q exceeds %g messages/s (burst %d)", c.st.name, s.cfg.MessagesPerSecond, s.cfg.MessageBurst), retry); err != nil {
		return err
	}
	if now.Sub(c.lastSlowDown) >= slowDownEvery {
		c.lastSlowDown = now
		// Ask for at least the default intervals (lease every 10s,
		// status every 10s), which fit the bucket many times over.
		c.st.push(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
			Command: &collectorv1.Command_SlowDown{SlowDown: &collectorv1.SlowDown{
				MinLeaseInterval: durationpb.New(10 * time.Second), MinStatusInterval: durationpb.New(10 * time.Second)}}}}})
	}
	return nil
}

func kindOf(m *collectorv1.ReportRequest) string {
	switch m.GetMessage().(type) {
	case *collectorv1.ReportRequest_Register:
		return "register"
	case *collectorv1.ReportRequest_Lease:
		return "lease"
	case *collectorv1.ReportRequest_Status:
		return "status"
	case *collectorv1.ReportRequest_Leaving:
		return "leaving"
	case *collectorv1.ReportRequest_PodStatus:
		return "pod_status"
	case *collectorv1.ReportRequest_PodDelete:
		return "pod_delete"
	case *collectorv1.ReportRequest_MirrorPod:
		return "mirror_pod"
	}
	return "unknown"
}

// statusReported puts a stored report's heartbeat on the feed and into the
// next lease checkpoint. An unchanged report is not written to etcd, and its
// heartbeat would be lost otherwise: users then read a lastHeartbeatTime
// as old as the last change, where Kubernetes shows one at most a report
// frequency old (spec §6.7). Once per report, not per renewal.
func (s *Server) statusReported(st *stream, j statusJob) {
	if hb := nodemodel.ReportedHeartbeat(j.status); !hb.IsZero() {
		// How far the node's clock is from this collector's, as the
		// report's heartbeat (stamped when the reporter sent it) says:
		// measured, never refused (ADR 0036).
		s.m.clockSkew.Observe(hb.Sub(j.received).Abs().Seconds())
		st.ref.StatusReported(hb, j.received)
	}
}

// writeStatus writes one status report unless the stored status already
// equals it, and returns its ack; nil when the stream ended meanwhile.
//
// Every write is conditional on the revision of status/<name> the stream
// knows (Persister.WriteStatus). When that fails, someone else wrote since:
// the previous stream's last write landing late, or an operator. The
// stream takes what is stored as its own knowledge and tries again, or acks
// if what is stored already equals the report.
func (s *Server) writeStatus(st *stream, j statusJob) *collectorv1.Ack {
	a := &collectorv1.Ack{Seq: j.seq, CollectorId: s.cfg.CollectorID}
	d, ok := digestOf(j.status)
	if ok && st.hasStored && d == st.stored {
		a.Durable = true
		s.m.statusUnchanged.Inc()
		s.statusReported(st, j)
		return a
	}
	for range statusWriteAttempts {
		res, err := s.p.WriteStatus(st.ctx, st.name, j.status, st.storedRev)
		switch {
		case err == nil && res.Written:
			st.stored, st.hasStored, st.storedRev = d, ok, res.Rev
			a.Durable = true
			s.m.statusOK.Inc()
			s.statusReported(st, j)
			return a
		case err == nil:
			st.storedRev, st.hasStored = res.Rev, false
			if cur, cok := digestOf(res.Current); ok && cok && res.Current != nil && cur == d {
				// Stored by another writer, and equal: the report is held.
				st.stored, st.hasStored = d, true
				a.Durable = true
				s.m.statusUnchanged.Inc()
				s.statusReported(st, j)
				return a
			}
			continue // decide again on what is stored now
		case st.ending():
			return nil
		case errors.Is(err, persist.ErrBusy):
			// Not queued: etcd still holds what it held.
			s.m.statusBusy.Inc()
			a.Error = &collectorv1.Error{Code: uint32(codes.ResourceExhausted), Message: "collector write queue full: status not stored"}
			a.RetryAfter = durationpb.New(s.p.StatusRetryAfter())
			return a
		default:
			// A failed commit may still have landed: forget the stored
			// copy; the next write's condition finds out.
			st.hasStored = false
			s.m.statusUnavailable.Inc()
			a.Error = &collectorv1.Error{Code: uint32(codes.Unavailable), Message: "status not stored: " + err.Error()}
			a.RetryAfter = durationpb.New(s.cfg.RetryAfter)
			return a
		}
	}
	// Another writer keeps changing the node's status: not ours to win.
	s.m.statusUnavailable.Inc()
	a.Error = &collectorv1.Error{Code: uint32(codes.Unavailable), Message: "status not stored: status/" + st.name + " keeps changing under another writer"}
	a.RetryAfter = durationpb.New(s.cfg.RetryAfter)
	return a
}

// statusWriteAttempts bounds how often one report is tried again after its
// conditional write found the stored status changed. One retry is what a
// late write of the previous stream costs; more means a second writer.
const statusWriteAttempts = 3
