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

// loop serves an attached stream until the reporter ends it or a message
// ends it; server-side cancellation is the handler's (Report). It runs on
// the reader goroutine and processes each message inline; status writes
// go to the stream's status writer.
func (s *Server) loop(st *stream) error {
	lim := bucket{tokens: float64(s.cfg.MessageBurst), last: s.now()}
	var lastSeq uint64
	var lastRenew time.Time
	var lastSlowDown time.Time
	renewed := false
	ack := func(a *collectorv1.Ack) error {
		a.CollectorId = s.cfg.CollectorID
		return st.send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}})
	}
	refuse := func(seq uint64, code codes.Code, field, msg string, retry time.Duration) error {
		a := &collectorv1.Ack{Seq: seq, Error: &collectorv1.Error{Code: uint32(code), Field: field, Message: msg}}
		if retry > 0 {
			a.RetryAfter = durationpb.New(retry)
		}
		return ack(a)
	}

	for {
		m, err := st.srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the reporter closed its side on purpose
			}
			return endErr(err)
		}
		now := s.now()
		seq := m.GetSeq()
		if seq <= lastSeq {
			kind := kindOf(m)
			s.m.messages.WithLabelValues(kind, "invalid").Inc()
			s.m.validation.WithLabelValues("seq").Inc()
			if err := refuse(seq, codes.InvalidArgument, "seq", fmt.Sprintf("%d is not greater than the previous seq %d", seq, lastSeq), 0); err != nil {
				return err
			}
			continue
		}
		lastSeq = seq
		if !lim.allow(now, s.cfg.MessagesPerSecond, s.cfg.MessageBurst) {
			s.m.messages.WithLabelValues(kindOf(m), "rate_limited").Inc()
			retry := time.Duration(float64(time.Second) / s.cfg.MessagesPerSecond)
			if err := refuse(seq, codes.ResourceExhausted, "", fmt.Sprintf("node %q exceeds %g messages/s (burst %d)", st.name, s.cfg.MessagesPerSecond, s.cfg.MessageBurst), retry); err != nil {
				return err
			}
			if now.Sub(lastSlowDown) >= slowDownEvery {
				lastSlowDown = now
				// Ask for at least the default intervals (lease every 10s,
				// status every 10s), which fit the bucket many times over.
				st.push(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
					Command: &collectorv1.Command_SlowDown{SlowDown: &collectorv1.SlowDown{
						MinLeaseInterval: durationpb.New(10 * time.Second), MinStatusInterval: durationpb.New(10 * time.Second)}}}}})
			}
			continue
		}

		switch msg := m.GetMessage().(type) {
		case *collectorv1.ReportRequest_Lease:
			if l := validation.LeaseRenewal(msg.Lease, lastRenew, now, s.cfg.Limits); len(l) > 0 {
				s.invalid("lease", l)
				if err := refuse(seq, codes.InvalidArgument, l[0].Field, l[0].Reason, 0); err != nil {
					return err
				}
				continue
			}
			lastRenew = msg.Lease.GetRenewTime().AsTime()
			if !s.table.Renew(st.name, st.gen, lastRenew, msg.Lease.GetLeaseDurationSeconds()) {
				return status.Errorf(codes.Aborted, "node %q is no longer attached to this stream", st.name)
			}
			if !renewed {
				renewed = true
				s.p.Attach(st.name, st.gen)
			}
			s.m.leaseOK.Inc()
			if err := s.ackLease(st, seq); err != nil {
				return err
			}
		case *collectorv1.ReportRequest_Status:
			if l := validation.StatusReport(msg.Status, now, s.cfg.Limits); len(l) > 0 {
				s.invalid("status", l)
				if err := refuse(seq, codes.InvalidArgument, l[0].Field, l[0].Reason, 0); err != nil {
					return err
				}
				continue
			}
			if !s.p.Available() {
				// Refuse at once rather than queue: the reporter keeps the
				// status and resends it; leases keep flowing meanwhile.
				s.m.statusUnavailable.Inc()
				if err := refuse(seq, codes.Unavailable, "", "etcd unavailable: status not stored", s.cfg.RetryAfter); err != nil {
					return err
				}
				continue
			}
			if !s.submitStatus(st, seq, msg.Status.GetStatus()) {
				s.m.statusBusy.Inc()
				if err := refuse(seq, codes.ResourceExhausted, "", "too many status reports waiting for etcd on this stream", s.cfg.RetryAfter); err != nil {
					return err
				}
			}
		case *collectorv1.ReportRequest_Leaving:
			if l := validation.Leaving(msg.Leaving); len(l) > 0 {
				s.invalid("leaving", l)
				if err := refuse(seq, codes.InvalidArgument, l[0].Field, l[0].Reason, 0); err != nil {
					return err
				}
				continue
			}
			s.table.Leaving(st.name, st.gen)
			if renewed {
				s.p.CheckpointNow(st.name, st.gen)
			}
			s.lg.Info("node leaving", zapNode(st.name), zapReason(msg.Leaving.GetReason()))
			s.m.leavingOK.Inc()
			if err := ack(&collectorv1.Ack{Seq: seq}); err != nil {
				return err
			}
		case *collectorv1.ReportRequest_Register:
			s.m.messages.WithLabelValues("register", "failed_precondition").Inc()
			if err := refuse(seq, codes.FailedPrecondition, "register", "the stream is already registered; open a new stream to register again", 0); err != nil {
				return err
			}
		default:
			s.m.messages.WithLabelValues(kindOf(m), "invalid").Inc()
			s.m.validation.WithLabelValues("message").Inc()
			if err := refuse(seq, codes.InvalidArgument, "message", "must be one of register, lease, status, leaving", 0); err != nil {
				return err
			}
		}
	}
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
	}
	return "unknown"
}

// writeStatus writes one status report unless the stored status already
// equals it, and returns its ack; nil when the stream ended meanwhile.
func (s *Server) writeStatus(st *stream, j statusJob) *collectorv1.Ack {
	a := &collectorv1.Ack{Seq: j.seq, CollectorId: s.cfg.CollectorID}
	d, ok := digestOf(j.status)
	if ok && st.hasStored && d == st.stored {
		a.Durable = true
		s.m.statusUnchanged.Inc()
		return a
	}
	err := s.p.WriteStatus(st.ctx, st.name, j.status)
	switch {
	case err == nil:
		st.stored, st.hasStored = d, ok
		a.Durable = true
		s.m.statusOK.Inc()
	case st.ctx.Err() != nil:
		return nil
	case errors.Is(err, persist.ErrBusy):
		// Not queued: etcd still holds what it held.
		s.m.statusBusy.Inc()
		a.Error = &collectorv1.Error{Code: uint32(codes.ResourceExhausted), Message: "collector write queue full: status not stored"}
		a.RetryAfter = durationpb.New(s.cfg.RetryAfter)
	default:
		// A failed commit may still have landed: forget the stored copy,
		// so the next report is written whatever it says.
		st.hasStored = false
		s.m.statusUnavailable.Inc()
		a.Error = &collectorv1.Error{Code: uint32(codes.Unavailable), Message: "status not stored: " + err.Error()}
		a.RetryAfter = durationpb.New(s.cfg.RetryAfter)
	}
	return a
}
