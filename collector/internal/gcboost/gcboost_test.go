// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package gcboost

import (
	"testing"
	"time"

	"go.uber.org/zap"
)

// A backlog raises the target at the first sample that sees it; the target
// comes back only after Hold without one, and a backlog within Hold keeps
// it raised.
func TestBoostFollowsTheBacklogWithHold(t *testing.T) {
	now := time.Unix(1000, 0)
	backlog := false
	var sets []int
	b, err := New(Config{Base: 50, Boost: 200, Hold: 10 * time.Second, Tick: time.Second},
		func() bool { return backlog }, func(p int) int { sets = append(sets, p); return 0 }, func() time.Time { return now }, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration, bl bool) {
		now = now.Add(d)
		backlog = bl
		b.Step()
	}
	step(time.Second, false)
	if len(sets) != 0 {
		t.Fatalf("no backlog, yet the target was set: %v", sets)
	}
	step(time.Second, true)    // t=2: raised
	step(time.Second, true)    // t=3: still
	step(9*time.Second, false) // t=12: 9 s without: still raised
	step(time.Second, true)    // t=13: backlog again, hold restarts
	step(9*time.Second, false) // t=22
	if want := []int{200}; len(sets) != 1 || sets[0] != 200 {
		t.Fatalf("targets set %v, want %v", sets, want)
	}
	step(time.Second, false) // t=23: 10 s without: restored
	step(time.Second, false)
	if len(sets) != 2 || sets[1] != 50 {
		t.Fatalf("targets set %v, want [200 50]", sets)
	}
}

func TestBoostDisabled(t *testing.T) {
	for _, c := range []Config{{Base: 50, Boost: 50}, {Base: 50, Boost: 0}, {Base: 0, Boost: 200}} {
		b, _ := New(c, func() bool { return true }, func(int) int { return 0 }, time.Now, zap.NewNop(), nil)
		if b.Enabled() {
			t.Errorf("%+v: enabled", c)
		}
	}
}
