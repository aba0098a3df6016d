// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package ingest serves CollectorService.Report: one long-lived stream per
// node, a small state machine per stream
//
//	wait Register ──valid, authorised, stored──▶ attached ──Leaving──▶ leaving
//	      │                                         │
//	      └── InvalidArgument / PermissionDenied    └── stream end: detached
//	          / Unavailable ends the stream
//
// Once attached, every message is answered by an Ack with the same seq; an
// invalid one is refused in its Ack and the stream stays, so one bad status
// report cannot cut a node's heartbeats.
//
// What an Ack promises (docs/contracts.md): a Register ack means nodes/<name>
// exists in etcd; a status ack means status/<name> holds that status (it was
// committed, or this stream's own earlier write or conditional write found
// it stored); a lease ack means the renewal is in this collector's memory
// and on the live feed to the monitors (durable=false): it reaches
// leases/<name> within the checkpoint interval while etcd is up, and
// survives in etcd only if it was checkpointed before this collector dies. Lease acks continue during an etcd outage because
// liveness reaches the monitors over the feed, not through etcd.
package ingest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	"github.com/nodepulse/nodepulse/collector/internal/persist"
	"github.com/nodepulse/nodepulse/collector/internal/podsync"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Config of the ingest server.
type Config struct {
	CollectorID string
	// Insecure: plaintext, callers have no identity, any node name is
	// accepted (development only; logged loudly at start).
	Insecure bool
	// MaxStreams bounds open Report streams; more get ResourceExhausted.
	MaxStreams int
	// Limits bound what a message may contain.
	Limits validation.Limits
	// MessagesPerSecond and MessageBurst: per-node token bucket. A reporter
	// on defaults sends ~0.2 messages/s; the bucket only stops loops and
	// abuse.
	MessagesPerSecond float64
	MessageBurst      int
	// RegisterTimeout: the first message must arrive within this.
	RegisterTimeout time.Duration
	// UnregisteredPerIdentity and UnregisteredPerAddress bound the streams
	// one peer holds from their open to their stored Register: per
	// certificate identity when the caller has one, else per source IP
	// (peers.go). ≤ 0: no limit.
	UnregisteredPerIdentity int
	UnregisteredPerAddress  int
	// RenewPhases: Register acks carry a renewal phase (Ack.renew_phase,
	// phase.go); false leaves reporters to their own jittered intervals.
	RenewPhases bool
	// WaitingInterval: while a Register waits for registration capacity,
	// the node is reported alive (WAITING) this often (default 10 s: four
	// times within the monitors' default 40 s grace).
	WaitingInterval time.Duration
	// QueuedAfter: a Register expected to wait this long or longer in the
	// registration queue is told so (Command.register_queued), so its
	// reporter waits past its own register timeout.
	QueuedAfter time.Duration
	// RetryAfter is what status reports refused while etcd is unavailable
	// are told to wait (a busy collector computes its own: StatusRetryAfter).
	RetryAfter time.Duration
	// SendQueue bounds queued acks and commands per stream; StatusQueue
	// bounds status reports waiting for etcd per stream.
	SendQueue   int
	StatusQueue int
	// UnavailableReconnectAfter: after etcd has been unreachable this long,
	// reporters are told to reconnect elsewhere (another collector may
	// still reach etcd); ReconnectWindow is the window they spread over.
	UnavailableReconnectAfter time.Duration
	ReconnectWindow           time.Duration
}

// DefaultConfig is the production setting.
func DefaultConfig() Config {
	return Config{
		MaxStreams:                20000,
		Limits:                    validation.DefaultLimits(),
		MessagesPerSecond:         2,
		MessageBurst:              20,
		RegisterTimeout:           30 * time.Second,
		UnregisteredPerIdentity:   8,
		UnregisteredPerAddress:    1000,
		RenewPhases:               true,
		WaitingInterval:           10 * time.Second,
		QueuedAfter:               5 * time.Second,
		RetryAfter:                5 * time.Second,
		SendQueue:                 64,
		StatusQueue:               4,
		UnavailableReconnectAfter: 30 * time.Second,
		ReconnectWindow:           30 * time.Second,
	}
}

// Causes that end a stream from the server side.
var (
	errSuperseded      = errors.New("superseded by a newer stream of the same node")
	errDrained         = errors.New("collector drained")
	errRegisterTimeout = errors.New("no Register in time")
	errHandlerReturned = errors.New("report handler returned")
	errAcksUnread      = errors.New("reporter does not read its acks")
)

// Server implements CollectorService.
type Server struct {
	collectorv1.UnimplementedCollectorServiceServer
	cfg    Config
	lg     *zap.Logger
	p      *persist.Persister
	table  *live.Table
	m      *metrics
	now    func() time.Time
	phases *phases

	open   atomic.Int64
	inline atomic.Int64 // streams served on the handler goroutine alone (serveInline)
	// registerFailedAt: Unix ns of the last Register refused because etcd
	// failed it (not for a full queue); rebalancing waits after it.
	registerFailedAt atomic.Int64
	noInline         atomic.Bool // tests: always serve with a reader goroutine
	draining         atomic.Bool
	hints            atomic.Pointer[func(draining bool) Hinter]
	handlers         sync.WaitGroup

	mu      sync.Mutex
	streams map[string]*stream

	refusals refusalLog
	pending  pendingPeers // unregistered streams per peer (peers.go)
	acks     *ackSenders
	pods     atomic.Pointer[podsync.Hub] // nil: no pod sync (SetPods)
}

// New builds the server.
func New(cfg Config, p *persist.Persister, table *live.Table, lg *zap.Logger, reg prometheus.Registerer) (*Server, error) {
	if cfg.CollectorID == "" || cfg.MaxStreams <= 0 || cfg.MessagesPerSecond <= 0 || cfg.MessageBurst <= 0 ||
		cfg.SendQueue <= 0 || cfg.StatusQueue <= 0 || cfg.RegisterTimeout <= 0 || cfg.WaitingInterval <= 0 || cfg.QueuedAfter < 0 {
		return nil, fmt.Errorf("ingest: invalid config %+v", cfg)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lg: lg.Named("ingest").WithOptions(zap.WrapCore(sampleNodeLines)), p: p, table: table, m: m, now: time.Now, streams: map[string]*stream{}, phases: newPhases()}
	s.acks = newAckSenders(s)
	s.pending.gauge = m.pending
	if cfg.Insecure {
		s.lg.Warn("Report streams are NOT authenticated (--grpc.insecure): any caller may report for any node name; development only")
	}
	return s, nil
}

// Per-node log lines (node attached, node detached, ...) are thinned when
// they come in storms: of each message, the first nodeLinesPerSecond in a
// second are written, then one in nodeLinesThereafter. The old collector
// of a restart at 100,000 nodes wrote 100,000 "node detached" lines after
// its drain and the new one 100,000 "node attached" lines within a minute,
// each a write(2) under the logger's lock, on collectors with the least CPU
// to spare. The metrics count every event; a storm leaves a sample.
const (
	nodeLinesPerSecond  = 100
	nodeLinesThereafter = 100
)

func sampleNodeLines(c zapcore.Core) zapcore.Core {
	return zapcore.NewSamplerWithOptions(c, time.Second, nodeLinesPerSecond, nodeLinesThereafter)
}

// Open is the number of open Report streams.
func (s *Server) Open() int { return int(s.open.Load()) }

// Command implements feed.Commander.
func (s *Server) Command(name string, cmd *collectorv1.Command) bool {
	s.mu.Lock()
	st := s.streams[name]
	s.mu.Unlock()
	if st == nil {
		return false
	}
	return st.push(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: cmd}})
}

// reconnectTo is the Reconnect command, naming the collector to go to
// ("" for none, spec §20.3).
func reconnectTo(reason string, within time.Duration, to string) *collectorv1.ReportResponse {
	return &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
		Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{Reason: reason, Within: durationpb.New(within), PreferredAddress: to}}}}}
}

// Hinter names where each of a batch of reporters asked to leave should
// go ("" for nowhere in particular); balance.Hints is one.
type Hinter interface{ Next() string }

// SetHints installs what names the collectors reporters asked to leave are
// sent to (the collector app's view of discovery; draining says the batch
// is a drain's). Without it Reconnect names none.
func (s *Server) SetHints(f func(draining bool) Hinter) { s.hints.Store(&f) }

// hinted returns a message for each of n streams told to reconnect, each
// naming the destination the hinter chose for it; streams given the same
// destination share one message.
func (s *Server) hinted(reason string, within time.Duration, n int, draining bool) []*collectorv1.ReportResponse {
	out := make([]*collectorv1.ReportResponse, n)
	var h Hinter
	if f := s.hints.Load(); f != nil {
		h = (*f)(draining)
	}
	byAddr := map[string]*collectorv1.ReportResponse{}
	for i := range out {
		to := ""
		if h != nil {
			to = h.Next()
		}
		m, ok := byAddr[to]
		if !ok {
			m = reconnectTo(reason, within, to)
			byAddr[to] = m
		}
		out[i] = m
		if to != "" {
			s.m.hints.Inc()
		}
	}
	return out
}

// broadcastWorkers send a broadcast command to every stream. Pushing it
// (a sender goroutine per stream) made a drain at 100,000 streams take 2 to
// 9 s under Server.mu: 100,000 runnable goroutines took turns with the one
// broadcasting, and each owed the GC an assist when a cycle ran.
const broadcastWorkers = 8

// broadcast sends m to every attached stream and returns to how many it was
// sent or queued by the time it returns, and how many streams there were.
// The streams are listed under s.mu and served by a few workers
// (stream.sendNow). A Send blocked by flow control (a client that stopped
// reading) holds its worker until that stream ends, so broadcast waits for
// the workers at most wait; the rest of the list is still served after it
// returns.
func (s *Server) broadcast(reason string, within time.Duration, draining bool, wait time.Duration) (int, int) {
	s.mu.Lock()
	list := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		list = append(list, st)
	}
	s.mu.Unlock()
	msgs := s.hinted(reason, within, len(list), draining)
	var next, sent atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range min(broadcastWorkers, len(list)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(list)); i = next.Add(1) - 1 {
				if list[i].sendNow(msgs[i]) {
					sent.Add(1)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return int(sent.Load()), len(list)
}

// Drain stops accepting streams, tells every attached reporter to reconnect
// elsewhere at a random moment within window, and after the window (plus a
// second for the last ones in flight) ends the streams still open, so
// GracefulStop does not wait for reporters that ignore the command.
func (s *Server) Drain(window time.Duration) {
	if s.draining.Swap(true) {
		return
	}
	start := time.Now()
	n, total := s.broadcast("collector draining", window, true, window)
	s.lg.Info("draining: told reporters to reconnect elsewhere", zap.Int("streams", n), zap.Int("of", total), zap.Duration("within", window),
		zap.Duration("took", time.Since(start)))
	time.AfterFunc(window+time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range s.streams {
			st.end(errDrained)
		}
	})
}

// Wait blocks until every Report handler has returned or ctx ends.
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run watches etcd availability: after UnavailableReconnectAfter of outage
// every reporter is told, once per outage, to reconnect elsewhere.
func (s *Server) Run(ctx context.Context) error {
	told := false
	tick := 0
	run.Every(ctx, time.Second, func() {
		tick++
		if tick%refusalLogEvery == 0 {
			s.refusals.flush(s.lg)
		}
		down := s.p.UnavailableFor()
		switch {
		case down == 0:
			told = false
		case !told && s.cfg.UnavailableReconnectAfter > 0 && down >= s.cfg.UnavailableReconnectAfter:
			told = true
			n, total := s.broadcast("etcd unavailable from this collector", s.cfg.ReconnectWindow, true, s.cfg.ReconnectWindow)
			s.lg.Warn("etcd unavailable too long: told reporters to reconnect elsewhere", zap.Duration("outage", down), zap.Int("streams", n), zap.Int("of", total))
		}
	})
	s.refusals.flush(s.lg)
	return nil
}

// Report implements CollectorService: one goroutine per idle stream (see
// stream).
func (s *Server) Report(srv collectorv1.CollectorService_ReportServer) error {
	s.handlers.Add(1)
	defer s.handlers.Done()
	if s.draining.Load() {
		s.m.rejected.WithLabelValues("draining").Inc()
		return s.refusal(status.New(codes.Unavailable, "collector is draining: connect to another collector"), true)
	}
	if n := s.open.Add(1); n > int64(s.cfg.MaxStreams) {
		s.open.Add(-1)
		s.m.rejected.WithLabelValues("max_streams").Inc()
		return s.refusal(status.Newf(codes.ResourceExhausted, "collector holds its maximum of %d streams (--max-streams): connect to another collector", s.cfg.MaxStreams), false)
	}
	s.m.streams.Inc()
	defer func() { s.open.Add(-1); s.m.streams.Dec() }()
	peerKey, err := s.admitPeer(srv.Context())
	if err != nil {
		return err
	}
	if s.p.RegisterQueueFull() {
		s.pending.release(*peerKey)
		// Every stream starts with a Register. Refused here, before it is
		// decoded and validated, a refusal costs a fraction of a
		// registration: in a registration storm the refusals must not take
		// the CPU the accepted ones and the heartbeats need.
		s.m.rejected.WithLabelValues("registration_queue_full").Inc()
		s.refusals.note(persist.ErrBusy)
		return s.refuseBusy(srv.Context(), "")
	}

	st := newStream(s, srv)
	st.pendingPeer.Store(peerKey)
	defer s.registered(st) // no effect once the Register was stored
	if w, ok := grpc.ServerTransportStreamFromContext(srv.Context()).(statusWriter); ok && !s.noInline.Load() {
		st.w = w
		return s.serveInline(st)
	}
	var cancel context.CancelFunc
	st.ctx, cancel = context.WithCancel(st.ctx)
	defer cancel()
	st.cancelReader = cancel
	return s.serveWithReader(st)
}

// statusWriter is what grpc-go's server transport stream offers to end a
// stream with a status from outside the handler: it cancels the stream,
// which unblocks a pending Recv (grpc-go does this itself when a handler
// returns while another goroutine is in Recv).
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// serveInline serves the stream on the handler goroutine alone: Recv and
// processing inline. When the server ends the stream (superseded, drain,
// register timeout) while it waits in Recv, end writes the status from a
// goroutine that exists only from that moment, which ends the stream and
// unblocks the Recv.
func (s *Server) serveInline(st *stream) error {
	s.inline.Add(1)
	// serve stops the timer at the first message and keeps no reference
	// to it: a stopped timer held for the stream's life is memory per node.
	err := s.serve(st, time.AfterFunc(s.cfg.RegisterTimeout, func() { s.registerTimeout(st) }))
	st.end(errHandlerReturned) // no effect when a cause is already set
	st.close()
	return s.streamEnd(st, err)
}

// serveWithReader is the fallback when the transport stream cannot be
// ended from outside the handler: a reader goroutine receives and
// processes, and the handler waits for it or for the server's decision
// to end the stream, and returns, which unblocks the reader's Recv.
func (s *Server) serveWithReader(st *stream) error {
	timer := time.NewTimer(s.cfg.RegisterTimeout)
	defer timer.Stop()
	done := make(chan error, 1)
	s.handlers.Add(1)
	go func() { defer s.handlers.Done(); done <- s.serve(st, timer) }()

	var err error
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-st.ctx.Done():
			waiting = false
		case <-timer.C:
			s.registerTimeout(st)
		}
	}
	st.end(errHandlerReturned) // no effect when a cause is already set
	st.close()
	return s.streamEnd(st, err)
}

// registerTimeout ends the stream unless its first message arrived.
func (s *Server) registerTimeout(st *stream) {
	if !st.first.Load() {
		s.m.rejected.WithLabelValues("register_timeout").Inc()
		st.end(errRegisterTimeout)
	}
}

// endFromServer writes the final status of a stream the server ended,
// at once, so a pending Recv returns.
func (st *stream) endFromServer() {
	switch cause := st.endCause(); {
	case errors.Is(cause, errSuperseded), errors.Is(cause, errDrained), errors.Is(cause, errRegisterTimeout), errors.Is(cause, errAcksUnread),
		errors.Is(cause, errNodeDeleted):
	default:
		return // the client or the connection ended it: Recv returns by itself
	}
	st.close()
	_ = st.w.WriteStatus(status.Convert(st.s.streamEnd(st, nil)))
}

// streamEnd is the status a stream ends with: the server's reason when the
// server ended it, else what ended the reader.
func (s *Server) streamEnd(st *stream, err error) error {
	switch cause := st.endCause(); {
	case errors.Is(cause, errSuperseded):
		return status.Errorf(codes.Aborted, "node %q opened a newer stream on this collector", st.name)
	case errors.Is(cause, errDrained):
		return status.Error(codes.Unavailable, "collector drained: reconnect to another collector")
	case errors.Is(cause, errRegisterTimeout):
		return status.Errorf(codes.DeadlineExceeded, "register: no Register within %s of opening the stream", s.cfg.RegisterTimeout)
	case errors.Is(cause, errAcksUnread):
		return status.Errorf(codes.ResourceExhausted, "node %q: an ack waited %s to be sent (the reporter does not read its stream): reconnect", st.name, ackStuckAfter)
	case errors.Is(cause, errNodeDeleted):
		return nodeDeletedStatus(st.name)
	case errors.Is(cause, errHandlerReturned) || cause == nil:
		return err
	default: // the client cancelled or the connection broke
		if err != nil {
			return err
		}
		return status.FromContextError(cause).Err()
	}
}

// serve runs on the reader goroutine: registration, then the loop. The
// stream is detached when it returns.
func (s *Server) serve(st *stream, timer *time.Timer) error {
	first, err := st.srv.Recv()
	st.first.Store(true)
	timer.Stop()
	if err != nil {
		return endErr(err)
	}
	// Registration's validation, answer and log lines are the deepest code
	// a stream runs: off the stream's long-lived stack. The wait in the
	// queue between them stays on it, which is parked there anyway: after
	// a collector restart tens of thousands of Registers wait at once, and
	// a second goroutine each, with the stack validation grew, would cost
	// about as much memory again as the streams themselves.
	var (
		rq   registration
		err2 error
	)
	onFreshStack(func() { rq, err2 = s.prepareRegister(st, first) })
	if err2 == nil {
		err2 = s.awaitRegister(st, &rq)
	}
	if err2 == nil {
		s.registered(st) // the Register is stored: no longer this peer's to answer for
	}
	if err2 == nil {
		onFreshStack(func() { err2 = s.attach(st, &rq) })
	}
	if err2 != nil {
		return err2
	}
	// Deferred, so a panic in the loop (recovered by the interceptor) still
	// detaches the stream.
	defer func() { s.detach(st, s.streamEnd(st, err)) }()
	err = s.loop(st, rq.seq)
	return err
}

func endErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "stream cancelled by the client")
	}
	return err // io.EOF ends the stream cleanly in grpc-go when returned as nil; keep the transport's error otherwise
}

// registration is a Register on its way through prepareRegister,
// awaitRegister and attach.
type registration struct {
	seq  uint64
	reg  *collectorv1.Register
	node *nodev1.Node // the node to create if absent
	res  persist.Registered
}

// prepareRegister runs the first message through validation and
// authorisation.
func (s *Server) prepareRegister(st *stream, m *collectorv1.ReportRequest) (registration, error) {
	reg := m.GetRegister()
	if reg == nil {
		s.m.messages.WithLabelValues("register", "failed_precondition").Inc()
		return registration{}, status.Error(codes.FailedPrecondition, "register: the first message of a Report stream must be a Register")
	}
	now := s.now()
	if l := validation.Register(reg, now, s.cfg.Limits); len(l) > 0 {
		s.invalid("register", l)
		return registration{}, validation.Status(l)
	}
	if err := s.authorize(st.ctx, reg.GetNodeName()); err != nil {
		s.m.messages.WithLabelValues("register", "permission_denied").Inc()
		return registration{}, err
	}
	return registration{seq: m.GetSeq(), reg: reg, node: newNode(reg, now)}, nil
}

// awaitRegister queues the registration and waits for its answer.
func (s *Server) awaitRegister(st *stream, rq *registration) error {
	ctx := st.ctx
	name := rq.reg.GetNodeName()
	// Alive from here on, attached or not: a registration can wait many
	// seconds in the queue on a loaded collector. The monitors hear
	// WAITING now and every WaitingInterval until it is answered; a
	// reporter facing a wait of QueuedAfter or more is told so, with the
	// time it may take, so it waits instead of giving up at its register
	// timeout, and the monitors are told the same time (retry_within) so
	// the first refresh can wait for it.
	var within time.Duration
	if wait := s.p.RegisterWait(); wait >= s.cfg.QueuedAfter {
		within = queuedWithin(wait, s.cfg.WaitingInterval)
		st.push(registerQueued(within))
		s.m.queued.Inc()
	}
	s.waitingFor(ctx, name, within)
	stopWaiting := s.keepWaiting(ctx, st, name, max(s.cfg.WaitingInterval, within), within > 0)
	res, err := s.p.Register(ctx, rq.node)
	stopWaiting()
	if err != nil {
		s.m.messages.WithLabelValues("register", "unavailable").Inc()
		if ctx.Err() != nil {
			// The reporter gave up (or a newer stream superseded this
			// one) while the registration waited: nothing to answer.
			return status.FromContextError(ctx.Err()).Err()
		}
		// Refusals come in storms; one summary line per interval, not
		// one line per refused stream.
		s.refusals.note(err)
		if errors.Is(err, persist.ErrBusy) {
			return s.refuseBusy(ctx, name)
		}
		s.registerFailedAt.Store(s.now().UnixNano())
		// The reporter is alive and told to stay away RetryAfter (plus
		// its jitter, up to half again): the monitors hear so, as for a
		// full queue (refuseBusy). Without it a node refused here aged
		// towards Unknown while it waited as asked: a Register that hung
		// on a frozen etcd member for the request timeout, then the
		// retry delay, outlasted a 10 s grace period (docs/robustness.md,
		// Findings).
		d := s.cfg.RetryAfter
		s.waitingFor(ctx, name, d+d/2)
		return withRetryAfter(status.Newf(codes.Unavailable, "cannot register node %q: %v", name, err), d, s.hintFor(true))
	}
	rq.res = res
	return nil
}

// queuedWithin is the wait a registration expected to be answered in wait
// is announced with: twice that (the rate it is computed from changes),
// plus a refresh interval, at most what the monitors accept as a WAITING
// event's retry_within. Refreshes extend it.
func queuedWithin(wait, refresh time.Duration) time.Duration {
	return min(2*wait+refresh, nodemodel.MaxWaitingWithin)
}

func registerQueued(within time.Duration) *collectorv1.ReportResponse {
	return &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
		Command: &collectorv1.Command_RegisterQueued{RegisterQueued: &collectorv1.RegisterQueued{Within: durationpb.New(within)}}}}}
}

// attach publishes a registered stream and answers its Register.
func (s *Server) attach(st *stream, rq *registration) error {
	ctx := st.ctx
	name, res := rq.reg.GetNodeName(), rq.res
	now := s.now()
	st.name, st.leaseFresh = name, res.LeaseFresh
	// The first status of the stream is written whatever it says,
	// conditional on the revision read here: that write fences off any
	// write of an earlier stream still on its way to etcd (writeStatus).
	st.storedRev = res.StatusRev
	s.mu.Lock()
	if st.ending() {
		// Ended (superseded, drained, timed out) while registering:
		// publishing it now could replace a newer stream. The causes are
		// recorded under s.mu, so none is missed here.
		s.mu.Unlock()
		if c := st.cause.Load(); c != nil {
			return *c // streamEnd turns it into the stream's status
		}
		return status.FromContextError(ctx.Err()).Err()
	}
	if old := s.streams[name]; old != nil {
		// The newest stream wins: the old one is most likely a half-dead
		// connection the reporter already gave up on.
		old.end(errSuperseded)
	}
	s.streams[name] = st
	st.gen = s.table.Attach(name, res.Node.GetMetadata().GetUid(), now)
	st.ref, _ = s.table.Ref(name, st.gen)
	s.mu.Unlock()

	ack := &collectorv1.Ack{Seq: rq.seq, Durable: true, Node: res.Node, CollectorId: s.cfg.CollectorID, EmptyRenewals: true}
	if s.cfg.RenewPhases {
		st.phaseConn = connKey(ctx)
		ph := s.phases.acquire(st.phaseConn)
		ack.RenewPhase = &ph
	}
	if err := st.send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: ack}}); err != nil {
		s.detach(st, err)
		return err
	}
	s.m.messages.WithLabelValues("register", "ok").Inc()
	s.subscribePods(st, rq.reg, res.Node.GetMetadata().GetUid())
	// Checked first, fields only then (not a child logger per
	// registration): a sampled-out line costs the sampler's counter only.
	if ce := s.lg.Check(zap.InfoLevel, "node attached"); ce != nil {
		ce.Write(zap.String("node", name), zap.String("reporter", rq.reg.GetReporterId()), zap.Bool("created", res.Created), zap.Uint64("gen", st.gen))
	}
	if s.draining.Load() {
		st.push(s.hinted("collector draining", time.Second, 1, true)[0])
	}
	return nil
}

// refuseBusy refuses a registration for capacity: the reporter is told to
// come back after its retry slot (RetryInfo), and the monitors that it is
// alive and will stay away up to that slot plus the reporter's jitter
// (heartbeat.RetryJitter adds up to half again), so they do not count that
// silence against it. Without it, a node refused at the 20 s cap came back
// up to 30 s later, leaving 10 s of a 40 s grace period for a new stream
// on a starved collector to be read and fed to the monitor: not always
// enough in a restart at 100,000 nodes (docs/adr/0008-waiting-defers-judgement.md).
func (s *Server) refuseBusy(ctx context.Context, name string) error {
	d := s.p.RegisterRetryAfter()
	s.waitingFor(ctx, name, d+d/2)
	return withRetryAfter(status.New(codes.ResourceExhausted, "registration queue full: retry after the retry delay (RetryInfo) with jitter"), d, s.hintFor(false))
}

// hintFor names the collector a refused reporter should try next ("" for
// none): the refusal's status carries it as a Reconnect detail (spec
// §20.3), read by the reporter for its next attempt only.
func (s *Server) hintFor(draining bool) string {
	f := s.hints.Load()
	if f == nil {
		return ""
	}
	h := (*f)(draining)
	if h == nil {
		return ""
	}
	to := h.Next()
	if to != "" {
		s.m.hints.Inc()
	}
	return to
}

// refusal is st, naming the collector to try instead when there is one.
func (s *Server) refusal(st *status.Status, draining bool) error {
	return withRetryAfter(st, 0, s.hintFor(draining))
}

// withRetryAfter attaches a google.rpc.RetryInfo detail to a stream-ending
// status, so reporters wait at least that long (plus jitter) before they
// register again.
//
// to, when not "", adds a Reconnect detail naming the collector to try
// next (spec §20.3).
func withRetryAfter(st *status.Status, d time.Duration, to string) error {
	var details []protoadapt.MessageV1
	if d > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	}
	if to != "" {
		details = append(details, &collectorv1.Reconnect{Reason: st.Message(), PreferredAddress: to})
	}
	if len(details) == 0 {
		return st.Err()
	}
	if ds, err := st.WithDetails(details...); err == nil {
		return ds.Err()
	}
	return st.Err()
}

// refusalLogEvery is the interval, in Run ticks (seconds), of the refused
// registrations summary.
const refusalLogEvery = 10

// refusalLog counts refused registrations between summaries.
type refusalLog struct {
	mu          sync.Mutex
	busy, unav  int
	lastErr     error
	lastSummary time.Time
}

func (r *refusalLog) note(err error) {
	r.mu.Lock()
	if errors.Is(err, persist.ErrBusy) {
		r.busy++
	} else {
		r.unav++
	}
	r.lastErr = err
	r.mu.Unlock()
}

func (r *refusalLog) flush(lg *zap.Logger) {
	r.mu.Lock()
	busy, unav, last := r.busy, r.unav, r.lastErr
	r.busy, r.unav, r.lastErr = 0, 0, nil
	since := r.lastSummary
	r.lastSummary = time.Now()
	r.mu.Unlock()
	if busy+unav == 0 {
		return
	}
	fields := []zap.Field{zap.Int("queue_full", busy), zap.Int("etcd_unavailable", unav), zap.NamedError("last_error", last)}
	if !since.IsZero() {
		fields = append(fields, zap.Duration("over", time.Since(since).Round(time.Second)))
	}
	lg.Warn("registrations refused", fields...)
}

// waiting tells the monitors that a node's reporter is alive although not
// attached (a WAITING feed event): by name, when its Register was read
// (and authorized), else by the name the reporter put in the stream's
// metadata (identity.NodeMetadata), when the caller may report for it.
// Waiting for, or being refused, registration capacity must not make a
// node look dead: after a collector restart, 100,000 reporters reconnect
// at once and the last of them register minutes later, well past the
// grace period.
func (s *Server) waiting(ctx context.Context, name string) { s.waitingFor(ctx, name, 0) }

// waitingFor is waiting for a reporter told to stay away up to within.
func (s *Server) waitingFor(ctx context.Context, name string, within time.Duration) {
	if name == "" {
		md, _ := metadata.FromIncomingContext(ctx)
		v := md.Get(identity.NodeMetadata)
		if len(v) != 1 || validation.NodeName("metadata."+identity.NodeMetadata, v[0]) != nil || s.authorize(ctx, v[0]) != nil {
			return
		}
		name = v[0]
	}
	s.table.Waiting(name, s.now(), within)
	s.m.waiting.Inc()
}

// keepWaiting reports name WAITING first after first, then every
// WaitingInterval, until the returned stop is called (a timer, not a
// goroutine, per queued Register). When the reporter was told its Register
// is queued, each refresh tells it again, so it keeps waiting as long as
// the collector does.
func (s *Server) keepWaiting(ctx context.Context, st *stream, name string, first time.Duration, queued bool) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // the callback cannot run before t is set
	defer mu.Unlock()
	t = time.AfterFunc(first, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		s.waiting(ctx, name)
		if queued {
			st.push(registerQueued(s.cfg.WaitingInterval))
		}
		t.Reset(s.cfg.WaitingInterval)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

func (s *Server) authorize(ctx context.Context, name string) error {
	if s.cfg.Insecure {
		return nil
	}
	id := identity.FromContext(ctx)
	if id.Role == identity.Node && id.Name == name {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "register.nodeName: caller %s may not report for node %q: a node certificate for that name (CN %s%s, O %s) is required",
		id, name, identity.NodeCommonNamePrefix, name, identity.NodeOrganization)
}

// newNode is the object created at first registration: labels, taints and
// cordon from the reporter; uid and creation time from the control plane.
func newNode(reg *collectorv1.Register, now time.Time) *nodev1.Node {
	taints := make([]*nodev1.Taint, len(reg.GetRegisterWithTaints()))
	for i, t := range reg.GetRegisterWithTaints() {
		taints[i] = proto.CloneOf(t)
		// The evictor counts toleration seconds from timeAdded; a NoExecute
		// taint without it would never expire a toleration.
		if t.GetEffect() == nodemodel.NoExecute && t.TimeAdded == nil {
			taints[i].TimeAdded = nodemodel.Timestamp(now)
		}
	}
	labels := make(map[string]string, len(reg.GetLabels()))
	for k, v := range reg.GetLabels() {
		labels[k] = v
	}
	return &nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: reg.GetNodeName(), Uid: newUID(), Labels: labels, CreationTimestamp: nodemodel.Timestamp(now)},
		Spec:     &nodev1.NodeSpec{Unschedulable: reg.GetUnschedulable(), Taints: taints},
	}
}

// newUID is a random (version 4) UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// detach removes a registered stream that ended with end (nil: the
// reporter closed its side).
func (s *Server) detach(st *stream, end error) {
	if st.phaseConn != "" {
		s.phases.release(st.phaseConn)
	}
	s.unsubscribePods(st)
	s.mu.Lock()
	if s.streams[st.name] == st {
		delete(s.streams, st.name)
	}
	s.mu.Unlock()
	code := status.Code(end)
	s.m.detached.WithLabelValues(code.String()).Inc()
	if st.moveAsked.Load() && (code == codes.OK || code == codes.Canceled) {
		s.m.movesAccepted.Inc()
	}
	if s.table.Detach(st.name, st.gen) {
		if ce := s.lg.Check(zap.InfoLevel, "node detached"); ce != nil {
			ce.Write(zap.String("node", st.name), zap.Uint64("gen", st.gen), zap.Stringer("code", code), zap.NamedError("reason", end))
		}
	}
}

func (s *Server) invalid(kind string, l validation.List) {
	s.m.messages.WithLabelValues(kind, "invalid").Inc()
	for _, e := range l {
		s.m.validation.WithLabelValues(validation.MetricField(e.Field)).Inc()
	}
}
