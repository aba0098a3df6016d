// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package heartbeat is the reporter's side of the Report stream: it
// registers the node, renews its lease every lease-duration/4 and reports its
// status on change or every report interval, the kubelet's lease controller
// and node-status loop (spec §4) over one gRPC stream instead of API writes.
//
// The protocol itself (messages, acks, commands, renewal phases, retry and
// reconnect delays) is package stream's; this package drives it with
// goroutines and timers for the one node of this process.
//
// One Client runs one stream at a time. When the stream breaks it reconnects
// with jittered exponential backoff (100ms doubling, capped at 7s, as the
// kubelet's registration backoff), registers again and sends a full status,
// because a new collector knows nothing about what the old one received.
//
// Timing invariants (spec §3, §4): the lease loop and the status loop are
// independent and each fires immediately on (re)connect, then every interval
// plus up to 4% jitter; a status is sent only when nodemodel.StatusChanged
// says so, when asked, or when the report interval (jittered ±50% once after
// a change or restart, spec §4.3) elapsed. The stream transport is behind
// the Stream interface, so the loops are tested with an in-memory stream in
// a synctest bubble.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/internal/podagent"
	"github.com/nodepulse/nodepulse/reporter/stream"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Stream is one Report stream; collectorv1.CollectorService_ReportClient
// satisfies it.
type Stream interface {
	Send(*collectorv1.ReportRequest) error
	Recv() (*collectorv1.ReportResponse, error)
	CloseSend() error
}

// Dialer opens a Report stream bound to ctx: cancelling ctx must end it.
type Dialer func(ctx context.Context) (Stream, error)

// StatusFunc computes the node's status at now, with transitions computed
// against old (the status the control plane has, or the last one sent). It
// must not modify old.
type StatusFunc func(now time.Time, old *nodev1.NodeStatus) *nodev1.NodeStatus

// Config of a Client.
type Config struct {
	// Register is sent as the first message of every stream.
	Register *collectorv1.Register
	// StatusUpdateFrequency is how often the status is computed (10s).
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is how often an unchanged status is still sent
	// (5m). It must be ≥ StatusUpdateFrequency.
	StatusReportFrequency time.Duration
	// LeaseDurationSeconds is asserted on every renewal (40); renewals go
	// out every quarter of it, so three can be lost before the lease
	// expires.
	LeaseDurationSeconds int32
	// RegisterTimeout bounds the wait for the Register ack.
	RegisterTimeout time.Duration
	// LeaveTimeout bounds the wait for the Leaving ack at shutdown.
	LeaveTimeout time.Duration
	// BackoffInitial and BackoffMax override the reconnect backoff (tests).
	BackoffInitial, BackoffMax time.Duration
	// Pods, when set, makes the reporter its node's kubelet for the pods
	// bound to it: the Register asks for them (pod_sync), and the agent's
	// writes are sent on the stream (pods.go).
	Pods *podagent.Agent
}

// DefaultConfig has the kubelet defaults.
func DefaultConfig() Config {
	return Config{
		StatusUpdateFrequency: 10 * time.Second,
		StatusReportFrequency: 5 * time.Minute,
		LeaseDurationSeconds:  40,
		RegisterTimeout:       stream.RegisterTimeout,
		LeaveTimeout:          2 * time.Second,
		BackoffInitial:        stream.BackoffInitial,
		BackoffMax:            stream.BackoffMax,
	}
}

// Validate checks the timing constraints.
func (c *Config) Validate() error {
	switch {
	case c.Register == nil || c.Register.NodeName == "":
		return errors.New("heartbeat: no node name to register")
	case c.StatusUpdateFrequency <= 0:
		return fmt.Errorf("node-status-update-frequency must be > 0, got %s", c.StatusUpdateFrequency)
	case c.StatusReportFrequency < c.StatusUpdateFrequency:
		return fmt.Errorf("node-status-report-frequency (%s) must be ≥ node-status-update-frequency (%s)", c.StatusReportFrequency, c.StatusUpdateFrequency)
	case c.LeaseDurationSeconds <= 0:
		return fmt.Errorf("node-lease-duration-seconds must be > 0, got %d", c.LeaseDurationSeconds)
	}
	return nil
}

// RenewInterval is lease duration / 4 (spec §3).
func (c *Config) RenewInterval() time.Duration {
	return time.Duration(c.LeaseDurationSeconds) * time.Second / 4
}

// Client runs the Report stream of one node.
type Client struct {
	cfg     Config
	lg      *zap.Logger
	dial    Dialer
	status  StatusFunc
	metrics *Metrics

	registered atomic.Bool
	// fastDone is set once the startup fast path finished (once per process,
	// as in the kubelet).
	fastDone  bool
	startedAt time.Time
	// reportDue outlives sessions, as the kubelet's lastStatusReportTime
	// outlives API server connections (spec §4.2 step 5): a reconnect is
	// no reason to report an unchanged status. Zero until the first
	// report. Only the session goroutine touches it, one session at a time.
	reportDue time.Time
	// hint is the collector the last Reconnect named: the next stream is
	// opened there if the connection can (grpcclient.Prefer), once only,
	// so a stale hint cannot pin the node anywhere.
	hint string
}

// New returns a client. metrics may be nil.
func New(cfg Config, lg *zap.Logger, dial Dialer, status StatusFunc, metrics *Metrics) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RegisterTimeout <= 0 {
		cfg.RegisterTimeout = stream.RegisterTimeout
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = 2 * time.Second
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Client{cfg: cfg, lg: lg.Named("heartbeat").With(zap.String("node", cfg.Register.NodeName)),
		dial: dial, status: status, metrics: metrics}, nil
}

// Ready returns nil once the node has been registered at least once (the
// reporter's /readyz).
func (c *Client) Ready() error {
	if c.registered.Load() {
		return nil
	}
	return errors.New("not registered with a collector yet")
}

// errReconnect ends a session on the collector's Reconnect command.
var errReconnect = errors.New("collector asked to reconnect")

// Run keeps a stream open until ctx is done, then sends Leaving and returns
// nil. It returns an error only for a configuration problem.
func (c *Client) Run(ctx context.Context) error {
	c.startedAt = time.Now()
	backoff := stream.NewBackoff(c.cfg.BackoffInitial, c.cfg.BackoffMax)
	for {
		registered, err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			backoff.Registered()
		}
		if errors.Is(err, errReconnect) {
			c.lg.Info("reconnecting on collector request")
			continue
		}
		if registered && nodeDeleted(err) {
			// Upstream's kubelet cannot register again until it is
			// restarted; the reporter does at once (pods.go).
			c.lg.Warn("node object was deleted; registering again", zap.Error(err))
			c.metrics.Reconnects.Inc()
			continue
		}
		// A refusing collector may name one with room: the next attempt,
		// after the backoff it asks for, prefers it (once).
		c.hint = stream.RefusalHint(err)
		wait := backoff.Next(err)
		c.lg.Warn("report stream ended, reconnecting", zap.Error(err), zap.Duration("backoff", wait))
		c.metrics.Reconnects.Inc()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// pending is a request awaiting its ack.
type pending struct {
	kind   string // "lease", "status", "leaving", "pod"
	sentAt time.Time
	podKey string // the pod a "pod" write is for
}

// session is one stream's state. Only the session goroutine touches it; the
// receive goroutine hands responses over a channel.
type session struct {
	c      *Client
	stream Stream
	recv   <-chan recvResult // the reader goroutine's results; it alone calls Recv
	// sess is the stream's protocol state (sequence numbers, renewal
	// phase, slow-down, empty renewals) from the Register's ack on.
	sess stream.Session
	acks map[uint64]pending

	old       *nodev1.NodeStatus // status as last sent (or as the control plane had it)
	sentOnce  bool
	reportDue time.Time

	leaseT, statusT *time.Timer
	podT            *time.Timer // the pod agent's next wake (nil without one)
	fastT           *time.Timer
	reconnectT      *time.Timer
}

type recvResult struct {
	resp *collectorv1.ReportResponse
	err  error
}

// session runs one stream: register, then heartbeat until the stream breaks,
// the collector asks to reconnect, or ctx ends (then it leaves). registered
// says whether the Register was acknowledged.
func (c *Client) session(ctx context.Context) (registered bool, err error) {
	// The stream outlives ctx by the Leaving exchange, so it gets its own
	// context, cancelled when the session ends.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	dctx, pref := grpcclient.Prefer(sctx, c.hint)
	c.hint = ""
	st, err := c.dial(dctx)
	if pref != nil {
		result := "unknown"
		if pref.Followed() {
			result = "followed"
		}
		c.metrics.Hints.WithLabelValues(result).Inc()
	}
	if err != nil {
		return false, fmt.Errorf("open report stream: %w", err)
	}
	recv := make(chan recvResult, 16)
	go func() {
		for {
			resp, err := st.Recv()
			select {
			case recv <- recvResult{resp, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	s := &session{c: c, stream: st, recv: recv, acks: map[uint64]pending{}}
	if c.cfg.Pods != nil {
		s.podT = time.NewTimer(time.Hour)
		s.podT.Stop()
		defer s.podT.Stop()
	}
	ack, err := s.register(ctx, recv)
	if err != nil {
		return false, err
	}
	c.registered.Store(true)
	c.metrics.Connected.Set(1)
	defer c.metrics.Connected.Set(0)
	c.lg.Info("registered", zap.String("collector", ack.GetCollectorId()),
		zap.String("uid", ack.GetNode().GetMetadata().GetUid()))
	// Transitions are computed against what the control plane shows (which
	// may carry the monitor's Unknown overrides), not against our memory.
	s.old = proto.CloneOf(ack.GetNode().GetStatus())
	s.trustStored(time.Now())
	var badPhase bool
	if s.sess, badPhase = stream.Open(ack); badPhase {
		c.lg.Warn("collector sent a renewal phase outside [0, 1); renewing on jittered intervals", zap.Float64("renew_phase", ack.GetRenewPhase()))
	}
	if c.cfg.Pods != nil {
		// The pods are unknown until the collector's first PodSync.
		c.cfg.Pods.Reset(ack.GetNode().GetMetadata().GetUid())
	}
	return true, s.loop(ctx, recv)
}

// send numbers req and sends it.
func (s *session) send(kind string, req *collectorv1.ReportRequest) error {
	seq := s.sess.Stamp(req)
	s.acks[seq] = pending{kind: kind, sentAt: time.Now()}
	return s.write(kind, req)
}

func (s *session) write(kind string, req *collectorv1.ReportRequest) error {
	if err := s.stream.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			err = s.endedWith(err)
		}
		return fmt.Errorf("send %s: %w", kind, err)
	}
	return nil
}

// endedWith returns the status the server ended the stream with. grpc-go's
// Send says only io.EOF when the server has already finished the stream (a
// refused certificate, a drained collector); the status itself arrives
// through Recv, which the reader goroutine owns, so wait briefly for it.
// Without this a refusal would be logged and retried as a bare "EOF".
func (s *session) endedWith(sendErr error) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case r := <-s.recv:
			if r.err != nil {
				return r.err
			}
			// An ack or command sent before the end: the stream is over,
			// so it no longer matters.
		case <-t.C:
			return sendErr
		}
	}
}

func (s *session) register(ctx context.Context, recv <-chan recvResult) (*collectorv1.Ack, error) {
	c := s.c
	s.acks[1] = pending{kind: "register", sentAt: time.Now()}
	reg := proto.CloneOf(c.cfg.Register)
	reg.PodSync = c.cfg.Pods != nil
	if err := s.write("register", stream.RegisterRequest(reg)); err != nil {
		return nil, err
	}
	t := time.NewTimer(c.cfg.RegisterTimeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = s.stream.CloseSend()
			return nil, ctx.Err()
		case <-t.C:
			return nil, fmt.Errorf("no register ack within %s", c.cfg.RegisterTimeout)
		case r := <-recv:
			if r.err != nil {
				return nil, fmt.Errorf("register: %w", r.err)
			}
			rr := stream.ReadRegisterReply(r.resp, c.cfg.RegisterTimeout)
			switch {
			case rr.Queued:
				t.Reset(rr.Wait)
				continue
			case rr.Ack == nil:
				continue
			}
			delete(s.acks, 1)
			if rr.Err != nil {
				return nil, rr.Err
			}
			return rr.Ack, nil
		}
	}
}

// loop is the heartbeat proper.
func (s *session) loop(ctx context.Context, recv <-chan recvResult) error {
	c := s.c
	// Both loops fire at once on (re)connect: the lease proves liveness to
	// the new collector and the full status tells it what we look like.
	s.leaseT = time.NewTimer(0)
	s.statusT = time.NewTimer(0)
	defer s.leaseT.Stop()
	defer s.statusT.Stop()
	var fastC <-chan time.Time
	if !c.fastDone {
		s.fastT = time.NewTimer(stream.FastStartupPeriod)
		defer s.fastT.Stop()
		fastC = s.fastT.C
	}
	var reconnectC <-chan time.Time
	var podC <-chan time.Time
	if s.podT != nil {
		podC = s.podT.C
	}
	for {
		select {
		case <-ctx.Done():
			return s.leave(recv)
		case <-s.leaseT.C:
			if err := s.renew(); err != nil {
				return err
			}
			s.leaseT.Reset(s.sess.NextRenewal(time.Now(), c.cfg.RenewInterval()))
		case <-s.statusT.C:
			if err := s.tick(false, "tick"); err != nil {
				return err
			}
			s.statusT.Reset(s.sess.StatusInterval(c.cfg.StatusUpdateFrequency))
		case <-fastC:
			done, err := s.fastStartup()
			if err != nil {
				return err
			}
			if done {
				c.fastDone = true
				fastC = nil
			} else {
				s.fastT.Reset(stream.FastStartupPeriod)
			}
		case <-reconnectC:
			_ = s.stream.CloseSend()
			return errReconnect
		case <-podC:
			if err := s.decidePods(); err != nil {
				return err
			}
		case r := <-recv:
			if r.err != nil {
				return fmt.Errorf("receive: %w", r.err)
			}
			if t, err := s.handle(r.resp); err != nil {
				return err
			} else if t != nil {
				reconnectC = t
			}
		}
	}
}

// renew sends a lease renewal (stream.Session.Renewal: empty when it may
// be).
func (s *session) renew() error {
	s.c.metrics.LeaseRenewals.Inc()
	err := s.send("lease", s.sess.Renewal(time.Now(), s.c.cfg.LeaseDurationSeconds, nil))
	if err == nil {
		s.sess.Renewed()
	}
	return err
}

// trustStored counts a report as this session's last one, so that a
// reconnect sends a status only if it changed or its period is up
// (stream.ResumeReports). The status is still compared with the stored one
// before anything is skipped (tick): a stored status that differs, such as
// one with the monitor's Unknown overrides, is sent at once; a period
// already up is reported at once by the first tick.
func (s *session) trustStored(now time.Time) {
	c := s.c
	if due, ok := stream.ResumeReports(c.reportDue, s.old, now, c.cfg.StatusReportFrequency); ok {
		s.sentOnce, s.reportDue = true, due
	}
}

// tick computes the status and sends it when it changed, when forced, or
// when the report interval elapsed (spec §4.2 step 5).
func (s *session) tick(force bool, why string) error {
	c := s.c
	now := time.Now()
	st := c.status(now, s.old)
	changed := nodemodel.StatusChanged(s.old, st)
	due := !s.sentOnce || !now.Before(s.reportDue)
	if !changed && !force && !due {
		return nil
	}
	reason := "periodic"
	switch {
	case !s.sentOnce:
		reason = "connect"
	case force:
		reason = why
	case changed:
		reason = "changed"
	}
	return s.sendStatus(now, st, changed || !s.sentOnce, reason)
}

func (s *session) sendStatus(now time.Time, st *nodev1.NodeStatus, jitterNext bool, reason string) error {
	c := s.c
	if err := s.send("status", stream.StatusRequest(st)); err != nil {
		return err
	}
	c.metrics.StatusReports.WithLabelValues(reason).Inc()
	if s.sentOnce && nodemodel.StatusChanged(s.old, st) {
		c.lg.Info("node status changed", zap.String("ready", nodemodel.ConditionStatus(st.GetConditions(), nodemodel.Ready)),
			zap.String("reason", reason))
	}
	s.old = st
	s.sentOnce = true
	s.reportDue = now.Add(stream.ReportPeriod(c.cfg.StatusReportFrequency, jitterNext))
	c.reportDue = s.reportDue
	return nil
}

// fastStartup is spec §4.4: until Ready=True has been sent, poll every
// 100ms and send as soon as the status changed and Ready is not False.
func (s *session) fastStartup() (done bool, err error) {
	c := s.c
	if nodemodel.ConditionStatus(s.old.GetConditions(), nodemodel.Ready) == nodemodel.True && s.sentOnce {
		return true, nil
	}
	now := time.Now()
	if now.Sub(c.startedAt) > stream.FastStartupTimeout {
		c.lg.Warn("Node not becoming ready in time after startup")
		return true, nil
	}
	st := c.status(now, s.old)
	if nodemodel.StatusChanged(s.old, st) && nodemodel.ConditionStatus(st.GetConditions(), nodemodel.Ready) != nodemodel.False {
		return false, s.sendStatus(now, st, true, "startup")
	}
	return false, nil
}

// handle processes one response; it returns a timer channel when the
// collector asked to reconnect.
func (s *session) handle(resp *collectorv1.ReportResponse) (<-chan time.Time, error) {
	c := s.c
	switch m := resp.GetMessage().(type) {
	case *collectorv1.ReportResponse_Ack:
		ack := m.Ack
		p, ok := s.acks[ack.GetSeq()]
		if !ok {
			c.lg.Debug("ack for unknown seq", zap.Uint64("seq", ack.GetSeq()))
			return nil, nil
		}
		delete(s.acks, ack.GetSeq())
		c.metrics.AckLatency.WithLabelValues(p.kind).Observe(time.Since(p.sentAt).Seconds())
		if e := ack.GetError(); e != nil {
			c.metrics.AckErrors.WithLabelValues(p.kind, codes.Code(e.GetCode()).String()).Inc()
			c.lg.Warn("collector refused a report", zap.String("kind", p.kind), zap.Uint64("seq", ack.GetSeq()),
				zap.Stringer("code", codes.Code(e.GetCode())), zap.String("field", e.GetField()), zap.String("message", e.GetMessage()))
			if codes.Code(e.GetCode()) == codes.InvalidArgument {
				// Refused for what it said (a time no clock reads, such
				// as one before 1970, or a value out of bounds): the next
				// renewal and the next status tick, computed afresh, are
				// the retry, at the renewal and status intervals.
				switch p.kind {
				case "lease":
					s.sess.RenewalRefused()
				case "status":
					s.sentOnce = false
				}
			}
		}
		if p.kind == "pod" {
			return nil, s.podAcked(p, ack)
		}
		if d, ok := stream.RetryAfter(ack); ok {
			c.lg.Info("collector asked to retry later", zap.String("kind", p.kind), zap.Duration("retry_after", d))
			switch p.kind {
			case "lease":
				resetTimer(s.leaseT, d)
			case "status":
				// Resend the full status then, whether or not it changed.
				s.sentOnce = false
				resetTimer(s.statusT, d)
			}
		}
	case *collectorv1.ReportResponse_PodSync:
		return nil, s.podSync(m.PodSync)
	case *collectorv1.ReportResponse_Command:
		cmd := stream.ReadCommand(m.Command)
		switch cmd.Kind {
		case stream.CmdReportStatus:
			c.lg.Info("collector requested a status report", zap.String("reason", cmd.Reason))
			return nil, s.tick(true, "requested")
		case stream.CmdSlowDown:
			s.sess.SlowDown(cmd.SlowDown)
			minLease, minStatus := s.sess.SlowedDown()
			c.lg.Info("collector asked to slow down", zap.Duration("min_lease_interval", minLease),
				zap.Duration("min_status_interval", minStatus))
			if s.sess.LeaseAtRisk(c.cfg.RenewInterval()) {
				c.lg.Warn("slow-down interval risks lease expiry", zap.Duration("min_lease_interval", minLease))
			}
		case stream.CmdReconnect:
			c.lg.Info("collector asked to reconnect", zap.String("reason", cmd.Reason), zap.Duration("after", cmd.After),
				zap.String("preferred", cmd.PreferredAddress))
			c.hint = cmd.PreferredAddress
			if s.reconnectT == nil {
				s.reconnectT = time.NewTimer(cmd.After)
			} else {
				resetTimer(s.reconnectT, cmd.After)
			}
			return s.reconnectT.C, nil
		}
	}
	return nil, nil
}

// leave sends Leaving and waits briefly for its ack, so the collector can
// tell a deliberate stop from a crash (LEAVING, not DETACHED, on the feed).
func (s *session) leave(recv <-chan recvResult) error {
	c := s.c
	defer func() { _ = s.stream.CloseSend() }()
	if err := s.send("leaving", stream.LeavingRequest("reporter shutting down")); err != nil {
		c.lg.Warn("could not send leaving", zap.Error(err))
		return nil
	}
	leaveSeq := s.sess.Seq()
	t := time.NewTimer(c.cfg.LeaveTimeout)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.lg.Warn("no ack for leaving", zap.Duration("waited", c.cfg.LeaveTimeout))
			return nil
		case r := <-recv:
			if r.err != nil {
				return nil
			}
			if a := r.resp.GetAck(); a != nil && a.GetSeq() == leaveSeq {
				c.lg.Info("left the collector")
				return nil
			}
		}
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	if t == nil {
		return
	}
	t.Stop()
	t.Reset(d)
}
