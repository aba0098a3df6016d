// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"math/rand/v2"
	"time"
)

// Attached is the number of registered Report streams: the nodes attached
// here, the load this collector publishes in discovery.
func (s *Server) Attached() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// Rebalance asks up to n attached streams, chosen at random, to reconnect
// to another collector at a random moment within window (the same Reconnect
// a drain sends, to fewer streams), and returns how many it asked. A stream
// asked before is not asked again: its reporter is on its way, or ignores
// the command. Nothing is asked while draining (every stream is leaving).
func (s *Server) Rebalance(n int, window time.Duration) int {
	if n <= 0 || s.draining.Load() {
		return 0
	}
	s.mu.Lock()
	list := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		if !st.moveAsked.Load() {
			list = append(list, st)
		}
	}
	s.mu.Unlock()
	n = min(n, len(list))
	// A partial Fisher-Yates shuffle: the first n are a uniform sample.
	for i := range n {
		j := i + rand.IntN(len(list)-i)
		list[i], list[j] = list[j], list[i]
	}
	msgs := s.hinted("rebalancing: this collector holds more than its share of the fleet", window, n, false)
	asked := 0
	for i, st := range list[:n] {
		m := msgs[i]
		if st.moveAsked.Swap(true) {
			continue
		}
		if st.push(m) {
			asked++
		} else {
			st.moveAsked.Store(false) // the stream ended, or its queue is full: not asked
		}
	}
	s.m.movesRequested.Add(float64(asked))
	return asked
}

// LastRegisterFailure is when etcd last failed a registration here (zero:
// never), for the rebalancing pause (balance.Paused).
func (s *Server) LastRegisterFailure() time.Time {
	if ns := s.registerFailedAt.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
