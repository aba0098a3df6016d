package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

// slowDownEvery: a throttled node is sent at most one SlowDown per this.
const slowDownEvery = 30 * time.Second

// loop serves an attached stream until it ends. It is the only goroutine
// that calls Send after registration; the status worker and commands reach
// it through st.out.
func (s *Server) loop(ctx context.Context, srv collectorv1.CollectorService_ReportServer, st *stream, sw *statusWorker,
	recv <-chan *collectorv1.ReportRequest, recvErr <-chan error) error {
	workerCtx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() { defer close(workerDone); sw.run(workerCtx) }()
	defer func() { stopWorker(); <-workerDone }()

	lim := rate.NewLimiter(rate.Limit(s.cfg.MessagesPerSecond), s.cfg.MessageBurst)
	var lastSeq uint64
	var lastRenew time.Time
	var lastSlowDown time.Time
	renewed := false
	ack := func(a *collectorv1.Ack) error {
		a.CollectorId = s.cfg.CollectorID
		return srv.Send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}})
	}
	refuse := func(seq uint64, code codes.Code, field, msg string, retry time.Duration) error {
		a := &collectorv1.Ack{Seq: seq, Error: &collectorv1.Error{Code: uint32(code), Field: field, Message: msg}}
		if retry > 0 {
			a.RetryAfter = durationpb.New(retry)
		}
		return ack(a)
	}

	for {
		var m *collectorv1.ReportRequest
		select {
		case <-ctx.Done():
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errSuperseded):
				return status.Errorf(codes.Aborted, "node %q opened a newer stream on this collector", st.name)
			case errors.Is(cause, errDrained):
				return status.Error(codes.Unavailable, "collector drained: reconnect to another collector")
			default:
				return status.FromContextError(cause).Err()
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil // the reporter closed its side on purpose
			}
			return endErr(err)
		case out := <-st.out:
			if err := srv.Send(out); err != nil {
				return err
			}
			continue
		case m = <-recv:
		}

		seq := m.GetSeq()
		kind := kindOf(m)
		if seq <= lastSeq {
			s.m.messages.WithLabelValues(kind, "invalid").Inc()
			s.m.validation.WithLabelValues("seq").Inc()
			if err := refuse(seq, codes.InvalidArgument, "seq", fmt.Sprintf("%d is not greater than the previous seq %d", seq, lastSeq), 0); err != nil {
				return err
			}
			continue
		}
		lastSeq = seq
		if !lim.Allow() {
			s.m.messages.WithLabelValues(kind, "rate_limited").Inc()
			retry := time.Duration(float64(time.Second) / s.cfg.MessagesPerSecond)
			if err := refuse(seq, codes.ResourceExhausted, "", fmt.Sprintf("node %q exceeds %g messages/s (burst %d)", st.name, s.cfg.MessagesPerSecond, s.cfg.MessageBurst), retry); err != nil {
				return err
			}
			if now := s.now(); now.Sub(lastSlowDown) >= slowDownEvery {
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
			now := s.now()
			if l := validation.LeaseRenewal(msg.Lease, lastRenew, now, s.cfg.Limits); len(l) > 0 {
				s.invalid(kind, l)
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
			s.m.messages.WithLabelValues(kind, "ok").Inc()
			if err := ack(&collectorv1.Ack{Seq: seq, Durable: false}); err != nil {
				return err
			}
		case *collectorv1.ReportRequest_Status:
			if l := validation.StatusReport(msg.Status, s.now(), s.cfg.Limits); len(l) > 0 {
				s.invalid(kind, l)
				if err := refuse(seq, codes.InvalidArgument, l[0].Field, l[0].Reason, 0); err != nil {
					return err
				}
				continue
			}
			if !s.p.Available() {
				// Refuse at once rather than queue: the reporter keeps the
				// status and resends it; leases keep flowing meanwhile.
				s.m.messages.WithLabelValues(kind, "unavailable").Inc()
				if err := refuse(seq, codes.Unavailable, "", "etcd unavailable: status not stored", s.cfg.RetryAfter); err != nil {
					return err
				}
				continue
			}
			select {
			case sw.jobs <- statusJob{seq: seq, status: msg.Status.GetStatus()}:
			default:
				s.m.messages.WithLabelValues(kind, "busy").Inc()
				if err := refuse(seq, codes.ResourceExhausted, "", "too many status reports waiting for etcd on this stream", s.cfg.RetryAfter); err != nil {
					return err
				}
			}
		case *collectorv1.ReportRequest_Leaving:
			if l := validation.Leaving(msg.Leaving); len(l) > 0 {
				s.invalid(kind, l)
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
			s.m.messages.WithLabelValues(kind, "ok").Inc()
			if err := ack(&collectorv1.Ack{Seq: seq}); err != nil {
				return err
			}
		case *collectorv1.ReportRequest_Register:
			s.m.messages.WithLabelValues(kind, "failed_precondition").Inc()
			if err := refuse(seq, codes.FailedPrecondition, "register", "the stream is already registered; open a new stream to register again", 0); err != nil {
				return err
			}
		default:
			s.m.messages.WithLabelValues(kind, "invalid").Inc()
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

type statusJob struct {
	seq    uint64
	status *nodev1.NodeStatus
}

// statusWorker writes one stream's status reports in order. It keeps the
// copy that is stored in etcd, so an unchanged report costs no write.
type statusWorker struct {
	s      *Server
	st     *stream
	stored *nodev1.NodeStatus
	jobs   chan statusJob
}

func (w *statusWorker) run(ctx context.Context) {
	for {
		var j statusJob
		select {
		case <-ctx.Done():
			return
		case j = <-w.jobs:
		}
		a := &collectorv1.Ack{Seq: j.seq, CollectorId: w.s.cfg.CollectorID}
		switch {
		case w.stored != nil && !nodemodel.StatusChanged(w.stored, j.status):
			a.Durable = true
			w.s.m.messages.WithLabelValues("status", "unchanged").Inc()
		default:
			err := w.s.p.WriteStatus(ctx, w.st.name, j.status)
			switch {
			case err == nil:
				w.stored = j.status
				a.Durable = true
				w.s.m.messages.WithLabelValues("status", "ok").Inc()
			case ctx.Err() != nil:
				return
			case errors.Is(err, persist.ErrBusy):
				w.s.m.messages.WithLabelValues("status", "busy").Inc()
				a.Error = &collectorv1.Error{Code: uint32(codes.ResourceExhausted), Message: "collector write queue full: status not stored"}
				a.RetryAfter = durationpb.New(w.s.cfg.RetryAfter)
			default:
				w.s.m.messages.WithLabelValues("status", "unavailable").Inc()
				a.Error = &collectorv1.Error{Code: uint32(codes.Unavailable), Message: "status not stored: " + err.Error()}
				a.RetryAfter = durationpb.New(w.s.cfg.RetryAfter)
			}
		}
		select {
		case w.st.out <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}:
		case <-ctx.Done():
			return
		}
	}
}
