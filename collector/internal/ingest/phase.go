// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"math"
	"sync"

	"google.golang.org/grpc/peer"
)

// Renewal phases (Ack.renew_phase): the collector tells each registering
// reporter when, within its renew interval, to renew its lease.
//
// Why: a lease renewal is one small message a node sends every 10 s. Spread
// at random over a connection's lifetime, every renewal is read, handled
// and acknowledged on its own: one read and one write system call, and a
// wakeup of the connection's reader and writer goroutines, for ~50 bytes
// (those syscalls were a third of the collector's CPU at 100,000 nodes,
// docs/adr/0005-renewal-phases.md). Renewals that arrive together on one connection
// share them. So the streams of one connection get phases in renewGroups
// groups: each group renews at one instant. Connections get group phases
// from a golden-ratio sequence, the most even spread a sequence of unknown
// length has, so the fleet's renewals are flat by construction rather than
// by jitter. A reporter alone on its connection (a machine) is one group of
// one; a process that carries many nodes over one connection (the
// simulator, a multi-node agent, a proxy) sends each group's renewals as
// one burst.

// renewGroups: a connection's streams renew in this many bursts per
// interval. Ten keeps each burst small against a 100 ms flatness bin
// (100 streams per connection: bursts of 10), and gives the transport ten
// frames per read.
const renewGroups = 10

// golden is the golden ratio's fractional part: the points frac(k × golden)
// for k = 0 … n−1 split [0, 1) into gaps of at most three lengths, the
// largest at most φ² ≈ 2.62 times the smallest, for every n (the three-gap
// theorem; golden is the number for which that ratio is smallest).
const golden = 0.6180339887498949

// phaseSlots: group phases are moved to the middle of one of this many
// slots per interval (10 ms at 10 s), so lone connections (a machine each)
// renew in company: the renewals of a slot's connections arrive together,
// and one wakeup of the collector's network poller and threads serves them
// all. With every lone connection on a phase of its own, each renewal woke
// the process by itself: at 10,000 connections a CPU profile of the
// collector was 24 % read/write syscalls and 18 % futex (threads woken and
// put back to sleep per message). Measured at 10,000 lone connections
// (docs/adr/0033-lone-connections-renew-in-slots.md): 0.24 ms of collector
// CPU per renewal without slots, 0.13 ms with 1,000 (ack p99 2.2 ms), 0.10
// ms with 200 (ack p99 7.9 ms: a slot's renewals queue behind each other).
// Whole slots per 100 ms flatness bin keep the bins even.
const phaseSlots = 1000

// phases assigns renewal phases per connection; a connection's entry
// lives while it has attached streams.
type phases struct {
	mu    sync.Mutex
	next  uint64 // connections seen so far
	conns map[string]*connPhase
}

type connPhase struct {
	base    float64 // the connection's first group's phase
	streams uint64  // streams assigned so far (their groups rotate)
	refs    int     // streams attached now
}

func newPhases() *phases { return &phases{conns: map[string]*connPhase{}} }

// acquire returns the phase of a new stream on connection conn.
func (p *phases) acquire(conn string) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[conn]
	if c == nil {
		_, base := math.Modf(float64(p.next) * golden)
		base = (math.Floor(base*phaseSlots) + 0.5) / phaseSlots // a slot's middle: never on a bin's edge
		p.next++
		c = &connPhase{base: base}
		p.conns[conn] = c
	}
	g := c.streams % renewGroups
	c.streams++
	c.refs++
	_, ph := math.Modf(c.base + float64(g)/renewGroups)
	return ph
}

// release forgets one stream of conn; the connection's entry goes with its
// last stream.
func (p *phases) release(conn string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[conn]; c != nil {
		if c.refs--; c.refs <= 0 {
			delete(p.conns, conn)
		}
	}
}

// connKey names the connection a stream arrived on: its peer's address
// (ip:port), one per TCP connection; "?" when unknown (then every such
// stream shares one entry, which still spreads their groups).
func connKey(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "?"
}
