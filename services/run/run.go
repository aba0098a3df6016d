// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package run runs a process's long-lived components together: the first one
// to fail (or the parent context ending) cancels all the others, and shutdown
// waits for them up to a deadline. It keeps dskit's "one failure stops the
// process" rule without a service state machine.
package run

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Component is anything that runs until its context is cancelled. Run must
// return soon after ctx is done; a nil error then means a clean stop.
type Component interface {
	Run(ctx context.Context) error
}

// Func adapts a function to Component.
type Func func(ctx context.Context) error

// Run implements Component.
func (f Func) Run(ctx context.Context) error { return f(ctx) }

// Group is a set of named components run together.
type Group struct {
	names []string
	comps []Component
}

// Add registers a component under a name used in errors.
func (g *Group) Add(name string, c Component) {
	g.names = append(g.names, name)
	g.comps = append(g.comps, c)
}

// ErrShutdownTimeout is returned when components did not stop within the
// shutdown deadline.
var ErrShutdownTimeout = errors.New("components did not stop within the shutdown timeout")

// Run starts every component and blocks until all have returned. When ctx is
// cancelled or any component returns (even with nil), every other component
// is cancelled; Run then waits at most shutdownTimeout for them. It returns the
// first non-nil error of a component that stopped on its own, or
// ErrShutdownTimeout.
func (g *Group) Run(ctx context.Context, shutdownTimeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(g.comps))
	var wg sync.WaitGroup
	for i, c := range g.comps {
		wg.Add(1)
		go func(name string, c Component) {
			defer wg.Done()
			results <- result{name, c.Run(ctx)}
		}(g.names[i], c)
	}
	if len(g.comps) == 0 {
		<-ctx.Done()
		return nil
	}

	var first error
	select {
	case <-ctx.Done():
	case r := <-results:
		// A component stopping on its own is a reason to stop the process,
		// but only an error is reported as one.
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			first = fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	cancel()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timer := time.NewTimer(shutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return errors.Join(first, ErrShutdownTimeout)
	}
	close(results)
	for r := range results {
		if first == nil && r.err != nil && !errors.Is(r.err, context.Canceled) {
			first = fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	return first
}
