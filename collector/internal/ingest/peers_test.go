// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	"github.com/nodepulse/nodepulse/services/identity"
)

// Issue 32, finding 2: one caller opening streams that never send Register
// held every stream slot. Now a peer holds at most its limit of streams
// that have not registered; the next is refused at once, naming the
// limit, while streams that registered do not count, and other callers
// (here: the same peer once it registered) are served.
func TestUnregisteredStreamsPerPeer(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.UnregisteredPerAddress = 3 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Registered streams do not count: five of them, one after another.
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4", "node-5"} {
		h.open(t, ctx, n)
	}
	if n := h.srv.pending.held("127.0.0.1"); n != 0 {
		t.Fatalf("registered streams still counted as unregistered: %d", n)
	}

	// Three streams that send nothing fill the peer's limit.
	idle := make([]*client, 3)
	idleCancel := make([]context.CancelFunc, 3)
	for i := range idle {
		ictx, icancel := context.WithCancel(ctx)
		idleCancel[i] = icancel
		s, err := h.client.Report(ictx)
		if err != nil {
			t.Fatal(err)
		}
		idle[i] = &client{t: t, s: s}
	}
	waitFor(t, func() bool { return h.srv.pending.held("127.0.0.1") == 3 })
	if g := testutil.ToFloat64(h.srv.m.pending); g != 3 {
		t.Fatalf("streams_unregistered = %v, want 3", g)
	}

	s, err := h.client.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv() // refused before anything is read
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--limits.unregistered-streams-per-address=3") ||
		!strings.Contains(st.Message(), "127.0.0.1") {
		t.Fatalf("fourth unregistered stream: %v, want ResourceExhausted naming the peer and the limit", err)
	}
	if d := retryDelay(st); d <= 0 {
		t.Fatalf("refusal without a retry delay: %v", st.Details())
	}
	if got := testutil.ToFloat64(h.srv.m.rejected.WithLabelValues("unregistered_per_peer")); got != 1 {
		t.Fatalf("streams_rejected_total{reason=unregistered_per_peer} = %v, want 1", got)
	}
	// A refused stream that names its node is heard alive (WAITING), as
	// one refused for a full registration queue is.
	waiting := testutil.ToFloat64(h.srv.m.waiting)
	s, err = h.client.Report(metadata.AppendToOutgoingContext(ctx, identity.NodeMetadata, "node-w"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("fifth unregistered stream: %v", err)
	}
	if got := testutil.ToFloat64(h.srv.m.waiting); got != waiting+1 {
		t.Fatalf("waiting_total %v after a refusal naming its node, want %v", got, waiting+1)
	}

	// A Register stored on one of them frees its place at once.
	if a := idle[0].do(register("node-6")); a.GetError() != nil {
		t.Fatalf("register on an idle stream: %v", a.GetError())
	}
	waitFor(t, func() bool { return h.srv.pending.held("127.0.0.1") == 2 })
	h.open(t, ctx, "node-7")
	// A stream that goes away unregistered frees its place too.
	idleCancel[1]()
	waitFor(t, func() bool { return h.srv.pending.held("127.0.0.1") == 1 })
	idleCancel[2]()
	waitFor(t, func() bool { return h.srv.pending.held("127.0.0.1") == 0 })
	waitFor(t, func() bool { return testutil.ToFloat64(h.srv.m.pending) == 0 })
}

// With mTLS a stream counts against its certificate identity, whatever
// address it comes from; without a certificate, against its IP address
// (not its port: one client's connections share it).
func TestPeerOf(t *testing.T) {
	tcp := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: identity.NodeCommonNamePrefix + "n1", Organization: []string{identity.NodeOrganization}}}
	withCert := peer.NewContext(context.Background(), &peer.Peer{Addr: tcp,
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
	if k := peerOf(withCert); k != (peerKey{key: "node:n1", byIdentity: true}) {
		t.Fatalf("mTLS caller counted as %+v", k)
	}
	plain := peer.NewContext(context.Background(), &peer.Peer{Addr: tcp})
	if k := peerOf(plain); k != (peerKey{key: "10.1.2.3"}) {
		t.Fatalf("plaintext caller counted as %+v", k)
	}
}

// The per-identity limit applies to callers with a certificate.
func TestUnregisteredPerIdentityLimit(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *persist.Config) { c.UnregisteredPerIdentity = 1 })
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: identity.NodeCommonNamePrefix + "n1", Organization: []string{identity.NodeOrganization}}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3")},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
	key, err := h.srv.admitPeer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.srv.admitPeer(ctx)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--limits.unregistered-streams-per-identity=1") {
		t.Fatalf("second unregistered stream of one identity: %v", err)
	}
	h.srv.pending.release(*key)
	if _, err := h.srv.admitPeer(ctx); err != nil {
		t.Fatalf("after the first registered: %v", err)
	}
}

// The per-peer count costs every stream one acquire at open and one
// release at its Register.
func BenchmarkPendingPeers(b *testing.B) {
	var p pendingPeers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := p.acquire("127.0.0.1", 0); !ok {
				b.Fatal("refused")
			}
			p.release("127.0.0.1")
		}
	})
}
