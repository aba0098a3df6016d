// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections from its listeners to the collectors and
// can blackhole them: while partitioned it keeps every connection open and
// accepts new ones but forwards no byte in either direction, as a network
// that silently drops packets (no RST, no FIN). The reporters then see
// only their keepalives time out, which is what a real partition looks
// like to them. When it heals, what was held is delivered late.
type proxy struct {
	mu    sync.Mutex
	open  chan struct{} // closed while traffic flows
	lns   []net.Listener
	conns map[net.Conn]struct{}
}

func newProxy() *proxy {
	p := &proxy{open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	return p
}

// partition starts (on) or heals (off) the blackhole.
func (p *proxy) partition(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		if on {
			p.open = make(chan struct{})
		}
	default:
		if !on {
			close(p.open)
		}
	}
}

// gate blocks while partitioned.
func (p *proxy) gate(ctx context.Context) bool {
	p.mu.Lock()
	ch := p.open
	p.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *proxy) listen(ctx context.Context, addr, target string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("proxy listen %s: %w", addr, err)
	}
	p.mu.Lock()
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(ctx, c, target)
		}
	}()
	return nil
}

func (p *proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *proxy) serve(ctx context.Context, in net.Conn, target string) {
	p.track(in, true)
	defer p.track(in, false)
	defer in.Close()
	// A connection made during a partition waits for the heal before its
	// upstream leg exists: the dial, like every byte, is held.
	if !p.gate(ctx) {
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		return // the collector is down: the reporter sees a reset and retries
	}
	p.track(out, true)
	defer p.track(out, false)
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { p.copy(ctx, out, in); done <- struct{}{} }()
	go func() { p.copy(ctx, in, out); done <- struct{}{} }()
	<-done
}

// copy forwards src to dst, holding each chunk while partitioned.
func (p *proxy) copy(ctx context.Context, dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(ctx) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
}
