// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"strings"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// clockRun replays a node renewing every 10 s on the feed, judged every
// second on the monitor's clock, which is real time plus offset(real).
// alive(real) says whether the node renews at that real instant. It
// returns the first real instant at which the node was served Unknown
// (zero: never) and the real time of its last renewal before that.
func clockRun(t *testing.T, s *sim, start, end time.Duration, offset func(time.Duration) time.Duration, stale func(time.Duration) (bool, time.Duration), alive func(time.Duration) bool) (marked, lastRenewal time.Duration) {
	t.Helper()
	for real := start; real <= end; real += time.Second {
		now := t0.Add(real + offset(real))
		if real%(10*time.Second) == 0 && alive(real) {
			s.feed++
			s.feedAt = now
			lastRenewal = real
		}
		s.paused, s.blind = stale(real)
		if r := s.at(now); ready(r) == nodemodel.Unknown {
			return real, lastRenewal
		}
	}
	return 0, lastRenewal
}

func never(time.Duration) (bool, time.Duration) { return false, 0 }

// The monitor's clock steps back 10 minutes (an NTP correction, on a
// clock whose readings carry no monotonic part, as an injected one):
// nothing is marked, and a node killed after the step is detected a grace
// period after its last renewal, not 10 minutes later.
func TestMonitorClockStepBack(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	step := func(real time.Duration) time.Duration {
		if real >= 60*time.Second {
			return -10 * time.Minute
		}
		return 0
	}
	const kill = 300 * time.Second
	marked, last := clockRun(t, s, 0, 20*time.Minute, step, never, func(real time.Duration) bool { return real < kill })
	if marked == 0 {
		t.Fatal("a node killed after the step was never marked")
	}
	if marked <= last+cfg.GracePeriod || marked > last+cfg.GracePeriod+2*time.Second {
		t.Fatalf("marked %s after its last renewal, want within (grace, grace + 2 s] = (%s, %s]", marked-last, cfg.GracePeriod, cfg.GracePeriod+2*time.Second)
	}
}

// The monitor's clock steps back 10 minutes just after it marked a node
// Unknown: the node, heard again, recovers within one renewal interval of
// renewing again instead of staying Unknown until the clock catches up with
// the mark. (The first renewal after the step is heard at the instant the
// mark was brought back to, which does not count as after it.)
func TestMonitorClockStepBackAfterAMark(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	marked, _ := clockRun(t, s, 0, 5*time.Minute, func(time.Duration) time.Duration { return 0 }, never,
		func(real time.Duration) bool { return real < 60*time.Second })
	if marked == 0 {
		t.Fatal("not marked")
	}
	// Stepped back; the node renews again from the next second on, every
	// 10 s. Within 11 s of the step it must be Ready again.
	back := t0.Add(marked - 10*time.Minute)
	for i := 1; i <= 11; i++ {
		now := back.Add(time.Duration(i) * time.Second)
		if i%10 == 1 {
			s.feed++
			s.feedAt = now
		}
		if r := s.at(now); ready(r) == nodemodel.True {
			return
		}
	}
	t.Fatal("a node heard after the step back stayed Unknown (the mark lies in the monitor's new future)")
}

// The monitor's clock steps forward 10 minutes: every feed looks stale
// at once (the tracker holds every node) until the next batch, which gives
// the whole gap back. Nothing is marked, and a node killed after the step
// is still detected a grace period after its last renewal.
func TestMonitorClockStepForward(t *testing.T) {
	cfg := DefaultConfig()
	s := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	const at = 60 * time.Second
	step := func(real time.Duration) time.Duration {
		if real >= at {
			return 10 * time.Minute
		}
		return 0
	}
	// The tracker's view, as liveness computes it under the same step
	// (TestTrackerClockStepForwardHoldsAndGivesBack): the feed is stale
	// from the step until the next batch, 250 ms later; the gap between
	// that batch and the one before the step is blind time.
	stale := func(real time.Duration) (bool, time.Duration) {
		if real < at {
			return false, 0
		}
		return false, 10*time.Minute + time.Second
	}
	const kill = 300 * time.Second
	marked, last := clockRun(t, s, 0, 20*time.Minute, step, stale, func(real time.Duration) bool { return real < kill })
	if marked == 0 {
		t.Fatal("a node killed after the step was never marked")
	}
	if marked <= last+cfg.GracePeriod || marked > last+cfg.GracePeriod+2*time.Second {
		t.Fatalf("marked %s after its last renewal, want within (grace, grace + 2 s]", marked-last)
	}
	// And a judgement in the instant between the step and the feed's next
	// batch (held) marks nothing.
	s2 := &sim{cfg: cfg, st: reported(nodemodel.True, t0)}
	clockRun(t, s2, 0, at-time.Second, step, never, func(time.Duration) bool { return true })
	s2.paused = true
	if r := s2.at(t0.Add(at + 10*time.Minute)); ready(r) != nodemodel.True {
		t.Fatal("marked while every feed was stale right after the step")
	}
}

// A node whose clock is off by more than --clock-skew-warning gets one
// NodeClockSkew warning, and NodeClockSkewResolved once it is back within
// half of it; nothing else changes.
func TestClockSkewEvents(t *testing.T) {
	n := judged(judgeNode{status: reported(nodemodel.True, t0)})
	cfg := DefaultConfig()
	measured := t0
	events := func(skew time.Duration, at time.Time) []Event {
		n.heartbeat = liveness.Heartbeat{ClockSkew: skew, ClockSkewAt: measured}
		d := Judge(cfg, at, n.input())
		n.rec = d.Record
		if ready(d.Result) != nodemodel.True || d.Write {
			t.Fatalf("skew %s changed the node: Ready %s, write %v", skew, ready(d.Result), d.Write)
		}
		return d.Events
	}
	if ev := events(30*time.Second, t0.Add(time.Second)); len(ev) != 0 {
		t.Fatalf("30 s of skew: %v", ev)
	}
	ev := events(-time.Hour, t0.Add(2*time.Second))
	if len(ev) != 1 || ev[0].Type != "Warning" || ev[0].Reason != ReasonNodeClockSkew || !strings.Contains(ev[0].Message, "1h0m0s behind") {
		t.Fatalf("an hour behind: %v", ev)
	}
	if ev := events(-time.Hour, t0.Add(3*time.Second)); len(ev) != 0 {
		t.Fatalf("warned twice: %v", ev)
	}
	if ev := events(45*time.Second, t0.Add(4*time.Second)); len(ev) != 0 {
		t.Fatalf("within the threshold but not within half of it: %v", ev)
	}
	ev = events(2*time.Second, t0.Add(5*time.Second))
	if len(ev) != 1 || ev[0].Type != "Normal" || ev[0].Reason != ReasonNodeClockSkewResolved {
		t.Fatalf("back in step: %v", ev)
	}
	cfg.ClockSkewWarning = 0
	if ev := events(365*24*time.Hour, t0.Add(6*time.Second)); len(ev) != 0 {
		t.Fatalf("events with the warning off: %v", ev)
	}
}
