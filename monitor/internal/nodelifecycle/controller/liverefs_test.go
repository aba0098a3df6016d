// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import "github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"

// tableLive hands out handles on its records, as *liveness.Tracker does.
var _ liveRefs = (*tableLive)(nil)

func (l *tableLive) Ref(name string) liveness.Ref {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.names[name]
	if !ok {
		i = int32(len(l.recs))
		l.names[name] = i
		l.recs = append(l.recs, liveness.Node{})
	}
	return liveness.Ref(i)
}

func (l *tableLive) NodeOf(r liveness.Ref) liveness.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs[r]
}

// The real tracker hands them out too.
var _ liveRefs = (*liveness.Tracker)(nil)
