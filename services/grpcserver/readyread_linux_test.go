// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/mem"
)

// The limiter's wrapper of a TCP connection keeps grpc-go's ready reads
// (ReadOnReady): it returns what arrived in a pooled buffer, honours the
// connection's deadline, and reports the peer's close as io.EOF.
func TestLimitedTCPConnReadsOnReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m, err := newConnMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(ln, 10, time.Second, m, zap.NewNop())
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rr, ok := c.(interface {
		ReadOnReady(int, mem.BufferPool) (*[]byte, int, error)
	})
	if !ok {
		t.Fatalf("accepted %T: no ReadOnReady, so grpc-go gives it a read buffer of its own", c)
	}
	pool := mem.DefaultBufferPool()

	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, err := rr.ReadOnReady(1024, pool); !isTimeout(err) {
		t.Fatalf("read with nothing sent past the deadline: %v, want a timeout", err)
	}
	_ = c.SetReadDeadline(time.Time{})

	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf, n, err := rr.ReadOnReady(1024, pool)
	if err != nil || string((*buf)[:n]) != "hello" {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	pool.Put(buf)

	_ = client.Close()
	if _, _, err := rr.ReadOnReady(1024, pool); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
