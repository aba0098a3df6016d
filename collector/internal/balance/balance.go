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
	"math/rand/v2"
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
	ID string
	// Address is where reporters reach it (its advertised gRPC address).
	Address  string
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
		} else if !counted(cfg, now, l) {
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

// counted says whether a peer's load counts at now: not draining, with a
// capacity, published within StaleAfter intervals.
func counted(cfg Config, now time.Time, l *Load) bool {
	return !l.Draining && l.Capacity > 0 && now.Sub(l.At) <= StaleAfter*cfg.Interval
}

// Choose names the collector a reporter asked to leave self should go to:
// the counted peer with an address and the most room, room being the
// fraction of its capacity still free (1 − nodes/capacity), so that a
// collector restarted empty is named before one merely below its share.
// Ties are broken uniformly at random (rng), so collectors deciding at
// the same moment on the same loads do not all name the first of equals.
// It returns "" when there is no such peer, or when the best has no more
// room than self, unless self is draining (then any peer is better).
func Choose(cfg Config, now time.Time, self string, loads []Load, rng *rand.Rand) string {
	mine := -1.0
	best, ties := -1.0, 0
	var pick string
	for i := range loads {
		l := &loads[i]
		if l.ID == self {
			if l.Capacity > 0 && !l.Draining {
				mine = room(l) // a draining self sends everyone anywhere
			}
			continue
		}
		if l.Address == "" || !counted(cfg, now, l) {
			continue
		}
		switch r := room(l); {
		case r > best:
			best, ties, pick = r, 1, l.Address
		case r == best:
			// Reservoir sampling over the ties: each is kept with
			// probability 1/ties.
			ties++
			if rng.IntN(ties) == 0 {
				pick = l.Address
			}
		}
	}
	if pick == "" || best <= mine {
		return ""
	}
	return pick
}

func room(l *Load) float64 { return 1 - float64(l.Nodes)/float64(l.Capacity) }

// Hints names a destination for each of a batch of reporters asked to
// leave at once (a rebalancing interval's streams, or a drain's): Next is
// Choose on the loads as they will be once the reporters named before have
// moved, so a batch fills the collectors with the most room in turn
// instead of all landing on the one that had the most when it began.
type Hints struct {
	cfg   Config
	now   time.Time
	self  string
	loads []Load
	rng   *rand.Rand
}

// NewHints plans over a copy of loads.
func NewHints(cfg Config, now time.Time, self string, loads []Load, rng *rand.Rand) *Hints {
	return &Hints{cfg: cfg, now: now, self: self, loads: append([]Load(nil), loads...), rng: rng}
}

// Next is the address for the next reporter, "" for none (it then lands
// wherever its balancer picks).
func (h *Hints) Next() string {
	if h == nil {
		return ""
	}
	a := Choose(h.cfg, h.now, h.self, h.loads, h.rng)
	if a == "" {
		return ""
	}
	for i := range h.loads {
		switch l := &h.loads[i]; {
		case l.Address == a && l.ID != h.self:
			l.Nodes++
		case l.ID == h.self && l.Nodes > 0:
			l.Nodes--
		}
	}
	return a
}

// QuietAfterTrouble is how many intervals a collector waits after its last
// etcd trouble (etcd unavailable, a registration that failed on etcd)
// before it asks reporters to move again.
const QuietAfterTrouble = 3

// Paused reports whether shedding must wait: a reporter asked to move ends
// a working stream and must Register again, which needs etcd. While etcd
// is failing, or shortly after it failed a registration (one frozen member
// of three stalls every request the client sends it, so failures come and
// go), a move turns a healthy node into one that cannot register and goes
// Unknown after its grace period — the false alarm the robustness suite
// found (docs/robustness.md, "Findings"). Publishing the load goes on.
func Paused(cfg Config, now time.Time, etcdAvailable bool, lastTrouble time.Time) bool {
	if !etcdAvailable {
		return true
	}
	return !lastTrouble.IsZero() && now.Sub(lastTrouble) < QuietAfterTrouble*cfg.Interval
}
