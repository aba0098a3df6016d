// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package leadership owns the one loop every leader-only part of the
// monitor runs (the evictor, the compactor): follow the lifecycle
// controller's leadership and do the part's work while this replica leads.
// The controller wins and loses the election; the parts only follow it, so
// they start and stop with the leadership that fences their writes.
package leadership

import (
	"context"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Leader is the view of the lifecycle controller's leadership that the
// followers need.
type Leader interface {
	// Leadership returns the fence and a channel closed when it ends.
	Leadership() (nodestore.Fence, <-chan struct{}, bool)
	// LeaderChanged is closed when a leadership next starts or ends.
	LeaderChanged() <-chan struct{}
}

// Follow calls lead once for each leadership of l while ctx lasts, with the
// leadership's fence and its done channel, and returns when ctx ends.
//
// The change channel is taken before leadership is looked at, so a
// leadership that starts in between wakes the loop rather than being
// missed. After lead returns, Follow waits for that leadership to end: lead
// never runs twice for one leadership, also when it returned early (a
// fenced write tells it the leadership is lost before the controller has
// stepped down).
func Follow(ctx context.Context, l Leader, lead func(ctx context.Context, fence nodestore.Fence, done <-chan struct{})) {
	for ctx.Err() == nil {
		changed := l.LeaderChanged()
		if fence, done, ok := l.Leadership(); ok {
			lead(ctx, fence, done)
			select {
			case <-ctx.Done():
			case <-done:
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-changed:
		}
	}
}
