// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package leadertest is a leadership the tests of the leader-only parts
// (evictor, compactor, defragmenter) switch on and off by hand, in place of
// the lifecycle controller's election.
package leadertest

import (
	"sync"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Leader is a switchable leadership; the zero value does not lead. It
// satisfies leadership.Leader and the parts' own Leader views.
type Leader struct {
	mu      sync.Mutex
	fence   nodestore.Fence
	leading bool
	done    chan struct{}
	changed chan struct{}
	paused  string
}

// DefaultFence is the fence Set(true) hands out.
var DefaultFence = nodestore.Fence{Key: "k", Revision: 1}

// Leadership implements leadership.Leader.
func (l *Leader) Leadership() (nodestore.Fence, <-chan struct{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return nodestore.Fence{}, nil, false
	}
	return l.fence, l.done, true
}

// LeaderChanged implements leadership.Leader.
func (l *Leader) LeaderChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// Paused is what SetPaused set ("" by default).
func (l *Leader) Paused() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paused
}

// SetPaused makes Paused report why.
func (l *Leader) SetPaused(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paused = why
}

// Set starts a leadership with DefaultFence, or ends the current one.
func (l *Leader) Set(leading bool) { l.set(leading, DefaultFence) }

// Lead starts a leadership with fence (a real store's, so fenced writes
// behave as they would on the leader), ending any current one first.
func (l *Leader) Lead(fence nodestore.Fence) {
	l.set(false, nodestore.Fence{})
	l.set(true, fence)
}

func (l *Leader) set(leading bool, fence nodestore.Fence) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if leading == l.leading {
		return
	}
	l.leading = leading
	if leading {
		l.fence, l.done = fence, make(chan struct{})
	} else {
		close(l.done)
	}
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
}
