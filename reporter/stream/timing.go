// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package stream

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

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
	// RegisterTimeout is how long a Register may stay unanswered before
	// the stream is given up and opened again.
	RegisterTimeout = 30 * time.Second
)

// Jitter returns d plus up to JitterFactor of it (wait.JitterUntil).
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + time.Duration(rand.Float64()*JitterFactor*float64(d))
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

// RefusalHint is the collector named by the status that ended a stream
// (a Reconnect detail: a collector refusing the stream, full, draining or
// without etcd, names the one with the most room, spec §20.3); "" when
// there is none. It is for the next attempt only.
func RefusalHint(err error) string {
	if err == nil {
		return ""
	}
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if r, ok := d.(*collectorv1.Reconnect); ok {
			return r.GetPreferredAddress()
		}
	}
	return ""
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

// Backoff is the reconnect backoff of one node: 100ms doubling up to 7s,
// as the kubelet's registration backoff, restarted by every session that
// got as far as registering (it proved the path works).
type Backoff struct {
	initial, max, cur time.Duration
}

// NewBackoff returns a backoff from initial doubling up to limit
// (BackoffInitial and BackoffMax when ≤ 0 or inconsistent).
func NewBackoff(initial, limit time.Duration) Backoff {
	if initial <= 0 {
		initial = BackoffInitial
	}
	if limit < initial {
		limit = max(BackoffMax, initial)
	}
	return Backoff{initial: initial, max: limit, cur: initial}
}

// Registered restarts the backoff: the session that just ended had
// registered.
func (b *Backoff) Registered() { b.cur = b.initial }

// Next is the wait before reconnecting after a session ended with err
// (ReconnectWait), and doubles the backoff for the next failure.
func (b *Backoff) Next(err error) time.Duration {
	if b.cur <= 0 {
		*b = NewBackoff(b.initial, b.max)
	}
	w := ReconnectWait(b.cur, err)
	b.cur = min(2*b.cur, b.max)
	return w
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

// ReportPeriod is how long after a status report the next unchanged one is
// due: freq, or, after a change or a (re)start, freq + d with d uniform in
// [-freq/2, +freq/2] (kubelet v1.34+, spec §4.3), so a fleet restarted
// together does not report in lockstep every 5 minutes.
func ReportPeriod(freq time.Duration, changed bool) time.Duration {
	if changed {
		freq += time.Duration((rand.Float64() - 0.5) * float64(freq))
	}
	return freq
}
