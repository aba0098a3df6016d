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
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != 3*time.Second {
		t.Fatalf("retry delay %s, want 3s (details %v)", delay, st.Details())
	}
}
