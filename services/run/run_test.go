// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package run

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGroupFirstErrorCancelsOthers(t *testing.T) {
	var g Group
	boom := errors.New("boom")
	stopped := make(chan struct{})
	g.Add("waiter", Func(func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil }))
	g.Add("failer", Func(func(ctx context.Context) error { return boom }))
	err := g.Run(context.Background(), time.Second)
	if !errors.Is(err, boom) {
		t.Fatalf("Run() = %v, want boom", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("waiter was not cancelled")
	}
}

func TestGroupParentCancelIsClean(t *testing.T) {
	var g Group
	g.Add("a", Func(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx, time.Second); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
}

func TestGroupShutdownTimeout(t *testing.T) {
	var g Group
	release := make(chan struct{})
	defer close(release)
	g.Add("stuck", Func(func(ctx context.Context) error { <-release; return nil }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx, 10*time.Millisecond); !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Run() = %v, want ErrShutdownTimeout", err)
	}
}
