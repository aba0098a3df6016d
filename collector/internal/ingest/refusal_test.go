package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
)

// A refused Register ends the stream with a status that carries a retry
// delay (google.rpc.RetryInfo), so reporters stay away instead of retrying
// into an overloaded or cut-off collector at once.
func TestRefusedRegisterCarriesRetryInfo(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.RetryAfter = 3 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.mem.Fail(errors.New("injected outage"))
	waitFor(t, func() bool { return !h.p.Available() })
	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(register("node-r")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("register during outage: %v", err)
	}
	if delay := retryDelay(st); delay != 3*time.Second {
		t.Fatalf("retry delay %s, want 3s (details %v)", delay, st.Details())
	}
}

// While the registration queue is full a new stream is refused at once,
// before its Register is read, with a RetryInfo delay; once the queue
// drains, registrations go through again.
func TestFullRegistrationQueueRefusesStreamsAtOnce(t *testing.T) {
	h := newHarness(t, func(_ *Config, p *persist.Config) { p.RegisterQueueSize, p.RegisterConcurrency = 1, 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make(chan struct{})
	h.store.hold.Store(&hold)
	send := func(name string) {
		t.Helper()
		s, err := h.client.Report(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(register(name)); err != nil {
			t.Fatal(err)
		}
	}
	// The only worker's batch waits in etcd; the next registration fills
	// the one-place queue.
	send("node-a")
	waitFor(t, func() bool { return h.store.held.Load() > 0 })
	send("node-b")
	waitFor(t, h.p.RegisterQueueFull)

	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv() // nothing sent: refused without reading a Register
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("stream opened on a full registration queue: %v", err)
	}
	if delay := retryDelay(st); delay < time.Second {
		t.Fatalf("retry delay %s, want at least 1s (details %v)", delay, st.Details())
	}

	h.store.hold.Store(nil)
	close(hold)
	waitFor(t, func() bool { return !h.p.RegisterQueueFull() })
	if _, ack := h.open(t, ctx, "node-c"); ack.GetError() != nil {
		t.Fatalf("register after the queue drained: %v", ack.GetError())
	}
}

// retryDelay is the RetryInfo delay a status carries, 0 without one.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
