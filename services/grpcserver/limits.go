// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/metric"
)

// DefaultConnectionTimeout bounds the TLS and HTTP/2 handshake of a new
// connection (grpc-go's own default is 120 s): a socket that sends nothing
// holds a file descriptor only this long.
const DefaultConnectionTimeout = 10 * time.Second

// Reasons of nodepulse_grpc_connections_refused_total.
const (
	reasonLimit            = "limit"
	reasonHandshakeTimeout = "handshake_timeout"
)

// connectionCap is the default --grpc.max-connections for a process whose
// file-descriptor limit is nofile: the limit less a reserve for the admin
// port, etcd connections, log and data files, so a flood of connections to
// the gRPC port cannot take the descriptors /healthz, /readyz and the store
// need. The reserve is 10 % of the limit, at least 64.
func connectionCap(nofile uint64) int {
	reserve := max(nofile/10, 64)
	if nofile <= reserve {
		return 1
	}
	c := nofile - reserve
	if c > 1<<30 { // RLIM_INFINITY and the like
		c = 1 << 30
	}
	return int(c)
}

// maxConnections is the configured cap, or the default from RLIMIT_NOFILE.
func (c Config) maxConnections() (int, error) {
	nofile, known := fileLimit()
	switch {
	case c.MaxConnections < 0:
		return 0, fmt.Errorf("--grpc.max-connections=%d: must be positive (0: derived from the file-descriptor limit)", c.MaxConnections)
	case c.MaxConnections > 0:
		if known && uint64(c.MaxConnections) >= nofile {
			return 0, fmt.Errorf("--grpc.max-connections=%d: must be below the file-descriptor limit %d, leaving descriptors for the admin port, etcd and files", c.MaxConnections, nofile)
		}
		return c.MaxConnections, nil
	case !known:
		return 1 << 30, nil
	}
	return connectionCap(nofile), nil
}

// connMetrics are the connection limits' metrics.
type connMetrics struct {
	open    prometheus.Gauge
	limit   prometheus.Gauge
	refused *prometheus.CounterVec
}

func newConnMetrics(reg prometheus.Registerer) (*connMetrics, error) {
	m := &connMetrics{
		open:  metric.Gauge("nodepulse_grpc_connections_open", "gRPC connections open, handshaking or established"),
		limit: metric.Gauge("nodepulse_grpc_connections_limit", "most gRPC connections open at once (--grpc.max-connections); more are closed at accept"),
		refused: metric.CounterVec("nodepulse_grpc_connections_refused_total",
			"gRPC connections closed by a limit: reason limit (over --grpc.max-connections, closed at accept) or handshake_timeout (no TLS/HTTP/2 handshake within --grpc.connection-timeout)", "reason"),
	}
	for _, r := range []string{reasonLimit, reasonHandshakeTimeout} {
		m.refused.WithLabelValues(r)
	}
	return m, metric.Register(reg, m.open, m.limit, m.refused)
}

// limitListener accepts at most max connections at once and closes the
// ones over it at once (netutil.LimitListener would block Accept instead,
// leaving them in the kernel's backlog holding descriptors). The cost is
// per connection: the wrapped conn only forwards reads and writes.
type limitListener struct {
	net.Listener
	max      int64
	timeout  time.Duration
	open     atomic.Int64
	m        *connMetrics
	now      func() time.Time
	limitLog *rateLog
	slowLog  *rateLog
}

func newLimitListener(ln net.Listener, max int, timeout time.Duration, m *connMetrics, lg *zap.Logger) *limitListener {
	m.limit.Set(float64(max))
	return &limitListener{
		Listener: ln, max: int64(max), timeout: timeout, m: m, now: time.Now,
		limitLog: &rateLog{lg: lg, every: 10 * time.Second, msg: "gRPC connection refused: --grpc.max-connections reached (nodepulse_grpc_connections_refused_total{reason=\"limit\"})"},
		slowLog:  &rateLog{lg: lg, every: 10 * time.Second, msg: "gRPC connection closed: no TLS/HTTP/2 handshake within --grpc.connection-timeout (nodepulse_grpc_connections_refused_total{reason=\"handshake_timeout\"})"},
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); n > l.max {
			l.open.Add(-1)
			// Counted before the close: a client that sees its connection
			// closed also sees it counted.
			l.m.refused.WithLabelValues(reasonLimit).Inc()
			_ = c.Close()
			l.limitLog.log(l.now(), c.RemoteAddr(), zap.Int64("maxConnections", l.max))
			continue
		}
		l.m.open.Inc()
		return wrapConn(c, &limitedConn{Conn: c, l: l, accepted: l.now()}), nil
	}
}

// limitedConn gives its slot back when closed, and tells a handshake that
// timed out from one that failed: grpc-go sets a deadline on the raw
// connection for the handshake and clears it (a zero deadline) once the
// HTTP/2 transport is up.
type limitedConn struct {
	net.Conn
	l         *limitListener
	accepted  time.Time
	handshook atomic.Bool
	once      sync.Once
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.handshook.Store(true)
	}
	return c.Conn.SetDeadline(t)
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.m.open.Dec()
		if !c.handshook.Load() && c.l.timeout > 0 {
			if now := c.l.now(); now.Sub(c.accepted) >= c.l.timeout {
				c.l.m.refused.WithLabelValues(reasonHandshakeTimeout).Inc()
				c.l.slowLog.log(now, c.RemoteAddr(), zap.Duration("connectionTimeout", c.l.timeout))
			}
		}
	})
	return c.Conn.Close()
}

// Unwrap gives the accepted connection, for code that needs its type.
func (c *limitedConn) Unwrap() net.Conn { return c.Conn }

// rateLog writes msg at most once per every, naming the remote address of
// the event that wrote it and how many it left out since the last line: a
// flood of connections must not become a flood of log lines.
type rateLog struct {
	lg      *zap.Logger
	every   time.Duration
	msg     string
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (r *rateLog) log(now time.Time, remote net.Addr, fields ...zap.Field) {
	r.mu.Lock()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.skipped = now, 0
	r.mu.Unlock()
	r.lg.Warn(r.msg, append(fields, zap.String("remote", addrString(remote)), zap.Int("suppressed", skipped))...)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
