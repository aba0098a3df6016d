// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package tlsconfig loads the TLS material of nodepulse endpoints from files
// and builds server and client tls.Configs. mTLS is the default: a server
// with a CA file requires and verifies client certificates. Plaintext needs
// an explicit --<prefix>.insecure flag.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
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

// Server returns the server tls.Config, or nil when insecure.
func (c Config) Server() (*tls.Config, error) {
	if c.Insecure {
		return nil, nil
	}
	if c.CertFile == "" {
		return nil, errors.New("no TLS certificate configured: set the tls-cert/tls-key flags, or the insecure flag for plaintext development use")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load server key pair: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pool, err := loadPool(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client returns the client tls.Config, or nil when insecure.
func (c Config) Client() (*tls.Config, error) {
	if c.Insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if c.CAFile != "" {
		pool, err := loadPool(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", file)
	}
	return pool, nil
}
