// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cache

import (
	"testing"
	"time"
)

// TestListBackoff: failed lists wait 100ms doubling up to 5s and stay
// there, the schedule of the hand-written loop wait.Backoff replaced; the
// package variable is copied, never stepped itself.
func TestListBackoff(t *testing.T) {
	b := listBackoff
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for i, w := range want {
		if got := b.Step(); got != w*time.Millisecond {
			t.Fatalf("step %d: %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if listBackoff.Duration != 100*time.Millisecond {
		t.Fatalf("listBackoff itself moved to %v", listBackoff.Duration)
	}
}
