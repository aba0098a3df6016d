// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/services/identity"
)

// A stream that has not registered yet holds a stream slot (--max-streams)
// and, for up to --limits.register-timeout, a goroutine, for nothing: one
// caller opening thousands of streams that never send Register takes every
// slot from the nodes that would register. So streams from the open to
// their stored Register are counted per peer, and a peer over its limit is
// refused at once (ResourceExhausted) without reading anything.
//
// The peer is the certificate identity when the caller has one (mTLS: a
// node certificate is good for one node name, so a legitimate node holds
// one or two such streams while it reconnects), else the source IP address
// (plaintext: a NAT gateway, a proxy or a fleet simulator may carry many
// nodes from one address). See docs/adr/0022-unregistered-streams-and-timestamp-floors.md.

// peerKey is who a stream is counted against; byIdentity says which limit
// applies.
type peerKey struct {
	key        string
	byIdentity bool
}

// peerOf names the caller of ctx: "node:<name>" (or another role) with a
// verified certificate, else its IP address.
func peerOf(ctx context.Context) peerKey {
	if id := identity.FromContext(ctx); id.Role != identity.Anonymous {
		return peerKey{key: id.String(), byIdentity: true}
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return peerKey{key: "unknown"}
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return peerKey{key: a.IP.String()}
	}
	if h, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return peerKey{key: h}
	}
	return peerKey{key: p.Addr.String()}
}

// pendingPeers counts unregistered streams per peer.
type pendingPeers struct {
	mu    sync.Mutex
	n     map[string]int
	gauge prometheus.Gauge // every peer's together (nil in tests that build none)

	// The refusal log: at most one line per peerLogEvery, naming the last
	// peer refused and how many refusals the interval left out.
	lastLog    time.Time
	suppressed int
}

// peerLogEvery spaces the log lines of refused peers: a misbehaving client
// retries in a loop, and a line per refusal would be its own flood.
const peerLogEvery = 10 * time.Second

// acquire counts one more unregistered stream of k, unless k already
// holds limit (limit ≤ 0: no limit).
func (p *pendingPeers) acquire(k string, limit int) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	n := p.n[k]
	if limit > 0 && n >= limit {
		return n, false
	}
	p.n[k] = n + 1
	if p.gauge != nil {
		p.gauge.Inc()
	}
	return n + 1, true
}

// release uncounts one unregistered stream of k.
func (p *pendingPeers) release(k string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch n := p.n[k]; {
	case n > 1:
		p.n[k] = n - 1
	case n == 1:
		delete(p.n, k)
	default:
		return
	}
	if p.gauge != nil {
		p.gauge.Dec()
	}
}

// held is how many unregistered streams k holds (tests).
func (p *pendingPeers) held(k string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[k]
}

// logRefusal writes the refusal line when the interval allows it.
func (p *pendingPeers) logRefusal(lg *zap.Logger, now time.Time, k peerKey, limit int, flag string) {
	p.mu.Lock()
	if !p.lastLog.IsZero() && now.Sub(p.lastLog) < peerLogEvery {
		p.suppressed++
		p.mu.Unlock()
		return
	}
	left := p.suppressed
	p.lastLog, p.suppressed = now, 0
	p.mu.Unlock()
	lg.Warn("refused a Report stream: its peer holds too many streams that have not registered",
		zap.String("peer", k.key), zap.Int("limit", limit), zap.String("flag", flag), zap.Int("refusals_not_logged", left))
}

// Flags that set the two limits, named in refusals and log lines.
const (
	flagPerIdentity = "--limits.unregistered-streams-per-identity"
	flagPerAddress  = "--limits.unregistered-streams-per-address"
)

// admitPeer counts a new stream of ctx's caller against its peer and
// returns the key to uncount it by; a non-nil error is the status that
// refuses the stream.
func (s *Server) admitPeer(ctx context.Context) (*string, error) {
	k := peerOf(ctx)
	limit, flag := s.cfg.UnregisteredPerAddress, flagPerAddress
	if k.byIdentity {
		limit, flag = s.cfg.UnregisteredPerIdentity, flagPerIdentity
	}
	if _, ok := s.pending.acquire(k.key, limit); !ok {
		s.m.rejected.WithLabelValues("unregistered_per_peer").Inc()
		s.pending.logRefusal(s.lg, s.now(), k, limit, flag)
		// A node behind a busy address (NAT, a restart of many nodes
		// behind one) is alive although refused: like a refusal for a
		// full registration queue, it is a WAITING event when the stream
		// names a node its caller may report for (ADR 0008), so the
		// monitors do not count the retry delay against it.
		d := s.cfg.RetryAfter
		s.waitingFor(ctx, "", d+d/2)
		return nil, withRetryAfter(status.Newf(codes.ResourceExhausted,
			"peer %s already holds %d Report streams that have not registered (%s=%d): send Register on them, or wait",
			k.key, limit, flag, limit), s.cfg.RetryAfter, "") // per peer: another collector would refuse it alike
	}
	return &k.key, nil
}

// registered uncounts st from its peer's unregistered streams: once when
// its Register is stored, else when the stream ends (whichever comes
// first; both the reader and the handler may call it).
func (s *Server) registered(st *stream) {
	if k := st.pendingPeer.Swap(nil); k != nil {
		s.pending.release(*k)
	}
}
