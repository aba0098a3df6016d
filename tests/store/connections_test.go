// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// A store from etcdstore.New whose data connection is wedged (its bytes
// stop flowing, as when a registration storm queues pages and Txns ahead of
// everything else) still pings etcd and keeps its session: those decide
// whether a collector calls etcd unavailable and whether it stays
// registered, and they go over a connection of their own.
func TestWedgedDataConnectionLeavesPingAndSession(t *testing.T) {
	c := etcdtest.Start(t)
	target := strings.TrimPrefix(c.Endpoints[0], "http://")
	px := newGateProxy(t, target)

	s, err := etcdstore.New(etcdstore.Config{
		Endpoints: []string{px.addr}, Prefix: c.Prefix(t),
		DialTimeout: 5 * time.Second, RequestTimeout: time.Second,
		TLS: tlsconfig.Config{Insecure: true},
	}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// Both connections up: a read goes over data, a ping over control.
	if _, err := s.Get(ctx, nodestore.Nodes, "n"); !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := px.conns(); got != 2 {
		t.Fatalf("%d connections to etcd, want 2 (data and control)", got)
	}
	// Which one is data: the clients dial in the background, so the
	// order of their connections is not known.
	data := -1
	for i := range 2 {
		px.wedge(i)
		_, err := s.Get(ctx, nodestore.Nodes, "n")
		px.unwedge(i)
		if !errors.Is(err, nodestore.ErrNotFound) {
			data = i
			break
		}
	}
	if data < 0 {
		t.Fatal("a read succeeded with either connection wedged")
	}

	sess, err := s.NewSession(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	px.wedge(data)
	// Longer than the session's TTL: only keep-alives that still flow keep
	// it.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping with the data connection wedged: %v", err)
		}
		select {
		case <-sess.Done():
			t.Fatal("the session ended while only the data connection was wedged")
		case <-time.After(250 * time.Millisecond):
		}
	}

	px.unwedge(data)
	if _, err := s.Get(ctx, nodestore.Nodes, "n"); !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatalf("Get after the data connection flows again: %v, want ErrNotFound", err)
	}
}

// gateProxy forwards TCP connections to target; wedge(i) stops the bytes of
// the i-th accepted connection in both directions until unwedge(i).
type gateProxy struct {
	addr string

	mu     sync.Mutex
	cond   *sync.Cond
	wedged map[int]bool
	n      int
}

func newGateProxy(t *testing.T, target string) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{addr: ln.Addr().String(), wedged: map[int]bool{}}
	p.cond = sync.NewCond(&p.mu)
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.wedged = map[int]bool{}
		p.cond.Broadcast()
		for _, c := range open {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			i := p.n
			p.n++
			open = append(open, in, out)
			p.mu.Unlock()
			go p.pipe(i, out, in)
			go p.pipe(i, in, out)
		}
	}()
	return p
}

func (p *gateProxy) pipe(i int, dst io.WriteCloser, src io.Reader) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.wedged[i] {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *gateProxy) conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *gateProxy) wedge(i int) {
	p.mu.Lock()
	p.wedged[i] = true
	p.mu.Unlock()
}

func (p *gateProxy) unwedge(i int) {
	p.mu.Lock()
	delete(p.wedged, i)
	p.cond.Broadcast()
	p.mu.Unlock()
}
