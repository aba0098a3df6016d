// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package heartbeat is the reporter's side of the Report stream: it
// registers the node, renews its lease every lease-duration/4 and reports its
// status on change or every report interval, the kubelet's lease controller
// and node-status loop (spec §4) over one gRPC stream instead of API writes.
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
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
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

// Loop constants from the spec (§3).
const (
	// JitterFactor is the kubelet's loop jitter: each wait is the interval
	// plus up to 4% of it, so a fleet started together spreads out.
	JitterFactor = 0.04
	// FastStartupPeriod and FastStartupTimeout: the kubelet polls for its
	// first Ready status every 100ms and gives up after 120s.
	FastStartupPeriod  = 100 * time.Millisecond
	FastStartupTimeout = 120 * time.Second
	// BackoffInitial and BackoffMax bound the reconnect backoff.
	BackoffInitial = 100 * time.Millisecond
	BackoffMax     = 7 * time.Second
)

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
}

// DefaultConfig has the kubelet defaults.
func DefaultConfig() Config {
	return Config{
		StatusUpdateFrequency: 10 * time.Second,
		StatusReportFrequency: 5 * time.Minute,
		LeaseDurationSeconds:  40,
		RegisterTimeout:       30 * time.Second,
		LeaveTimeout:          2 * time.Second,
		BackoffInitial:        BackoffInitial,
		BackoffMax:            BackoffMax,
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
	// lastReport and reportDue outlive sessions, as the kubelet's
	// lastStatusReportTime outlives API server connections (spec §4.2
	// step 5): a reconnect is no reason to report an unchanged status.
	// Only the session goroutine touches them, one session at a time.
	lastReport, reportDue time.Time
}

// New returns a client. metrics may be nil.
func New(cfg Config, lg *zap.Logger, dial Dialer, status StatusFunc, metrics *Metrics) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RegisterTimeout <= 0 {
		cfg.RegisterTimeout = 30 * time.Second
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = 2 * time.Second
	}
	if cfg.BackoffInitial <= 0 {
		cfg.BackoffInitial = BackoffInitial
	}
	if cfg.BackoffMax < cfg.BackoffInitial {
		cfg.BackoffMax = max(BackoffMax, cfg.BackoffInitial)
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
	backoff := c.cfg.BackoffInitial
	for {
		registered, err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			// A session that got as far as registering proves the path
			// works; the next failure starts the backoff from scratch.
			backoff = c.cfg.BackoffInitial
		}
		if errors.Is(err, errReconnect) {
			c.lg.Info("reconnecting on collector request")
			continue
		}
		wait := ReconnectWait(backoff, err)
		c.lg.Warn("report stream ended, reconnecting", zap.Error(err), zap.Duration("backoff", wait))
		c.metrics.Reconnects.Inc()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.BackoffMax)
	}
}

// Jittered returns a duration in [d/2, d): "equal jitter", so a fleet that
// lost its collector at the same instant does not return in lockstep, while
// the wait still grows with d.
func Jittered(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// MaxRetryDelay caps a collector's retry delay hint, so a wrong hint
// cannot park a node for long.
const MaxRetryDelay = 5 * time.Minute

// RetryDelay is the retry delay a collector attached to the status that
// ended a stream (google.rpc.RetryInfo: an overloaded collector refusing a
// Register says how long its queue needs), capped at MaxRetryDelay; 0 when
// there is none.
func RetryDelay(err error) time.Duration {
	if err == nil {
		return 0
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return min(max(ri.GetRetryDelay().AsDuration(), 0), MaxRetryDelay)
		}
	}
	return 0
}

// QueuedWait is how long to wait for a queued Register's ack from the
// moment the collector said it answers within within (Command.
// register_queued): that plus the reporter's register timeout, the
// collector's estimate capped at MaxRetryDelay.
func QueuedWait(within, registerTimeout time.Duration) time.Duration {
	return min(max(within, 0), MaxRetryDelay) + registerTimeout
}

// RetryJitter is the collector's retry delay d plus up to half of it
// again: a fleet refused at once comes back spread over d/2, not together.
func RetryJitter(d time.Duration) time.Duration {
	return d + rand.N(d/2+1)
}

// ReconnectWait is how long to wait before reconnecting after a session
// ended with err: the jittered backoff, or the collector's retry delay
// (jittered) when it gave a longer one.
func ReconnectWait(backoff time.Duration, err error) time.Duration {
	w := Jittered(backoff)
	if d := RetryDelay(err); d > 0 {
		w = max(w, RetryJitter(d))
	}
	return w
}

// WaitRetryDelay waits the collector's retry delay in err (jittered), if
// any, or until ctx ends.
func WaitRetryDelay(ctx context.Context, err error) {
	d := RetryDelay(err)
	if d <= 0 {
		return
	}
	t := time.NewTimer(RetryJitter(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// nextRenewal is the wait until the next lease renewal: one renew interval
// plus jitter, as the kubelet's lease loop waits, or, when the collector
// assigned a renewal phase, until the next instant of that phase (see
// UntilPhase). A SlowDown longer than the interval overrides the phase.
func (s *session) nextRenewal(now time.Time) time.Duration {
	iv := s.c.cfg.RenewInterval()
	if !s.hasPhase || s.minLease > iv {
		return jitter(max(iv, s.minLease))
	}
	return UntilPhase(now, iv, s.phase)
}

// UntilPhase is the wait from now until the next instant t at least half
// an interval away whose t / interval (Unix time) has fractional part
// phase: a renewal sent on its phase is followed by the next one exactly
// one interval later, and the first one after (re)registration (sent at
// once) by one between half an interval and one and a half intervals
// later. Every process renewing on phase p renews at the same instants of
// its own clock, so a collector that gives the streams of one connection
// one phase receives their renewals together.
func UntilPhase(now time.Time, interval time.Duration, phase float64) time.Duration {
	iv := int64(interval)
	if iv <= 0 {
		return interval
	}
	off := int64(phase * float64(iv))
	from := now.UnixNano() + iv/2
	k := (from - off) / iv
	if k*iv+off <= from {
		k++
	}
	return time.Duration(k*iv + off - now.UnixNano())
}

// jitter returns d plus up to JitterFactor of it (wait.JitterUntil).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + time.Duration(rand.Float64()*JitterFactor*float64(d))
}

// pending is a request awaiting its ack.
type pending struct {
	kind   string // "lease", "status", "leaving"
	sentAt time.Time
}

// session is one stream's state. Only the session goroutine touches it; the
// receive goroutine hands responses over a channel.
type session struct {
	c      *Client
	stream Stream
	recv   <-chan recvResult // the reader goroutine's results; it alone calls Recv
	seq    uint64
	acks   map[uint64]pending

	old        *nodev1.NodeStatus // status as last sent (or as the control plane had it)
	sentOnce   bool
	lastReport time.Time
	reportDue  time.Time

	minLease, minStatus time.Duration
	// phase is the collector's renewal phase (Ack.renew_phase), when
	// hasPhase.
	phase    float64
	hasPhase bool
	// emptyOK: the collector takes empty renewals (Ack.empty_renewals);
	// leased: a LeaseRenewal went out on this stream, so the next renewal
	// may be empty.
	emptyOK, leased bool
	leaseT, statusT *time.Timer
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
	stream, err := c.dial(sctx)
	if err != nil {
		return false, fmt.Errorf("open report stream: %w", err)
	}
	recv := make(chan recvResult, 16)
	go func() {
		for {
			resp, err := stream.Recv()
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
	s := &session{c: c, stream: stream, recv: recv, acks: map[uint64]pending{}}
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
	s.emptyOK = ack.GetEmptyRenewals()
	if ack.RenewPhase != nil {
		if p := ack.GetRenewPhase(); p >= 0 && p < 1 {
			s.phase, s.hasPhase = p, true
		} else {
			c.lg.Warn("collector sent a renewal phase outside [0, 1); renewing on jittered intervals", zap.Float64("renew_phase", p))
		}
	}
	return true, s.loop(ctx, recv)
}

func (s *session) send(kind string, req *collectorv1.ReportRequest) error {
	s.seq++
	if req != &emptyRenewal { // its seq is implied: the previous one's plus one
		req.Seq = s.seq
	}
	s.acks[s.seq] = pending{kind: kind, sentAt: time.Now()}
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
	reg := proto.CloneOf(c.cfg.Register)
	if err := s.send("register", &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Register{Register: reg}}); err != nil {
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
			if q := r.resp.GetCommand().GetRegisterQueued(); q != nil {
				// The collector queued the Register and answers it within
				// q.within: wait that long on top of the register timeout,
				// rather than give up and queue again at the back.
				t.Reset(QueuedWait(q.GetWithin().AsDuration(), c.cfg.RegisterTimeout))
				continue
			}
			ack := r.resp.GetAck()
			if ack == nil || ack.GetSeq() != 1 {
				// Any other command before the register ack means nothing
				// yet.
				continue
			}
			delete(s.acks, 1)
			if e := ack.GetError(); e != nil {
				return nil, fmt.Errorf("register refused: %s %s: %s", codes.Code(e.GetCode()), e.GetField(), e.GetMessage())
			}
			return ack, nil
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
		s.fastT = time.NewTimer(FastStartupPeriod)
		defer s.fastT.Stop()
		fastC = s.fastT.C
	}
	var reconnectC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return s.leave(recv)
		case <-s.leaseT.C:
			if err := s.renew(); err != nil {
				return err
			}
			s.leaseT.Reset(s.nextRenewal(time.Now()))
		case <-s.statusT.C:
			if err := s.tick(false, "tick"); err != nil {
				return err
			}
			s.statusT.Reset(jitter(max(c.cfg.StatusUpdateFrequency, s.minStatus)))
		case <-fastC:
			done, err := s.fastStartup()
			if err != nil {
				return err
			}
			if done {
				c.fastDone = true
				fastC = nil
			} else {
				s.fastT.Reset(FastStartupPeriod)
			}
		case <-reconnectC:
			_ = s.stream.CloseSend()
			return errReconnect
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

// renew sends a lease renewal: an empty message once the stream carried
// a LeaseRenewal and the collector takes empty ones (collector.proto); the
// collector dates it on arrival and keeps the lease duration it was sent.
func (s *session) renew() error {
	s.c.metrics.LeaseRenewals.Inc()
	if s.emptyOK && s.leased {
		return s.send("lease", &emptyRenewal)
	}
	err := s.send("lease", &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
		RenewTime:            timestamppb.Now(),
		LeaseDurationSeconds: s.c.cfg.LeaseDurationSeconds,
	}}})
	s.leased = s.leased || err == nil
	return err
}

// emptyRenewal is the empty ReportRequest that renews a lease; never
// written to, it stays empty.
var emptyRenewal collectorv1.ReportRequest

// trustStored counts a report as this session's last one, so that a
// reconnect (the collector restarted, the connection broke) sends a status
// only if it changed, or when the report period is up, as it would have on
// the old stream; the renewal sent at once tells the new collector the node
// is alive. That report is this process's own last one, with the period
// it was given (jittered after a change), when it made one; else the stored
// status served at registration when its heartbeat is younger than the
// report frequency (the process restarted).
// (Every reporter of a restarted collector sending its unchanged status at
// once cost that collector a seventh of its CPU while it re-registered the
// fleet. The stored heartbeat alone did not prevent it: collectors do not
// write unchanged reports, so it is the time of the last change, usually
// older than the report frequency.) The status is still compared with the
// stored one before anything is skipped (tick): a stored status that
// differs, such as one with the monitor's Unknown overrides, is sent at
// once.
func (s *session) trustStored(now time.Time) {
	c := s.c
	freq := c.cfg.StatusReportFrequency
	if !c.lastReport.IsZero() {
		// A period already up is reported at once by the first tick.
		s.sentOnce, s.lastReport, s.reportDue = true, c.lastReport, c.reportDue
		return
	}
	if at, ok := StoredReport(s.old, now, freq); ok {
		s.sentOnce, s.lastReport, s.reportDue = true, at, at.Add(freq)
	}
}

// StoredReport returns when the stored status st was reported (its Ready
// condition's heartbeat), and whether that is less than freq before now:
// then a reconnecting reporter counts it as its last report (trustStored).
func StoredReport(st *nodev1.NodeStatus, now time.Time, freq time.Duration) (time.Time, bool) {
	hb := nodemodel.FindCondition(st.GetConditions(), nodemodel.Ready).GetLastHeartbeatTime()
	if hb == nil {
		return time.Time{}, false
	}
	at := hb.AsTime()
	age := now.Sub(at)
	return at, age >= 0 && age < freq
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
	if err := s.send("status", &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: st}}}); err != nil {
		return err
	}
	c.metrics.StatusReports.WithLabelValues(reason).Inc()
	if s.sentOnce && nodemodel.StatusChanged(s.old, st) {
		c.lg.Info("node status changed", zap.String("ready", nodemodel.ConditionStatus(st.GetConditions(), nodemodel.Ready)),
			zap.String("reason", reason))
	}
	s.old = st
	s.sentOnce = true
	s.lastReport = now
	c.lastReport = now
	freq := c.cfg.StatusReportFrequency
	if jitterNext {
		// v1.34+: after a change or a restart the next unchanged report is
		// due after freq + d, d uniform in [-freq/2, +freq/2], so a fleet
		// restarted together does not report in lockstep every 5 minutes.
		freq += time.Duration((rand.Float64() - 0.5) * float64(freq))
	}
	s.reportDue = now.Add(freq)
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
	if now.Sub(c.startedAt) > FastStartupTimeout {
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
		}
		if ra := ack.GetRetryAfter(); ra != nil {
			// Jittered like a refused registration: a collector that refuses
			// many statuses at once must not get them all back at once.
			d := RetryJitter(max(ra.AsDuration(), 0))
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
	case *collectorv1.ReportResponse_Command:
		cmd := m.Command
		switch x := cmd.GetCommand().(type) {
		case *collectorv1.Command_ReportStatus:
			c.lg.Info("collector requested a status report", zap.String("reason", x.ReportStatus.GetReason()))
			return nil, s.tick(true, "requested")
		case *collectorv1.Command_SlowDown:
			s.minLease = x.SlowDown.GetMinLeaseInterval().AsDuration()
			s.minStatus = x.SlowDown.GetMinStatusInterval().AsDuration()
			c.lg.Info("collector asked to slow down", zap.Duration("min_lease_interval", s.minLease),
				zap.Duration("min_status_interval", s.minStatus))
			if s.minLease > c.cfg.RenewInterval()*3 {
				// Renewing less often than 3 per lease duration would let the
				// lease lapse between renewals; the collector asked for it, so
				// comply, but make it visible.
				c.lg.Warn("slow-down interval risks lease expiry", zap.Duration("min_lease_interval", s.minLease))
			}
		case *collectorv1.Command_Reconnect:
			within := x.Reconnect.GetWithin().AsDuration()
			d := time.Duration(0)
			if within > 0 {
				d = rand.N(within)
			}
			c.lg.Info("collector asked to reconnect", zap.String("reason", x.Reconnect.GetReason()), zap.Duration("after", d))
			if s.reconnectT == nil {
				s.reconnectT = time.NewTimer(d)
			} else {
				resetTimer(s.reconnectT, d)
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
	if err := s.send("leaving", &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "reporter shutting down"}}}); err != nil {
		c.lg.Warn("could not send leaving", zap.Error(err))
		return nil
	}
	leaveSeq := s.seq
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
