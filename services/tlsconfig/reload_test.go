// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nodepulse/nodepulse/services/identity/devca"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// secretDir lays files out as a Kubernetes Secret volume does: dir/name is
// a symlink to ..data/name, and ..data a symlink to the current version,
// which an update swaps.
type secretDir struct {
	t   *testing.T
	dir string
}

func (s secretDir) publish(version string) {
	s.t.Helper()
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "server.crt", "server.key", "node-a.crt", "node-a.key"} {
		_ = os.Symlink(filepath.Join("..data", f), filepath.Join(s.dir, f))
	}
}

// issue writes a CA-signed server and node certificate valid for validity
// into dir/version, reusing the CA of dir/ca.
func (s secretDir) issue(version string, validity time.Duration) {
	s.t.Helper()
	v := filepath.Join(s.dir, version)
	ca := filepath.Join(s.dir, "ca")
	if err := devca.Generate(devca.Request{Dir: ca, Nodes: []string{"a"}, Validity: validity}); err != nil {
		s.t.Fatal(err)
	}
	if err := os.MkdirAll(v, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "server.crt", "server.key", "node-a.crt", "node-a.key"} {
		b, err := os.ReadFile(filepath.Join(ca, f))
		if err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v, f), b, 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

// Rotating the files under a running server: the next handshake gets the
// new certificate, with no restart; a bad new file keeps the old one and
// logs an error; the expiry metric follows.
func TestServerCertificateReloadsWhenTheFilesChange(t *testing.T) {
	sd := secretDir{t, t.TempDir()}
	sd.issue("v1", 30*24*time.Hour)
	sd.publish("v1")
	clk := &clock{now: time.Now()}
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	cfg := Config{CertFile: filepath.Join(sd.dir, "server.crt"), KeyFile: filepath.Join(sd.dir, "server.key"), CAFile: filepath.Join(sd.dir, "ca.crt")}
	srvCfg, err := cfg.ServerReloading(Options{Role: "grpc-server", Logger: zap.New(core), Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	client := Config{CertFile: filepath.Join(sd.dir, "node-a.crt"), KeyFile: filepath.Join(sd.dir, "node-a.key"), CAFile: filepath.Join(sd.dir, "ca.crt"), ServerName: "localhost"}
	served := func() *x509.Certificate {
		t.Helper()
		cc, err := client.ClientReloading(Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	expiry := func() float64 {
		return testutil.ToFloat64(mustExpiry(t, reg).WithLabelValues("grpc-server", cfg.CertFile))
	}
	v1 := served()
	if got := expiry(); got != float64(v1.NotAfter.Unix()) {
		t.Fatalf("expiry metric %v, want %d", got, v1.NotAfter.Unix())
	}

	sd.issue("v2", 365*24*time.Hour)
	sd.publish("v2")
	if got := served(); !got.Equal(v1) {
		t.Fatal("reloaded before the interval passed")
	}
	clk.Add(DefaultReloadInterval)
	v2 := served()
	if v2.Equal(v1) || !v2.NotAfter.After(v1.NotAfter) {
		t.Fatalf("after rotation the server presents %v (expires %s), want the new certificate", v2.SerialNumber, v2.NotAfter)
	}
	if got := expiry(); got != float64(v2.NotAfter.Unix()) {
		t.Fatalf("expiry metric %v after rotation, want %d", got, v2.NotAfter.Unix())
	}

	// A bad new version: the server keeps v2 and says why.
	bad := filepath.Join(sd.dir, "v3")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "server.crt", "server.key", "node-a.crt", "node-a.key"} {
		b, _ := os.ReadFile(filepath.Join(sd.dir, "v2", f))
		if f == "server.key" {
			b = []byte("not a key")
		}
		if err := os.WriteFile(filepath.Join(bad, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sd.publish("v3")
	clk.Add(DefaultReloadInterval)
	if got := served(); !got.Equal(v2) {
		t.Fatal("a bad key file replaced the loaded certificate")
	}
	if logs.FilterMessage("TLS material not reloaded: keeping the loaded certificates").Len() == 0 {
		t.Fatal("no error logged for the bad key file")
	}
}

// A client's certificate is read again too: the server sees the new one.
func TestClientCertificateReloads(t *testing.T) {
	sd := secretDir{t, t.TempDir()}
	sd.issue("v1", 30*24*time.Hour)
	sd.publish("v1")
	clk := &clock{now: time.Now()}
	client := Config{CertFile: filepath.Join(sd.dir, "node-a.crt"), KeyFile: filepath.Join(sd.dir, "node-a.key"), CAFile: filepath.Join(sd.dir, "ca.crt")}
	cc, err := client.ClientReloading(Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	leaf := func() *x509.Certificate {
		c, err := cc.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf
	}
	v1 := leaf()
	sd.issue("v2", 365*24*time.Hour)
	sd.publish("v2")
	clk.Add(DefaultReloadInterval)
	if v2 := leaf(); v2.Equal(v1) {
		t.Fatal("client certificate not reloaded")
	}
}

func mustExpiry(t *testing.T, reg prometheus.Registerer) *prometheus.GaugeVec {
	g, err := ExpiryMetric(reg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
