// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
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
	"google.golang.org/grpc/metadata"
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
	s, err := New(testConfig(), zap.New(core), nil, Options{Unlogged: []string{"/test.Svc/Quiet"}})
	if err != nil {
		t.Fatal(err)
	}
	cc := serve(t, s, &testDesc)
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

// Methods named in Options.LongLived keep their call metrics but not their
// message counters; every other stream keeps both. Health.Watch is the
// stream: each call sends one message (the status) before it is cancelled.
func TestLongLivedStreamsCountCallsNotMessages(t *testing.T) {
	for _, tc := range []struct {
		longLived []string
		wantSent  float64
	}{{nil, 1}, {[]string{"/grpc.health.v1.Health/Watch"}, 0}} {
		reg := prometheus.NewRegistry()
		s, err := New(testConfig(), zap.NewNop(), reg, Options{LongLived: tc.longLived})
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
			t.Errorf("LongLived=%v: started %v, messages sent %v; want 1 and %v", tc.longLived, started, sent, tc.wantSent)
		}
	}
}

// serve registers desc on s, serves it until the test ends, and returns a
// client connection to it.
func serve(t *testing.T, s *Server, desc *grpc.ServiceDesc) *grpc.ClientConn {
	t.Helper()
	s.RegisterService(desc, struct{}{})
	go func() { _ = s.Serve(s.ln) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func testConfig() Config {
	return Config{ListenAddress: "127.0.0.1:0", TLS: tlsconfig.Config{Insecure: true}, MaxRecvMsgSize: 1 << 20,
		MaxConcurrentStreams: 100, KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, MinClientPingInterval: time.Second,
		DrainTimeout: time.Second}
}

// streamDesc: two server-streaming methods, Long and Short, whose handler
// is streamHandler.
func streamDesc(h func(ss grpc.ServerStream) error) *grpc.ServiceDesc {
	handler := func(_ any, ss grpc.ServerStream) error { return h(ss) }
	return &grpc.ServiceDesc{
		ServiceName: "test.Streams",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{
			{StreamName: "Long", Handler: handler, ServerStreams: true, ClientStreams: true},
			{StreamName: "Short", Handler: handler, ServerStreams: true, ClientStreams: true},
		},
	}
}

// framesBelowGRPC counts the frames between grpc-go's stream dispatch and
// the service's handler (streamDesc's wrapper, which calls the caller of
// framesBelowGRPC): the interceptor chain.
func framesBelowGRPC() int {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for n := 0; ; n++ {
		f, more := frames.Next()
		if strings.Contains(f.Function, "grpc.(*Server).processStreamingRPC") || !more {
			return n - 2 // the handler and its wrapper are not part of the chain
		}
	}
}

// A long-lived stream runs Check and recovery like any other stream, under
// a chain a few frames deep instead of the fixed chain's ten: every GC
// cycle scans each such stream's stack.
func TestLongLivedStreamsShortChain(t *testing.T) {
	depth := map[string]int{}
	var mu sync.Mutex
	h := func(ss grpc.ServerStream) error {
		m, _ := grpc.Method(ss.Context())
		mu.Lock()
		depth[m] = framesBelowGRPC()
		mu.Unlock()
		if md, _ := metadata.FromIncomingContext(ss.Context()); len(md.Get("panic")) > 0 {
			panic("handler bug")
		}
		return nil
	}
	check := func(ctx context.Context, method string) error {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("deny")) > 0 {
			return status.Errorf(codes.PermissionDenied, "%s: denied", method)
		}
		return nil
	}
	s, err := New(testConfig(), zap.NewNop(), nil, Options{Check: check, LongLived: []string{"/test.Streams/Long"}})
	if err != nil {
		t.Fatal(err)
	}
	cc := serve(t, s, streamDesc(h))
	call := func(method string, md ...string) error {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
		defer cancel()
		cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
		if err != nil {
			return err
		}
		_ = cs.CloseSend()
		return cs.RecvMsg(&emptypb.Empty{})
	}
	for _, m := range []string{"/test.Streams/Long", "/test.Streams/Short"} {
		if err := call(m); err != io.EOF {
			t.Fatalf("%s: %v, want a clean end", m, err)
		}
		if err := call(m, "deny", "1"); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s with a denying check: %v, want PermissionDenied", m, err)
		}
		if err := call(m, "panic", "1"); status.Code(err) != codes.Internal {
			t.Errorf("%s panicking: %v, want Internal", m, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	long, short := depth["/test.Streams/Long"], depth["/test.Streams/Short"]
	t.Logf("frames between grpc-go and the handler: long-lived %d, other streams %d", long, short)
	if long > 4 || short <= long {
		t.Errorf("long-lived stream under %d frames, others under %d: want at most 4 and fewer than the others", long, short)
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
