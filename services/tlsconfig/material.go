// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// DefaultReloadInterval: certificate files are read again at most this
// often, when a handshake or a scrape asks for them.
const DefaultReloadInterval = 5 * time.Second

// Options of the reloading tls.Configs.
type Options struct {
	// Role labels the expiry metric ("grpc-server", "etcd-client", ...).
	Role string
	// Logger gets a line for every reload and every file that failed to
	// load (the old material stays in use); nil logs nothing.
	Logger *zap.Logger
	// Registerer gets nodepulse_tls_certificate_expiry_timestamp_seconds;
	// nil registers nothing.
	Registerer prometheus.Registerer
	// Interval between reads of the files; 0 is DefaultReloadInterval.
	Interval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (o Options) withDefaults(role string) Options {
	if o.Role == "" {
		o.Role = role
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Interval == 0 {
		o.Interval = DefaultReloadInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ExpiryMetric returns the gauge of certificate expiry registered on reg,
// registering it the first time: every endpoint of a process shares it.
// Servers register it even in plaintext, so the family always exists.
func ExpiryMetric(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodepulse_tls_certificate_expiry_timestamp_seconds",
		Help: "when a loaded certificate expires (NotAfter, Unix seconds): the endpoint's own certificate, or the first to expire in a CA bundle",
	}, []string{"role", "path"})
	if reg == nil {
		return g, nil
	}
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.GaugeVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return g, nil
}

// snapshot is the material loaded from one version of the files, and the
// tls.Configs built from it.
type snapshot struct {
	cert   *tls.Certificate // nil without a cert file
	pool   *x509.CertPool   // nil without a CA file
	server *tls.Config      // what GetConfigForClient returns (servers with a CA)
	client *tls.Config
}

// material is the current snapshot of one endpoint's files. The files are
// read by content, through symlinks: a Kubernetes Secret volume replaces
// its files by swapping a symlink, which no watch on the path would see.
type material struct {
	cfg    Config
	o      Options
	expiry *prometheus.GaugeVec
	base   *tls.Config // a server's tls.Config, for the per-client copies

	mu      sync.Mutex
	checked time.Time
	certPEM []byte // cert file, then key file, as last loaded
	caPEM   []byte
	cur     *snapshot
}

func newMaterial(c Config, o Options) (*material, error) {
	exp, err := ExpiryMetric(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register TLS metrics: %w", err)
	}
	m := &material{cfg: c, o: o, expiry: exp, cur: &snapshot{}}
	if err := m.load(o.Now()); err != nil {
		return nil, err
	}
	return m, nil
}

// get returns the current snapshot, first reading the files again if
// Interval has passed since the last read.
func (m *material) get() *snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := m.o.Now(); now.Sub(m.checked) >= m.o.Interval {
		if err := m.load(now); err != nil {
			m.o.Logger.Error("TLS material not reloaded: keeping the loaded certificates", zap.String("role", m.o.Role), zap.Error(err))
		}
	}
	return m.cur
}

// load reads the files and, when their content changed, replaces the
// snapshot. On an error the snapshot stays as it was. Called with mu held
// (or before m is shared).
func (m *material) load(now time.Time) error {
	m.checked = now
	next := *m.cur
	changed := false
	if m.cfg.CertFile != "" {
		certPEM, err := os.ReadFile(m.cfg.CertFile)
		if err != nil {
			return fmt.Errorf("read certificate: %w", err)
		}
		keyPEM, err := os.ReadFile(m.cfg.KeyFile)
		if err != nil {
			return fmt.Errorf("read key: %w", err)
		}
		both := append(append(append([]byte(nil), certPEM...), 0), keyPEM...)
		if !bytes.Equal(both, m.certPEM) {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return fmt.Errorf("load key pair %s, %s: %w", m.cfg.CertFile, m.cfg.KeyFile, err)
			}
			if cert.Leaf == nil {
				if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
					return fmt.Errorf("parse %s: %w", m.cfg.CertFile, err)
				}
			}
			next.cert, m.certPEM, changed = &cert, both, true
			m.expiry.WithLabelValues(m.o.Role, m.cfg.CertFile).Set(float64(cert.Leaf.NotAfter.Unix()))
		}
	}
	if m.cfg.CAFile != "" {
		caPEM, err := os.ReadFile(m.cfg.CAFile)
		if err != nil {
			return fmt.Errorf("read CA bundle: %w", err)
		}
		if !bytes.Equal(caPEM, m.caPEM) {
			pool, first, err := parsePool(m.cfg.CAFile, caPEM)
			if err != nil {
				return err
			}
			next.pool, m.caPEM, changed = pool, caPEM, true
			m.expiry.WithLabelValues(m.o.Role+"-ca", m.cfg.CAFile).Set(float64(first.Unix()))
		}
	}
	if !changed {
		return nil
	}
	if m.cur.cert != nil || m.cur.pool != nil {
		m.o.Logger.Info("TLS material reloaded", zap.String("role", m.o.Role), zap.String("cert", m.cfg.CertFile), zap.String("ca", m.cfg.CAFile))
	}
	m.cur = &next
	m.rebuild()
	return nil
}

// rebuild makes the snapshot's tls.Configs.
func (m *material) rebuild() {
	s := m.cur
	if m.base != nil {
		s.server = m.base.Clone()
		s.server.GetConfigForClient = nil
		s.server.GetCertificate = nil
		if s.cert != nil {
			s.server.Certificates = []tls.Certificate{*s.cert}
		}
		s.server.ClientCAs = s.pool
	}
	cert := s.cert
	s.client = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: m.cfg.ServerName, RootCAs: s.pool}
	if cert != nil {
		// Through get, so a long-lived tls.Config (etcd's) sees new files.
		s.client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return m.get().cert, nil }
	}
}

// parsePool reads a CA bundle and the earliest NotAfter in it.
func parsePool(file string, data []byte) (*x509.CertPool, time.Time, error) {
	pool := x509.NewCertPool()
	var first time.Time
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("CA bundle %s: %w", file, err)
		}
		pool.AddCert(c)
		if n == 0 || c.NotAfter.Before(first) {
			first = c.NotAfter
		}
		n++
	}
	if n == 0 {
		return nil, time.Time{}, fmt.Errorf("CA bundle %s holds no PEM certificate", file)
	}
	return pool, first, nil
}
