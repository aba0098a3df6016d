// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package grpcserver builds the gRPC server every nodepulse service runs:
// one fixed interceptor chain, TLS/mTLS, keepalive enforcement, message
// limits, the grpc.health.v1 service, reflection (so grpcurl needs no proto
// files), Prometheus metrics, and a drain sequence on shutdown.
package grpcserver

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/nodepulse/nodepulse/services/grpcmw"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// Config of a gRPC endpoint.
type Config struct {
	ListenAddress string
	TLS           tlsconfig.Config
	// MaxRecvMsgSize bounds one inbound message; larger ones fail with
	// ResourceExhausted before any handler runs.
	MaxRecvMsgSize int
	// MaxConcurrentStreams per connection.
	MaxConcurrentStreams uint32
	// KeepaliveTime: the server pings an idle connection after this long and
	// closes it if the ping is not answered within KeepaliveTimeout. This is
	// how a dead reporter's stream is noticed.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MinClientPingInterval: clients pinging more often are disconnected.
	MinClientPingInterval time.Duration
	// ShutdownDelay: after health turns NOT_SERVING, wait this long before
	// draining, so balancers and clients stop picking this server.
	ShutdownDelay time.Duration
	// DrainTimeout bounds GracefulStop; long-lived streams are then cut.
	DrainTimeout time.Duration
	// StreamWindow and ConnWindow are the HTTP/2 flow-control windows this
	// server grants, per stream and per connection; 0 means the default.
	// They are fixed on purpose: see DefaultStreamWindow.
	StreamWindow int
	ConnWindow   int
	// MaxConnections caps the connections open at once; more are closed at
	// accept. 0 derives it from RLIMIT_NOFILE, keeping a reserve of
	// descriptors for the admin port, etcd and files (connectionCap).
	MaxConnections int
	// ConnectionTimeout bounds a new connection's TLS and HTTP/2
	// handshake; 0 means DefaultConnectionTimeout.
	ConnectionTimeout time.Duration
	// WriteBufferSize and ReadBufferSize are grpc-go's per-connection
	// transport buffers: 0 keeps grpc-go's 32 KiB, negative means none
	// (every frame its own syscall). On plaintext connections both come
	// from shared pools and are held only while a connection reads or
	// writes (the read side through readyConn), so their size costs an
	// idle connection nothing; under TLS grpc-go keeps a read buffer per
	// connection. Measured per setting in docs/benchmarks.md ("Transport
	// buffers").
	WriteBufferSize int
	ReadBufferSize  int
}

// RegisterFlags adds the grpc.* flags with the given default address.
func (c *Config) RegisterFlags(fs *flag.FlagSet, defAddr string) {
	fs.StringVar(&c.ListenAddress, "grpc.listen-address", defAddr, "gRPC listen address (host:port)")
	c.TLS.RegisterFlags(fs, "grpc", false)
	fs.IntVar(&c.MaxRecvMsgSize, "grpc.max-recv-msg-size", 1<<20, "largest inbound message in bytes")
	fs.Func("grpc.max-concurrent-streams", "streams per connection (default 10000)", func(s string) error {
		var v uint32
		_, err := fmt.Sscan(s, &v)
		c.MaxConcurrentStreams = v
		return err
	})
	c.MaxConcurrentStreams = 10000
	fs.DurationVar(&c.KeepaliveTime, "grpc.keepalive-time", 20*time.Second, "ping idle connections after this long")
	fs.DurationVar(&c.KeepaliveTimeout, "grpc.keepalive-timeout", 10*time.Second, "close a connection whose ping is not answered within this")
	fs.DurationVar(&c.MinClientPingInterval, "grpc.min-client-ping-interval", 5*time.Second, "disconnect clients that ping more often than this")
	fs.DurationVar(&c.ShutdownDelay, "grpc.shutdown-delay", 0, "on shutdown, report NOT_SERVING for this long before draining")
	fs.DurationVar(&c.DrainTimeout, "grpc.drain-timeout", 10*time.Second, "on shutdown, wait this long for calls to finish before cutting them")
	fs.IntVar(&c.StreamWindow, "grpc.stream-window-size", DefaultStreamWindow, "HTTP/2 flow-control window per stream in bytes (fixed; at least 65536)")
	fs.IntVar(&c.ConnWindow, "grpc.conn-window-size", DefaultConnWindow, "HTTP/2 flow-control window per connection in bytes (fixed; at least 65536)")
	fs.IntVar(&c.MaxConnections, "grpc.max-connections", 0, "most connections open at once; more are closed at accept (0: the file-descriptor limit less max(64, 10 %) kept for the admin port, etcd and files)")
	fs.DurationVar(&c.ConnectionTimeout, "grpc.connection-timeout", DefaultConnectionTimeout, "close a new connection whose TLS/HTTP/2 handshake has not completed within this")
	fs.IntVar(&c.WriteBufferSize, "grpc.write-buffer-size", 0, "bytes a connection batches before a write syscall (0: grpc-go's 32 KiB; negative: none)")
	fs.IntVar(&c.ReadBufferSize, "grpc.read-buffer-size", 0, "bytes a connection reads per syscall at most (0: grpc-go's 32 KiB; negative: none)")
}

// Default flow-control windows, for servers and for grpcclient. They are
// fixed on purpose. With grpc-go's dynamic windows a connection estimates
// its bandwidth-delay product by sending a PING whenever data arrives and no
// estimate is in flight, and stops only once the window has grown to 16 MiB,
// which small messages never make it do. A collector's connection carries
// ~10 small messages a second from ~100 multiplexed reporters, so nearly
// every heartbeat cost a PING write and a PING-ack read on both ends, as
// many syscalls as the heartbeat itself (docs/adr/0017-grpc-transport-settings.md). Fixed windows turn the estimator
// off. 1 MiB per stream carries the largest message a collector accepts
// without a window update; 4 MiB per connection bounds what one client can
// make a server buffer, below the 16 MiB the dynamic windows may grow to.
const (
	DefaultStreamWindow = 1 << 20
	DefaultConnWindow   = 4 << 20
)

// windows returns the configured windows, defaults for unset ones.
func (c Config) windows() (stream, conn int32, err error) {
	get := func(v, def int, flag string) (int32, error) {
		switch {
		case v == 0:
			return int32(def), nil
		case v < 64<<10 || v > 1<<30:
			return 0, fmt.Errorf("--grpc.%s=%d: must be between 65536 and 1073741824 bytes", flag, v)
		}
		return int32(v), nil
	}
	if stream, err = get(c.StreamWindow, DefaultStreamWindow, "stream-window-size"); err != nil {
		return 0, 0, err
	}
	conn, err = get(c.ConnWindow, DefaultConnWindow, "conn-window-size")
	return stream, conn, err
}

// Options adds service-specific pieces to the fixed chain.
type Options struct {
	// Check authorizes a call before its handler runs (for every unary
	// call and stream, after logging and before Unary/Stream): an error
	// ends the call with it. Where auth goes; nil allows everything.
	Check func(ctx context.Context, fullMethod string) error
	// Unary and Stream interceptors run after Check and before recovery:
	// this is where validation goes. Stream does not apply to LongLived
	// methods.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// ServerOptions are appended last. They must not set a codec: use
	// Codec, which New wraps so undecodable messages are InvalidArgument.
	ServerOptions []grpc.ServerOption
	// Codec replaces the proto codec (nil: grpc-go's).
	Codec encoding.CodecV2
	// Unlogged are full method names ("/pkg.Service/Method") the logging
	// interceptor skips: high-volume calls whose service logs them itself.
	Unlogged []string
	// LongLived are full method names of streams that live as long as
	// their peer, one per node (the Report streams). They get a short
	// chain instead of the fixed one:
	//
	//	metrics (calls only) → Check → handler, recovery in the same frame
	//
	// - The gRPC metrics count their calls (grpc_server_started_total,
	//   _handled_total, handling time) but not their messages
	//   (grpc_server_msg_*_total): the metrics interceptor looks up its label
	//   values on every message, a cost paid per heartbeat. Their service
	//   counts its messages itself.
	// - The call logger skips them: it would hold fields for the stream's
	//   life, and a drain would log one "finished call" error per stream.
	//   Their service logs attach, leave and detach itself.
	// - Each stream's goroutine sits under every interceptor of the chain
	//   for its whole life, and every GC cycle scans its stack: the fixed
	//   chain put ten frames there, 1.4 of the 5.2 KB scanned per stream
	//   (TestStreamMemory), 140 MB per cycle at 100,000 nodes.
	LongLived []string
}

// Server is a listening, not yet serving, gRPC server.
type Server struct {
	*grpc.Server
	cfg     Config
	lg      *zap.Logger
	ln      net.Listener
	Health  *health.Server
	mu      sync.Mutex
	onDrain []func()

	metricsInit func()
}

// New validates cfg, listens, and builds the server with the chain
//
//	metrics → logging → Options.Check (auth) → Options.Unary/Stream (validation) → recovery
//
// outermost first, and the short one of Options.LongLived. Metrics are
// outermost so the codes they count include recovered panics; recovery is
// innermost so a panic is logged and counted as Internal by everything
// around it.
func New(cfg Config, lg *zap.Logger, reg prometheus.Registerer, opts Options) (*Server, error) {
	if err := cfg.TLS.Validate("grpc"); err != nil {
		return nil, err
	}
	// Certificates reloaded when their files change; their expiry is a
	// metric (registered in plaintext too, so the family always exists).
	if _, err := tlsconfig.ExpiryMetric(reg); err != nil {
		return nil, fmt.Errorf("register TLS metrics: %w", err)
	}
	tlsCfg, err := cfg.TLS.ServerReloading(tlsconfig.Options{Role: "grpc-server", Logger: lg.Named("tls"), Registerer: reg})
	if err != nil {
		return nil, err
	}
	streamWin, connWin, err := cfg.windows()
	if err != nil {
		return nil, err
	}
	maxConns, err := cfg.maxConnections()
	if err != nil {
		return nil, err
	}
	connTimeout := cfg.ConnectionTimeout
	switch {
	case connTimeout < 0:
		return nil, fmt.Errorf("--grpc.connection-timeout=%s: must be positive", connTimeout)
	case connTimeout == 0:
		connTimeout = DefaultConnectionTimeout
	}
	connMetrics, err := newConnMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register gRPC connection metrics: %w", err)
	}
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}),
	))
	if err := metric.Register(reg, metrics); err != nil {
		return nil, fmt.Errorf("register gRPC metrics: %w", err)
	}
	glg := grpcmw.ZapLogger(lg.Named("grpc"))
	// Keyed by service and method as CallMeta holds them: its FullMethod()
	// formats a new string on every call, and the matcher runs on every
	// stream a collector opens (4.6 % of its CPU while a restarted
	// collector took its fleet back, docs/adr/0017-grpc-transport-settings.md).
	type serviceMethod struct{ service, method string }
	unlogged := map[serviceMethod]bool{}
	for _, m := range opts.Unlogged {
		service, method, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		unlogged[serviceMethod{service, method}] = true
	}
	logged := selector.MatchFunc(func(ctx context.Context, c interceptors.CallMeta) bool {
		return grpcmw.NotHealthOrReflection(ctx, c) && !unlogged[serviceMethod{c.Service, c.Method}]
	})
	recoverHandler := grpcmw.RecoveryHandler(lg)
	rec := recovery.WithRecoveryHandlerContext(recoverHandler)

	unary := []grpc.UnaryServerInterceptor{
		metrics.UnaryServerInterceptor(),
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(glg, grpcmw.LoggingOptions()...), logged),
	}
	if opts.Check != nil {
		unary = append(unary, checkUnary(opts.Check))
	}
	unary = append(unary, opts.Unary...)
	unary = append(unary, recovery.UnaryServerInterceptor(rec))
	stream := []grpc.StreamServerInterceptor{
		metrics.StreamServerInterceptor(),
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(glg, grpcmw.LoggingOptions()...), logged),
	}
	if opts.Check != nil {
		stream = append(stream, checkStream(opts.Check))
	}
	stream = append(stream, opts.Stream...)
	stream = append(stream, recovery.StreamServerInterceptor(rec))

	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.StreamInterceptor(routeStreams(chainStreams(stream), longLived(metrics.StreamServerInterceptor(), opts.Check, recoverHandler), opts.LongLived)),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.MinClientPingInterval, PermitWithoutStream: true}),
		// Fixed windows: no BDP-estimation PING per sparse message.
		grpc.StaticStreamWindowSize(streamWin),
		grpc.StaticConnWindowSize(connWin),
		// A socket that never completes its handshake is closed after
		// this, so idle sockets cannot hold descriptors for long.
		grpc.ConnectionTimeout(connTimeout),
		// Undecodable messages answered InvalidArgument (RegisterService).
		serverCodec(opts.Codec),
	}
	if cfg.WriteBufferSize != 0 {
		sopts = append(sopts, grpc.WriteBufferSize(max(cfg.WriteBufferSize, 0)))
	}
	if cfg.ReadBufferSize != 0 {
		sopts = append(sopts, grpc.ReadBufferSize(max(cfg.ReadBufferSize, 0)))
	}
	if tlsCfg != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	sopts = append(sopts, opts.ServerOptions...)

	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("gRPC listen on %s: %w", cfg.ListenAddress, err)
	}
	ln = newLimitListener(ln, maxConns, connTimeout, connMetrics, lg.Named("grpc"))
	s := &Server{Server: grpc.NewServer(sopts...), cfg: cfg, lg: lg.Named("grpc"), ln: ln, Health: health.NewServer()}
	healthpb.RegisterHealthServer(s, s.Health)
	reflection.Register(s.Server)
	// Not serving until the service says it is ready.
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.metricsInit = func() { metrics.InitializeMetrics(s.Server) }
	if cfg.TLS.Insecure {
		lg.Warn("gRPC endpoint is PLAINTEXT (--grpc.insecure): no encryption, no client identity; development only", zap.String("address", ln.Addr().String()))
	}
	return s, nil
}

// checkUnary and checkStream run check before the handler.
func checkUnary(check func(context.Context, string) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

func checkStream(check func(context.Context, string) error) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

// chainStreams nests in, first outermost, as grpc.ChainStreamInterceptor
// does (which cannot be combined with routeStreams' own interceptor), with
// a stream whose undecodable messages are InvalidArgument (decodeStream).
func chainStreams(in []grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return nest(in, info, handler)(srv, &decodeStream{ServerStream: ss})
	}
}

func nest(in []grpc.StreamServerInterceptor, info *grpc.StreamServerInfo, handler grpc.StreamHandler) grpc.StreamHandler {
	if len(in) == 0 {
		return handler
	}
	return func(srv any, ss grpc.ServerStream) error {
		return in[0](srv, ss, info, nest(in[1:], info, handler))
	}
}

// routeStreams sends the streams of the long-lived methods through short,
// every other stream through chain.
func routeStreams(chain, short grpc.StreamServerInterceptor, longLived []string) grpc.StreamServerInterceptor {
	if len(longLived) == 0 {
		return chain
	}
	long := map[string]bool{}
	for _, m := range longLived {
		long[m] = true
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if long[info.FullMethod] {
			return short(srv, ss, info, handler)
		}
		return chain(srv, ss, info, handler)
	}
}

// longLived is the short chain of Options.LongLived: the metrics
// interceptor counts the call, and one frame under it checks, recovers and
// calls the handler with a stream no interceptor wrapped (so no message is
// counted), only decodeStream.
func longLived(metrics grpc.StreamServerInterceptor, check func(context.Context, string) error, recovered func(context.Context, any) error) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return metrics(srv, ss, info, func(srv any, _ grpc.ServerStream) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = recovered(ss.Context(), p)
				}
			}()
			if check != nil {
				if err := check(ss.Context(), info.FullMethod); err != nil {
					return err
				}
			}
			return handler(srv, &decodeStream{ServerStream: ss})
		})
	}
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// OnDrain registers a hook run when shutdown starts, after health turns
// NOT_SERVING and before GracefulStop: long-lived streams use it to tell their
// clients to move and to end, or GracefulStop would wait for them.
func (s *Server) OnDrain(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDrain = append(s.onDrain, f)
}

// SetServing sets the health status of the whole server ("" service) and of
// the named services.
func (s *Server) SetServing(serving bool, services ...string) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, svc := range append([]string{""}, services...) {
		s.Health.SetServingStatus(svc, st)
	}
}

// Run serves until ctx is done, then drains: health NOT_SERVING, drain hooks,
// ShutdownDelay, GracefulStop, and Stop if calls outlast DrainTimeout.
func (s *Server) Run(ctx context.Context) error {
	s.metricsInit()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(s.ln) }()
	s.lg.Info("gRPC server listening", zap.String("address", s.ln.Addr().String()), zap.Bool("tls", !s.cfg.TLS.Insecure),
		zap.Int64("maxConnections", s.ln.(*limitListener).max), zap.Duration("connectionTimeout", s.ln.(*limitListener).timeout))
	select {
	case err := <-errc:
		return fmt.Errorf("gRPC serve: %w", err)
	case <-ctx.Done():
	}
	s.lg.Info("gRPC server draining", zap.Duration("shutdownDelay", s.cfg.ShutdownDelay), zap.Duration("drainTimeout", s.cfg.DrainTimeout))
	s.Health.Shutdown()
	s.mu.Lock()
	hooks := s.onDrain
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	if s.cfg.ShutdownDelay > 0 {
		time.Sleep(s.cfg.ShutdownDelay)
	}
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	t := time.NewTimer(s.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.lg.Warn("drain timeout: cutting remaining calls")
		s.Stop()
		<-stopped
	}
	s.lg.Info("gRPC server stopped")
	return nil
}
