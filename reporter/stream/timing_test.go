// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package stream

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

func refused(d time.Duration) error {
	st, err := status.New(codes.ResourceExhausted, "registration queue full").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestReconnectWaitHonoursRetryDelay(t *testing.T) {
	// Wrapped as session() wraps the register error.
	err := fmt.Errorf("register: %w", refused(20*time.Second))
	if d := RetryDelay(err); d != 20*time.Second {
		t.Fatalf("RetryDelay = %s, want 20s", d)
	}
	seen := map[time.Duration]bool{}
	for range 100 {
		w := ReconnectWait(100*time.Millisecond, err)
		if w < 20*time.Second || w > 30*time.Second {
			t.Fatalf("wait %s outside [20s, 30s]", w)
		}
		seen[w] = true
	}
	if len(seen) < 10 {
		t.Fatalf("retry waits are not jittered: %d distinct values in 100", len(seen))
	}
	// Without a hint: the jittered backoff; a hint shorter than the backoff
	// does not shorten it; an absurd hint is capped.
	if w := ReconnectWait(4*time.Second, status.Error(codes.Unavailable, "x")); w < 2*time.Second || w >= 4*time.Second {
		t.Fatalf("plain backoff wait %s", w)
	}
	if w := ReconnectWait(4*time.Second, refused(time.Millisecond)); w < 2*time.Second {
		t.Fatalf("short hint shortened the backoff: %s", w)
	}
	if d := RetryDelay(refused(time.Hour)); d != MaxRetryDelay {
		t.Fatalf("RetryDelay of a 1h hint = %s, want the cap %s", d, MaxRetryDelay)
	}
	if RetryDelay(nil) != 0 || RetryDelay(fmt.Errorf("plain")) != 0 {
		t.Fatal("RetryDelay without a status must be 0")
	}
}

// A renewal on its phase is followed by the next one an interval later;
// the first after (re)registration by the next phase at least half an
// interval away; phases name instants of Unix time, the same in every
// process.
func TestUntilPhase(t *testing.T) {
	iv := 10 * time.Second
	at := func(sec float64) time.Time { return time.Unix(0, int64(sec*1e9)) }
	for _, c := range []struct {
		now   float64
		phase float64
		want  time.Duration
	}{
		{1_700_000_003, 0.3, 10 * time.Second},            // on phase: one interval
		{1_700_000_003.001, 0.3, 9999 * time.Millisecond}, // a timer a millisecond late: back on phase
		{1_700_000_000, 0.3, 13 * time.Second},            // 3 s to go is under half an interval: the one after
		{1_700_000_000, 0.6, 6 * time.Second},             // 6 s to go
		{1_700_000_004.9, 0.0, 5100 * time.Millisecond},
		{1_700_000_005, 0.0, 15 * time.Second}, // exactly half an interval away: the one after
	} {
		got := UntilPhase(at(c.now), iv, c.phase)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("now %.3f, phase %.1f: wait %s, want %s", c.now, c.phase, got, c.want)
		}
		if got <= iv/2 || got > 3*iv/2 {
			t.Errorf("now %.3f, phase %.1f: wait %s outside (interval/2, 3·interval/2]", c.now, c.phase, got)
		}
	}
}

func TestRefusalHint(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "collector full").WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)}, &collectorv1.Reconnect{PreferredAddress: "c2:9090"})
	if err != nil {
		t.Fatal(err)
	}
	if got := RefusalHint(fmt.Errorf("register: %w", st.Err())); got != "c2:9090" {
		t.Fatalf("RefusalHint = %q, want c2:9090", got)
	}
	if got := RefusalHint(fmt.Errorf("register: %w", refused(time.Second))); got != "" {
		t.Fatalf("RefusalHint of a refusal naming nobody = %q", got)
	}
}
