package heartbeat

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
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
