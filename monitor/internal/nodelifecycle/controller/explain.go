// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"time"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/zones"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Facts is what the leader knows about one node's timing, for ExplainNode.
type Facts struct {
	// Leading: this replica leads; otherwise only Paused and zone facts are
	// empty and timing is unknown here.
	Leading bool
	// Paused is why judgement is paused ("" when judging).
	Paused string
	// Known: the leader has a health record for the node.
	Known bool
	// Probe is when the node was last seen alive or granted fresh grace;
	// Heard when liveness evidence last arrived; Deadline = Probe + Grace,
	// or QuietUntil + Grace when a collector told the node to stay away
	// until later than Probe.
	Probe, Heard, ReadyTransition, Deadline, QuietUntil time.Time
	Grace                                               time.Duration
	// Zone key, state and the taint rate of its queue.
	Zone      string
	ZoneState zones.State
	ZoneQPS   float64
	// Queued: waiting in the zone queue at Position (0 = next); NextToken is
	// when the limiter grants its next token (-1: never).
	Queued    bool
	Position  int
	QueueLen  int
	QueuedAt  time.Time
	NextToken time.Duration
	// Remembered: processed by the queue and not yet forgotten.
	Remembered bool
}

// Facts returns the leader's facts about a node.
func (c *Controller) Facts(name string, labels map[string]string) Facts {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := Facts{Leading: c.leading, Paused: c.paused, Zone: nodemodel.ZoneKey(labels)}
	if !c.leading {
		return f
	}
	now := c.cfg.Now()
	if st := c.nodes[name]; st != nil && st.judged {
		r := &st.rec
		f.Known = true
		f.Probe, f.Heard, f.ReadyTransition = r.Probe, r.Heard, r.ReadyTransition
		f.Grace = c.cfg.Lifecycle.GracePeriod
		if !r.HasReady {
			f.Grace = c.cfg.Lifecycle.StartupGracePeriod
		}
		f.Deadline = r.Deadline(f.Grace)
		f.QuietUntil = r.QuietUntil
	}
	f.ZoneState = c.disruption.States[f.Zone]
	if q := c.queues[f.Zone]; q != nil {
		f.ZoneQPS = q.QPS()
		f.QueueLen = q.Len()
		f.NextToken = q.NextToken(now)
		if it, pos, ok := q.Queued(name); ok {
			f.Queued, f.Position, f.QueuedAt = true, pos, it.AddedAt
		} else {
			f.Remembered = q.Has(name)
		}
	}
	return f
}
