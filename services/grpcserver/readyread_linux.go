// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"io"
	"net"
	"syscall"

	"google.golang.org/grpc/mem"
)

// readyConn is a limitedConn over a plaintext TCP connection that reads
// the way grpc-go reads a bare *net.TCPConn: it waits until data has
// arrived and only then takes a buffer from grpc-go's pool for the read, so
// an idle connection holds no read buffer. grpc-go recognises the ability by
// this method (ReadOnReady) or by the concrete type, which the limiter's
// wrapper hides: without it every connection kept a 32 KiB read buffer of
// its own for its lifetime, 33 KB of live heap per connection at 10,000
// connections (docs/benchmarks.md, "Transport buffers"). Under TLS grpc-go
// reads the TLS connection instead, which has no such method, as before.
type readyConn struct {
	*limitedConn
	raw syscall.RawConn
	// The read's state lives here, and doRead is built once, so a read
	// allocates nothing of its own. grpc-go reads a connection from one
	// goroutine.
	size   int
	pool   mem.BufferPool
	buf    *[]byte
	n      int
	err    error
	doRead func(fd uintptr) bool
}

// wrapConn gives c its slot's bookkeeping, and ReadOnReady when c is a TCP
// connection whose descriptor can be read directly.
func wrapConn(c net.Conn, lc *limitedConn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return lc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return lc
	}
	r := &readyConn{limitedConn: lc, raw: raw}
	r.doRead = r.readFD
	return r
}

// readFD is one read attempt on the descriptor; false asks the runtime's
// poller to wait until the socket is readable and call it again.
func (r *readyConn) readFD(fd uintptr) bool {
	r.buf = r.pool.Get(r.size)
	r.n, r.err = syscall.Read(int(fd), *r.buf)
	if r.err != nil {
		r.pool.Put(r.buf)
		r.buf = nil
	}
	return r.err != syscall.EAGAIN && r.err != syscall.EWOULDBLOCK
}

// ReadOnReady waits for data, then reads up to size bytes into a buffer
// from pool, which the caller returns to it. The connection's deadlines
// apply, as to Read.
func (r *readyConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	r.size, r.pool = size, pool
	err := r.raw.Read(r.doRead)
	buf, n, rerr := r.buf, r.n, r.err
	r.buf, r.pool, r.err, r.n = nil, nil, nil, 0
	switch {
	case err != nil:
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	case rerr != nil:
		return nil, 0, rerr
	case n == 0:
		// A read of 0 bytes without an error is the peer's orderly close.
		pool.Put(buf)
		return nil, 0, io.EOF
	}
	return buf, n, nil
}
