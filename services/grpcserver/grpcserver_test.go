package grpcserver

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// A hand-written service with two methods that both fail with Unavailable
// (logged at error level by the fixed chain).
func failing(method string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(context.Context, any) (any, error) { return nil, status.Error(codes.Unavailable, "draining") }
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Svc/" + method}, h)
	}
}

var testDesc = grpc.ServiceDesc{
	ServiceName: "test.Svc",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Logged", Handler: failing("Logged")}, {MethodName: "Quiet", Handler: failing("Quiet")}},
}

// Methods named in Options.Unlogged bypass the logging interceptor: no
// "finished call" line, not even for an error; every other method keeps it.
func TestUnloggedMethodsSkipCallLogs(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	cfg := Config{ListenAddress: "127.0.0.1:0", TLS: tlsconfig.Config{Insecure: true}, MaxRecvMsgSize: 1 << 20,
		MaxConcurrentStreams: 100, KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, MinClientPingInterval: time.Second,
		DrainTimeout: time.Second}
	s, err := New(cfg, zap.New(core), nil, Options{Unlogged: []string{"/test.Svc/Quiet"}})
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterService(&testDesc, struct{}{})
	go func() { _ = s.Serve(s.ln) }()
	defer s.Stop()

	cc, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, m := range []string{"/test.Svc/Quiet", "/test.Svc/Logged"} {
		if err := cc.Invoke(ctx, m, &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: %v", m, err)
		}
	}
	// The interceptor logs when the handler returns, before the response
	// is written: both calls' lines (if any) exist once Invoke returned.
	var methods []string
	for _, e := range logs.FilterMessage("finished call").All() {
		methods = append(methods, e.ContextMap()["grpc.method"].(string))
	}
	if len(methods) != 1 || methods[0] != "Logged" {
		t.Fatalf("finished-call lines for methods %v, want only Logged", methods)
	}
}

// The windows are fixed (no BDP-estimation PINGs) and advertised: the
// server's first SETTINGS carry the configured stream window.
func TestFixedFlowControlWindows(t *testing.T) {
	base := Config{ListenAddress: "127.0.0.1:0", TLS: tlsconfig.Config{Insecure: true}, MaxRecvMsgSize: 1 << 20,
		MaxConcurrentStreams: 100, KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, MinClientPingInterval: time.Second}
	bad := base
	bad.StreamWindow = 1000
	if _, err := New(bad, zap.NewNop(), nil, Options{}); err == nil || !strings.Contains(err.Error(), "--grpc.stream-window-size=1000") {
		t.Fatalf("a 1000-byte stream window: got %v, want an error naming the flag", err)
	}
	s, err := New(base, zap.NewNop(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(s.ln) }()
	defer s.Stop()
	c, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingInitialWindowSize); !ok || v != DefaultStreamWindow {
		t.Fatalf("SETTINGS_INITIAL_WINDOW_SIZE = %d (present %v), want %d", v, ok, DefaultStreamWindow)
	}
}

// Methods named in Options.Uncounted keep their call metrics but not their
// message counters; every other stream keeps both. Health.Watch is the
// stream: each call sends one message (the status) before it is cancelled.
func TestUncountedStreamsCountCallsNotMessages(t *testing.T) {
	for _, tc := range []struct {
		uncounted []string
		wantSent  float64
	}{{nil, 1}, {[]string{"/grpc.health.v1.Health/Watch"}, 0}} {
		reg := prometheus.NewRegistry()
		cfg := Config{ListenAddress: "127.0.0.1:0", TLS: tlsconfig.Config{Insecure: true}, MaxRecvMsgSize: 1 << 20,
			MaxConcurrentStreams: 100, KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, MinClientPingInterval: time.Second,
			DrainTimeout: time.Second}
		s, err := New(cfg, zap.NewNop(), reg, Options{Uncounted: tc.uncounted})
		if err != nil {
			t.Fatal(err)
		}
		s.metricsInit()
		go func() { _ = s.Serve(s.ln) }()
		cc, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		cc.Close()
		s.Stop() // waits for the handler: its call is counted once Stop returns
		started := testutil.ToFloat64(metricVec(t, reg, "grpc_server_started_total", "Watch"))
		sent := testutil.ToFloat64(metricVec(t, reg, "grpc_server_msg_sent_total", "Watch"))
		if started != 1 || sent != tc.wantSent {
			t.Errorf("Uncounted=%v: started %v, messages sent %v; want 1 and %v", tc.uncounted, started, sent, tc.wantSent)
		}
	}
}

// metricVec gathers the series of name whose grpc_method is method.
func metricVec(t *testing.T, g prometheus.Gatherer, name, method string) prometheus.Collector {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == method {
					c.Add(m.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}
