// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package balance decides how many of a collector's Report streams it asks
// to move to other collectors, from the loads the collectors publish in
// discovery (collectors/<id>: connected nodes and capacity). Reporters pick
// a collector when they connect and stay there; after a collector restarts
// (or one is added) it holds almost nobody while the others hold the
// fleet. Each collector that holds more than its fair share by more than a
// tolerance asks a bounded fraction of its streams, chosen at random, to
// reconnect, spread over the next interval, as kube-apiserver's
// --goaway-chance rebalances HTTP/2 clients: never the whole excess at
// once, so a fleet never stampedes onto the collector with room, and the
// spread converges over a few intervals (spec §20).
package balance

import (
	"math"
	"time"
)

// Config of the rebalancing.
type Config struct {
	// Interval: how often a collector publishes its load and decides;
	// 0 disables both.
	Interval time.Duration
	// Tolerance: a collector sheds streams only while it holds more than
	// its fair share × (1 + Tolerance).
	Tolerance float64
	// MaxFraction bounds the streams asked to move in one interval, as a
	// fraction of the collector's own.
	MaxFraction float64
}

// DefaultConfig is the collector's default.
func DefaultConfig() Config {
	return Config{Interval: 10 * time.Second, Tolerance: 0.1, MaxFraction: 0.05}
}

// Load is one collector's entry in discovery.
type Load struct {
	ID       string
	Nodes    int
	Capacity int
	Draining bool
	// At is when Nodes was counted; a load older than StaleAfter is not
	// counted (a collector that died stays in discovery until its session
	// expires, with the nodes it no longer holds).
	At time.Time
}

// StaleAfter is how old a published load may be, in intervals, and still
// count.
const StaleAfter = 3

// Decision is what one collector does in one interval.
type Decision struct {
	// Share is its fair share of the nodes attached to the collectors
	// counted (its capacity's part of theirs); 0 when it is alone.
	Share float64
	// Move is how many of its streams to ask to reconnect elsewhere now.
	Move int
}

// Decide returns self's decision, given every collector's load as listed
// in discovery (self's included, with its current count) at now.
func Decide(cfg Config, now time.Time, self string, loads []Load) Decision {
	var total, caps float64
	var mine *Load
	peers := 0
	for i := range loads {
		l := &loads[i]
		if l.ID == self {
			mine = l
		} else if l.Draining || l.Capacity <= 0 || now.Sub(l.At) > StaleAfter*cfg.Interval {
			continue
		} else {
			peers++
		}
		total += float64(l.Nodes)
		caps += float64(l.Capacity)
	}
	if mine == nil || mine.Draining || mine.Capacity <= 0 || peers == 0 || caps <= 0 {
		// Alone, or going away (the drain moves everybody): nowhere to
		// send anyone, or nothing to balance.
		return Decision{}
	}
	share := total * float64(mine.Capacity) / caps
	d := Decision{Share: share}
	if float64(mine.Nodes) <= share*(1+cfg.Tolerance) {
		return d
	}
	excess := float64(mine.Nodes) - share
	bound := math.Ceil(cfg.MaxFraction * float64(mine.Nodes))
	d.Move = int(math.Min(math.Floor(excess), bound))
	return d
}
