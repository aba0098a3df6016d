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
// committed, or the stored copy already equals it); a lease ack means the
// renewal is in this collector's memory and on the live feed to the monitors
// (durable=false): it reaches leases/<name> within the checkpoint interval
// while etcd is up, and survives in etcd only if it was checkpointed before
// this collector dies. Lease acks continue during an etcd outage because
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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
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
	// RetryAfter is what refused status reports are told to wait.
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
		RetryAfter:                5 * time.Second,
		SendQueue:                 64,
		StatusQueue:               4,
		UnavailableReconnectAfter: 30 * time.Second,
		ReconnectWindow:           30 * time.Second,
	}
}

// Causes that end a stream from the server side.
var (
	errSuperseded = errors.New("superseded by a newer stream of the same node")
	errDrained    = errors.New("collector drained")
)

// Server implements CollectorService.
type Server struct {
	collectorv1.UnimplementedCollectorServiceServer
	cfg   Config
	lg    *zap.Logger
	p     *persist.Persister
	table *live.Table
	m     *metrics
	now   func() time.Time

	open     atomic.Int64
	draining atomic.Bool
	handlers sync.WaitGroup

	mu      sync.Mutex
	streams map[string]*stream

	refusals refusalLog
}

type stream struct {
	name   string
	gen    uint64
	out    chan *collectorv1.ReportResponse
	cancel context.CancelCauseFunc
}

// New builds the server.
func New(cfg Config, p *persist.Persister, table *live.Table, lg *zap.Logger, reg prometheus.Registerer) (*Server, error) {
	if cfg.CollectorID == "" || cfg.MaxStreams <= 0 || cfg.MessagesPerSecond <= 0 || cfg.MessageBurst <= 0 ||
		cfg.SendQueue <= 0 || cfg.StatusQueue <= 0 || cfg.RegisterTimeout <= 0 {
		return nil, fmt.Errorf("ingest: invalid config %+v", cfg)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lg: lg.Named("ingest"), p: p, table: table, m: m, now: time.Now, streams: map[string]*stream{}}
	if cfg.Insecure {
		s.lg.Warn("Report streams are NOT authenticated (--grpc.insecure): any caller may report for any node name; development only")
	}
	return s, nil
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

func (st *stream) push(m *collectorv1.ReportResponse) bool {
	select {
	case st.out <- m:
		return true
	default:
		return false
	}
}

func reconnect(reason string, within time.Duration) *collectorv1.ReportResponse {
	return &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
		Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{Reason: reason, Within: durationpb.New(within)}}}}}
}

// broadcast pushes m to every attached stream and returns how many got it.
func (s *Server) broadcast(m *collectorv1.ReportResponse) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.streams {
		if st.push(m) {
			n++
		}
	}
	return n
}

// Drain stops accepting streams, tells every attached reporter to reconnect
// elsewhere at a random moment within window, and after the window (plus a
// second for the last ones in flight) ends the streams still open, so
// GracefulStop does not wait for reporters that ignore the command.
func (s *Server) Drain(window time.Duration) {
	if s.draining.Swap(true) {
		return
	}
	n := s.broadcast(reconnect("collector draining", window))
	s.lg.Info("draining: told reporters to reconnect elsewhere", zap.Int("streams", n), zap.Duration("within", window))
	time.AfterFunc(window+time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range s.streams {
			st.cancel(errDrained)
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
	t := time.NewTicker(time.Second)
	defer t.Stop()
	told := false
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			s.refusals.flush(s.lg)
			return nil
		case <-t.C:
		}
		if tick%refusalLogEvery == 0 {
			s.refusals.flush(s.lg)
		}
		down := s.p.UnavailableFor()
		switch {
		case down == 0:
			told = false
		case !told && s.cfg.UnavailableReconnectAfter > 0 && down >= s.cfg.UnavailableReconnectAfter:
			told = true
			n := s.broadcast(reconnect("etcd unavailable from this collector", s.cfg.ReconnectWindow))
			s.lg.Warn("etcd unavailable too long: told reporters to reconnect elsewhere", zap.Duration("outage", down), zap.Int("streams", n))
		}
	}
}

// Report implements CollectorService.
func (s *Server) Report(srv collectorv1.CollectorService_ReportServer) error {
	s.handlers.Add(1)
	defer s.handlers.Done()
	if s.draining.Load() {
		s.m.rejected.WithLabelValues("draining").Inc()
		return status.Error(codes.Unavailable, "collector is draining: connect to another collector")
	}
	if n := s.open.Add(1); n > int64(s.cfg.MaxStreams) {
		s.open.Add(-1)
		s.m.rejected.WithLabelValues("max_streams").Inc()
		return status.Errorf(codes.ResourceExhausted, "collector holds its maximum of %d streams (--max-streams): connect to another collector", s.cfg.MaxStreams)
	}
	s.m.streams.Inc()
	defer func() { s.open.Add(-1); s.m.streams.Dec() }()

	ctx, cancel := context.WithCancelCause(srv.Context())
	defer cancel(nil)

	// Recv runs in its own goroutine so the handler can wait on acks from
	// the status worker, commands and cancellation at the same time. It
	// ends when the stream does (grpc cancels the stream after the handler
	// returns, which unblocks a pending Recv).
	recv := make(chan *collectorv1.ReportRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := srv.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recv <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	timer := time.NewTimer(s.cfg.RegisterTimeout)
	defer timer.Stop()
	var first *collectorv1.ReportRequest
	select {
	case first = <-recv:
	case err := <-recvErr:
		return endErr(err)
	case <-timer.C:
		s.m.rejected.WithLabelValues("register_timeout").Inc()
		return status.Errorf(codes.DeadlineExceeded, "register: no Register within %s of opening the stream", s.cfg.RegisterTimeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	st, sw, err := s.register(ctx, cancel, srv, first)
	if err != nil {
		return err
	}
	defer s.detach(st)
	return s.loop(ctx, srv, st, sw, recv, recvErr)
}

func endErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "stream cancelled by the client")
	}
	return err // io.EOF ends the stream cleanly in grpc-go when returned as nil; keep the transport's error otherwise
}

// register runs the first message through validation, authorisation and
// etcd, then attaches the stream.
func (s *Server) register(ctx context.Context, cancel context.CancelCauseFunc, srv collectorv1.CollectorService_ReportServer,
	m *collectorv1.ReportRequest) (*stream, *statusWorker, error) {
	reg := m.GetRegister()
	if reg == nil {
		s.m.messages.WithLabelValues("register", "failed_precondition").Inc()
		return nil, nil, status.Error(codes.FailedPrecondition, "register: the first message of a Report stream must be a Register")
	}
	now := s.now()
	if l := validation.Register(reg, now, s.cfg.Limits); len(l) > 0 {
		s.invalid("register", l)
		return nil, nil, validation.Status(l)
	}
	name := reg.GetNodeName()
	if err := s.authorize(ctx, name); err != nil {
		s.m.messages.WithLabelValues("register", "permission_denied").Inc()
		return nil, nil, err
	}
	lg := s.lg.With(zap.String("node", name), zap.String("reporter", reg.GetReporterId()))
	res, err := s.p.Register(ctx, newNode(reg, now))
	if err != nil {
		s.m.messages.WithLabelValues("register", "unavailable").Inc()
		if ctx.Err() != nil {
			// The reporter gave up (or a newer stream superseded this
			// one) while the registration waited: nothing to answer.
			return nil, nil, status.FromContextError(ctx.Err()).Err()
		}
		// Refusals come in storms; one summary line per interval, not
		// one line per refused stream.
		s.refusals.note(err)
		if errors.Is(err, persist.ErrBusy) {
			return nil, nil, withRetryAfter(status.New(codes.ResourceExhausted, "registration queue full: retry after the retry delay (RetryInfo) with jitter"),
				s.p.RegisterRetryAfter())
		}
		return nil, nil, withRetryAfter(status.Newf(codes.Unavailable, "cannot register node %q: %v", name, err), s.cfg.RetryAfter)
	}
	st := &stream{name: name, out: make(chan *collectorv1.ReportResponse, s.cfg.SendQueue), cancel: cancel}
	s.mu.Lock()
	if old := s.streams[name]; old != nil {
		// The newest stream wins: the old one is most likely a half-dead
		// connection the reporter already gave up on.
		old.cancel(errSuperseded)
	}
	s.streams[name] = st
	st.gen = s.table.Attach(name, res.Node.GetMetadata().GetUid(), now)
	s.mu.Unlock()

	if err := srv.Send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{
		Seq: m.GetSeq(), Durable: true, Node: res.Node, CollectorId: s.cfg.CollectorID}}}); err != nil {
		s.detach(st)
		return nil, nil, err
	}
	s.m.messages.WithLabelValues("register", "ok").Inc()
	lg.Info("node attached", zap.Bool("created", res.Created), zap.Uint64("gen", st.gen))
	if s.draining.Load() {
		st.push(reconnect("collector draining", time.Second))
	}
	sw := &statusWorker{s: s, st: st, stored: res.Status, jobs: make(chan statusJob, s.cfg.StatusQueue)}
	return st, sw, nil
}

// withRetryAfter attaches a google.rpc.RetryInfo detail to a stream-ending
// status, so reporters wait at least that long (plus jitter) before they
// register again.
func withRetryAfter(st *status.Status, d time.Duration) error {
	if d <= 0 {
		return st.Err()
	}
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); err == nil {
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

func (s *Server) detach(st *stream) {
	s.mu.Lock()
	if s.streams[st.name] == st {
		delete(s.streams, st.name)
	}
	s.mu.Unlock()
	if s.table.Detach(st.name, st.gen) {
		s.lg.Info("node detached", zap.String("node", st.name), zap.Uint64("gen", st.gen))
	}
}

func (s *Server) invalid(kind string, l validation.List) {
	s.m.messages.WithLabelValues(kind, "invalid").Inc()
	for _, e := range l {
		s.m.validation.WithLabelValues(validation.MetricField(e.Field)).Inc()
	}
}
