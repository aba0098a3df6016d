// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package feed serves FeedService: the live liveness feed monitors follow
// (WatchLiveness) and command delivery to attached nodes (SendNodeCommand).
//
// One flusher goroutine takes the pending events of the liveness table every
// batch interval and hands the same batch to every subscriber. A subscriber
// has a bounded buffer of batches; one that falls behind is not allowed to
// grow memory: its buffer is dropped and it gets a fresh snapshot instead,
// taken at the same instant as the events it skips, so it stays exactly
// consistent (snapshot=true tells the monitor to replace its view).
package feed

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Config of the feed.
type Config struct {
	CollectorID string
	// BatchInterval: how often pending events are sent. Renewals reach the
	// monitors at most this late.
	BatchInterval time.Duration
	// HeartbeatInterval: the longest gap between batches to one subscriber;
	// empty batches fill quiet periods so a silent feed means a broken one.
	HeartbeatInterval time.Duration
	// SubscriberBuffer: batches buffered per subscriber before it is
	// switched to a fresh snapshot.
	SubscriberBuffer int
	// MaxEventsPerMessage splits large batches (snapshots of 100,000 nodes)
	// into messages that stay well below gRPC message limits.
	MaxEventsPerMessage int
}

// DefaultConfig follows the contract: heartbeat 1s.
func DefaultConfig() Config {
	return Config{BatchInterval: 250 * time.Millisecond, HeartbeatInterval: time.Second, SubscriberBuffer: 64, MaxEventsPerMessage: 5000}
}

// Commander delivers commands to attached nodes (the ingest server).
type Commander interface {
	// Command queues cmd on name's stream; false when name is not attached
	// here or its queue is full.
	Command(name string, cmd *collectorv1.Command) bool
}

type batch struct {
	msgs []*collectorv1.WatchLivenessResponse
}

type subscriber struct {
	watcher  string
	ch       chan batch
	needSnap bool
	lastSent time.Time
}

// Server implements FeedService.
type Server struct {
	collectorv1.UnimplementedFeedServiceServer
	cfg   Config
	lg    *zap.Logger
	table *live.Table
	cmd   Commander

	mu    sync.Mutex
	subs  map[*subscriber]struct{}
	taken []live.Event // flush's event buffer, reused from one Take to the next
	// finished is closed by Finish: every WatchLiveness stream sends what is
	// queued for it and ends.
	finished   chan struct{}
	finishOnce sync.Once

	subsGauge prometheus.Gauge
	resyncs   prometheus.Counter
	events    prometheus.Counter
}

// New builds the feed; Run flushes it.
func New(cfg Config, table *live.Table, cmd Commander, lg *zap.Logger, reg prometheus.Registerer) (*Server, error) {
	if cfg.BatchInterval <= 0 || cfg.HeartbeatInterval < cfg.BatchInterval || cfg.SubscriberBuffer < 2 || cfg.MaxEventsPerMessage <= 0 {
		return nil, errors.New("feed: batch interval must be > 0 and <= heartbeat interval, buffer >= 2, max events > 0")
	}
	s := &Server{cfg: cfg, lg: lg.Named("feed"), table: table, cmd: cmd, subs: map[*subscriber]struct{}{}, finished: make(chan struct{}),
		subsGauge: metric.Gauge("nodepulse_collector_feed_subscribers", "Open WatchLiveness feeds."),
		resyncs:   metric.Counter("nodepulse_collector_feed_resyncs_total", "Snapshots sent to subscribers that fell behind (or after event overflow)."),
		events:    metric.Counter("nodepulse_collector_feed_events_total", "Liveness events published."),
	}
	if err := metric.Register(reg, s.subsGauge, s.resyncs, s.events); err != nil {
		return nil, err
	}
	return s, nil
}

// Run flushes batches until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	run.Every(ctx, s.cfg.BatchInterval, func() { s.flush(time.Now()) })
	return nil
}

func (s *Server) flush(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wantSnap := false
	for sub := range s.subs {
		wantSnap = wantSnap || sub.needSnap
	}
	events, snap, overflow := s.table.Take(s.taken, wantSnap, now)
	s.taken = events // messages copies what it needs: reused next flush
	s.events.Add(float64(len(events)))
	var evMsgs, snapMsgs []*collectorv1.WatchLivenessResponse
	if len(events) > 0 {
		evMsgs = s.messages(events, false, now)
	}
	// A snapshot was taken whenever one was asked for or overflow forced
	// one, also of an empty table: a collector that has no node yet (just
	// started, or lost them all) still owes its new subscribers the
	// message that says "replace your view", with no events. Keyed on
	// snap != nil, an empty table sent nothing, and a watcher following a
	// restarted collector never learnt that its view had been replaced.
	if wantSnap || overflow {
		snapMsgs = s.messages(snap, true, now)
	}
	for sub := range s.subs {
		if overflow {
			sub.needSnap = true
		}
		msgs := evMsgs
		if sub.needSnap {
			msgs = snapMsgs
		} else if len(msgs) == 0 {
			if now.Sub(sub.lastSent) < s.cfg.HeartbeatInterval-s.cfg.BatchInterval/2 {
				continue
			}
			msgs = s.messages(nil, false, now)
		}
		select {
		case sub.ch <- batch{msgs: msgs}:
			sub.needSnap = false
			sub.lastSent = now
		default:
			// Too slow: drop what it has not read and resync it from a
			// snapshot at the next flush. Memory stays bounded by the buffer.
			for drained := false; !drained; {
				select {
				case <-sub.ch:
				default:
					drained = true
				}
			}
			sub.needSnap = true
			s.resyncs.Inc()
			s.lg.Warn("feed subscriber too slow; will resend a snapshot", zap.String("watcher", sub.watcher))
		}
	}
}

// eventBytes is a typical event's coded size (a 30-character name):
// the buffer of a message's events is sized for it up front.
const eventBytes = 56

func (s *Server) messages(evs []live.Event, snapshot bool, now time.Time) []*collectorv1.WatchLivenessResponse {
	hb := durationpb.New(s.cfg.HeartbeatInterval)
	sent := timestamppb.New(now)
	var out []*collectorv1.WatchLivenessResponse
	for first := true; first || len(evs) > 0; first = false {
		n := min(len(evs), s.cfg.MaxEventsPerMessage)
		m := &collectorv1.WatchLivenessResponse{CollectorId: s.cfg.CollectorID, Snapshot: snapshot && first, SentTime: sent, HeartbeatInterval: hb}
		if n > 0 {
			// The events, coded once for every subscriber (wire.go).
			m.ProtoReflect().SetUnknown(appendEvents(make([]byte, 0, n*eventBytes), evs[:n]))
		}
		out = append(out, m)
		evs = evs[n:]
	}
	return out
}

// WatchLiveness implements FeedService.
func (s *Server) WatchLiveness(req *collectorv1.WatchLivenessRequest, srv collectorv1.FeedService_WatchLivenessServer) error {
	if len(req.GetWatcher()) > validation.MaxShortTextLength {
		return status.Errorf(codes.InvalidArgument, "watcher: must be no more than %d characters", validation.MaxShortTextLength)
	}
	sub := &subscriber{watcher: req.GetWatcher(), ch: make(chan batch, s.cfg.SubscriberBuffer), needSnap: true}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	s.subsGauge.Inc()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.subsGauge.Dec()
		s.mu.Unlock()
	}()
	s.lg.Info("feed subscriber attached", zap.String("watcher", sub.watcher))
	send := func(b batch) error {
		for _, m := range b.msgs {
			if err := srv.Send(m); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		select {
		case <-srv.Context().Done():
			return nil
		case <-s.finished:
			// The last batch (the final detaches) is queued before finished
			// closes; send it, then end the stream cleanly.
			for {
				select {
				case b := <-sub.ch:
					if err := send(b); err != nil {
						return err
					}
				default:
					return nil
				}
			}
		case b := <-sub.ch:
			if err := send(b); err != nil {
				return err
			}
		}
	}
}

// Finish flushes the pending events one last time and ends every
// WatchLiveness stream, and any opened later, after it has sent what was
// queued. A draining collector calls it once its Report streams are gone:
// watchers then have every detach, and GracefulStop need not wait for
// streams that would otherwise never end (at 100,000 nodes it waited out
// the whole drain timeout for them).
func (s *Server) Finish() {
	s.finishOnce.Do(func() {
		s.flush(time.Now())
		close(s.finished)
	})
}

// SendNodeCommand implements FeedService.
func (s *Server) SendNodeCommand(_ context.Context, req *collectorv1.SendNodeCommandRequest) (*collectorv1.SendNodeCommandResponse, error) {
	if e := validateName(req.GetNodeName()); e != nil {
		return nil, e
	}
	if len(req.GetReportStatusReason()) > validation.MaxShortTextLength || len(req.GetReconnectReason()) > validation.MaxShortTextLength {
		return nil, status.Errorf(codes.InvalidArgument, "command: reason must be no more than %d characters", validation.MaxShortTextLength)
	}
	var cmd *collectorv1.Command
	switch c := req.GetCommand().(type) {
	case *collectorv1.SendNodeCommandRequest_ReportStatusReason:
		cmd = &collectorv1.Command{Command: &collectorv1.Command_ReportStatus{ReportStatus: &collectorv1.ReportStatus{Reason: c.ReportStatusReason}}}
	case *collectorv1.SendNodeCommandRequest_ReconnectReason:
		cmd = &collectorv1.Command{Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{Reason: c.ReconnectReason}}}
	default:
		return nil, status.Error(codes.InvalidArgument, "command: must be set (report_status_reason or reconnect_reason)")
	}
	if !s.cmd.Command(req.GetNodeName(), cmd) {
		return nil, status.Errorf(codes.NotFound, "nodeName: node %q is not attached to this collector", req.GetNodeName())
	}
	return &collectorv1.SendNodeCommandResponse{Delivered: true}, nil
}

func validateName(name string) error {
	if e := validation.NodeName("nodeName", name); e != nil {
		return validation.Status(e)
	}
	return nil
}
