// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package grpcclient dials nodepulse gRPC endpoints: one or more addresses
// (a comma-separated list, or a dns:/// name that resolves to several),
// round-robin balancing over the ones whose grpc.health.v1 status is SERVING
// (a call may name the one it prefers: Prefer),
// keepalive pings, TLS/mTLS and client metrics.
package grpcclient

import (
	"flag"
	"fmt"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking, used by the service config below
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/nodepulse/nodepulse/services/grpcserver"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// Config of a client of one logical service.
type Config struct {
	// Addresses: "host:port[,host:port...]" or "dns:///name:port".
	Addresses string
	TLS       tlsconfig.Config
	// KeepaliveTime: ping the server after this long without activity, so a
	// dead server or a silent partition is noticed within
	// KeepaliveTime+KeepaliveTimeout even on an idle stream.
	//
	// KeepaliveTimeout is not short (DefaultKeepaliveTimeout): a server
	// that answers a ping late is busy, not gone, and cutting its
	// connection brings every stream on it back as a new registration,
	// which is more load on the server that was too busy.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxRecvMsgSize bounds one inbound message.
	MaxRecvMsgSize int
	// Registerer, when set, gets the expiry of the client certificate and
	// CA bundle (nodepulse_tls_certificate_expiry_timestamp_seconds, role
	// grpc-client): a node's certificate is the one most likely to lapse
	// unnoticed, on a machine nobody looks at. Logger gets reload lines.
	Registerer prometheus.Registerer `json:"-"`
	Logger     *zap.Logger           `json:"-"`
}

// RegisterFlags adds <prefix>.addresses, TLS flags and keepalive flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet, prefix, defAddr, what string) {
	fs.StringVar(&c.Addresses, prefix+".addresses", defAddr, what+": comma-separated host:port list, or dns:///name:port to balance over every address the name resolves to")
	c.TLS.RegisterFlags(fs, prefix, true)
	fs.DurationVar(&c.KeepaliveTime, prefix+".keepalive-time", DefaultKeepaliveTime, "ping the server after this long without traffic")
	fs.DurationVar(&c.KeepaliveTimeout, prefix+".keepalive-timeout", DefaultKeepaliveTimeout, "treat the connection as dead when a ping is not answered within this")
	c.MaxRecvMsgSize = 16 << 20
}

// Metrics are the client-side gRPC metrics; create once per process.
func Metrics(reg prometheus.Registerer) (*grpcprom.ClientMetrics, error) {
	m := grpcprom.NewClientMetrics()
	if err := metric.Register(reg, m); err != nil {
		return nil, fmt.Errorf("register gRPC client metrics: %w", err)
	}
	return m, nil
}

// serviceConfig balances round-robin over backends that report SERVING on
// grpc.health.v1, so a draining server gets no new streams, honouring a
// call's preferred backend (prefer.go).
const serviceConfig = `{"loadBalancingConfig":[{"` + PreferBalancer + `":{}}],"healthCheckConfig":{"serviceName":""}}`

// ConnectBackoff paces reconnection attempts of a connection whose server
// went away. grpc-go's default grows to 120 s: a reporter whose collector
// restarted could then wait two minutes after the replacement listens,
// three times the 40 s grace period. 10 s at most, jittered so a fleet
// does not come back in lockstep; a refused connect costs the server
// nothing, so this stays cheap while a collector is down.
var ConnectBackoff = backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second}

// Defaults of the keepalive: a silent server is noticed within 25 s of the
// last frame from it, which leaves a reporter 15 s of the 40 s grace period
// to fail over. The timeout was 5 s until a collector restart at 100,000
// nodes on a saturated machine: the new collector, busy registering the
// fleet, answered pings later than that, and the reporters' side cut 46 of
// the 66 connections lost ("keepalive ping failed to receive ACK within
// timeout"), each carrying ~100 simulated nodes that then went Unknown.
const (
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 15 * time.Second
)

// Dial creates a client connection (lazily connecting). metrics may be nil.
func Dial(c Config, metrics *grpcprom.ClientMetrics, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := c.TLS.Validate("client"); err != nil {
		return nil, err
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if !c.TLS.Insecure {
		// Certificate and CA bundle reloaded when their files change.
		tc, err := c.TLS.ClientCredentials(tlsconfig.Options{Role: "grpc-client", Registerer: c.Registerer, Logger: c.Logger})
		if err != nil {
			return nil, err
		}
		creds = tc
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: c.KeepaliveTime, Timeout: c.KeepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(max(c.MaxRecvMsgSize, 4<<20))),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: ConnectBackoff, MinConnectTimeout: 20 * time.Second}),
		// Fixed windows, as on the servers: no BDP-estimation PING for
		// every sparse message received (see grpcserver.DefaultStreamWindow).
		grpc.WithStaticStreamWindowSize(grpcserver.DefaultStreamWindow),
		grpc.WithStaticConnWindowSize(grpcserver.DefaultConnWindow),
	}
	if metrics != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(metrics.UnaryClientInterceptor()),
			grpc.WithChainStreamInterceptor(metrics.StreamClientInterceptor()))
	}
	target := strings.TrimSpace(c.Addresses)
	if target == "" {
		return nil, fmt.Errorf("no server address configured")
	}
	if !strings.Contains(target, "://") {
		// A static list: a manual resolver hands every address to the balancer.
		var addrs []resolver.Address
		for _, a := range strings.Split(target, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, resolver.Address{Addr: a})
			}
		}
		r := manual.NewBuilderWithScheme("nodepulse")
		r.InitialState(resolver.State{Addresses: addrs})
		opts = append(opts, grpc.WithResolvers(r))
		target = "nodepulse:///" + addrs[0].Addr
		if c.TLS.ServerName == "" && !c.TLS.Insecure {
			// Verify each server against its own host name, not the target's.
			opts = append(opts, grpc.WithAuthority(hostOf(addrs[0].Addr)))
		}
	}
	opts = append(opts, extra...)
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", c.Addresses, err)
	}
	return cc, nil
}

func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return addr
}
