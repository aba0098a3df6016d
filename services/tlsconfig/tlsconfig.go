// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package tlsconfig loads the TLS material of nodepulse endpoints from files
// and builds server and client tls.Configs. mTLS is the default: a server
// with a CA file requires and verifies client certificates. Plaintext needs
// an explicit --<prefix>.insecure flag.
package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
)

// Config names the files of one endpoint.
type Config struct {
	CertFile string
	KeyFile  string
	CAFile   string
	// Insecure turns TLS off entirely (development only).
	Insecure bool
	// ServerName overrides the name a client verifies (clients only).
	ServerName string
}

// RegisterFlags adds <prefix>.tls-cert, .tls-key, .tls-ca, .insecure and
// (client side) .tls-server-name.
func (c *Config) RegisterFlags(fs *flag.FlagSet, prefix string, client bool) {
	fs.StringVar(&c.CertFile, prefix+".tls-cert", "", "PEM certificate presented to peers")
	fs.StringVar(&c.KeyFile, prefix+".tls-key", "", "PEM private key of --"+prefix+".tls-cert")
	if client {
		fs.StringVar(&c.CAFile, prefix+".tls-ca", "", "PEM CA bundle that verifies the server (system roots when empty)")
		fs.StringVar(&c.ServerName, prefix+".tls-server-name", "", "name to verify in the server certificate (default: host of the address)")
	} else {
		fs.StringVar(&c.CAFile, prefix+".tls-ca", "", "PEM CA bundle that verifies client certificates; when set, clients must present one (mTLS)")
	}
	fs.BoolVar(&c.Insecure, prefix+".insecure", false, "plaintext, no TLS: development only, never across a network you do not control")
}

// Validate checks that the combination of settings makes sense.
func (c Config) Validate(prefix string) error {
	if c.Insecure {
		if c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" {
			return fmt.Errorf("--%s.insecure conflicts with the --%s.tls-* flags", prefix, prefix)
		}
		return nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("--%s.tls-cert and --%s.tls-key go together", prefix, prefix)
	}
	return nil
}

// Server returns the server tls.Config, or nil when insecure. Its
// certificate and CA bundle are reloaded when their files change; see
// ServerReloading.
func (c Config) Server() (*tls.Config, error) { return c.ServerReloading(Options{}) }

// Client returns the client tls.Config, or nil when insecure, reloading as
// ClientReloading does.
func (c Config) Client() (*tls.Config, error) { return c.ClientReloading(Options{}) }

// ServerReloading returns the server tls.Config, or nil when insecure. The
// certificate is served by GetCertificate and the client CA pool by
// GetConfigForClient, both from the files as they are now (see Options).
func (c Config) ServerReloading(o Options) (*tls.Config, error) {
	if c.Insecure {
		return nil, nil
	}
	if c.CertFile == "" {
		return nil, errors.New("no TLS certificate configured: set the tls-cert/tls-key flags, or the insecure flag for plaintext development use")
	}
	m, err := newMaterial(c, o.withDefaults("server"))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return m.get().cert, nil },
	}
	if c.CAFile != "" {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = m.cur.pool
		// The pool is fixed in a tls.Config: each handshake gets the
		// copy made for the current CA bundle and certificate.
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return m.get().server, nil }
	}
	m.base = cfg
	m.rebuild()
	return cfg, nil
}

// ClientReloading returns the client tls.Config, or nil when insecure. The
// client certificate is given by GetClientCertificate from the files as
// they are now (see Options). The CA bundle is read once here: crypto/tls
// has no hook for changing RootCAs that keeps its name checks, so gRPC
// clients use ClientCredentials, which reloads it too.
func (c Config) ClientReloading(o Options) (*tls.Config, error) {
	if c.Insecure {
		return nil, nil
	}
	if c.CertFile == "" && c.CAFile == "" {
		return &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}, nil
	}
	m, err := newMaterial(c, o.withDefaults("client"))
	if err != nil {
		return nil, err
	}
	return m.get().client, nil
}

// ClientCredentials are gRPC transport credentials, or nil when insecure,
// that build each connection's handshake from the certificate and CA
// bundle as they are now.
func (c Config) ClientCredentials(o Options) (credentials.TransportCredentials, error) {
	if c.Insecure {
		return nil, nil
	}
	if c.CertFile == "" && c.CAFile == "" {
		return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}), nil
	}
	m, err := newMaterial(c, o.withDefaults("client"))
	if err != nil {
		return nil, err
	}
	return &reloadingCreds{m: m}, nil
}

// reloadingCreds hands every handshake to credentials.NewTLS of the
// current client tls.Config (a clone per connection, not per message).
type reloadingCreds struct {
	m          *material
	serverName string
}

func (r *reloadingCreds) current() credentials.TransportCredentials {
	cfg := r.m.get().client
	if r.serverName != "" {
		cfg = cfg.Clone()
		cfg.ServerName = r.serverName
	}
	return credentials.NewTLS(cfg)
}

func (r *reloadingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return r.current().ClientHandshake(ctx, authority, conn)
}

func (r *reloadingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconfig: client credentials used by a server")
}

func (r *reloadingCreds) Info() credentials.ProtocolInfo { return r.current().Info() }

func (r *reloadingCreds) Clone() credentials.TransportCredentials {
	c := *r
	return &c
}

// OverrideServerName is part of credentials.TransportCredentials.
func (r *reloadingCreds) OverrideServerName(name string) error {
	r.serverName = name
	return nil
}
