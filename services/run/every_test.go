// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package run

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Every calls fn repeatedly, not at once, and returns when ctx ends with
// no call after that.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("fn called %d times, want 3 (none after the context ended)", n)
	}
}

func TestEveryNotAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	called := false
	Every(ctx, time.Hour, func() { called = true })
	if called {
		t.Fatal("fn called before the first interval ended")
	}
}
