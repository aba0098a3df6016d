// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcclient

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// A client with a certificate reports when it expires, so the
// certificate-expiry alert covers the nodes' certificates as it covers the
// servers'.
func TestDialExportsClientCertificateExpiry(t *testing.T) {
	dir := t.TempDir()
	if err := devca.Generate(devca.Request{Dir: dir, Nodes: []string{"a"}, Validity: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := Config{
		Addresses:  "127.0.0.1:1",
		TLS:        tlsconfig.Config{CertFile: filepath.Join(dir, "node-a.crt"), KeyFile: filepath.Join(dir, "node-a.key"), CAFile: filepath.Join(dir, "ca.crt")},
		Registerer: reg,
	}
	conn, err := Dial(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "nodepulse_tls_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["role"] != "grpc-client" || labels["path"] != c.TLS.CertFile {
				continue
			}
			found = true
			left := time.Until(time.Unix(int64(m.GetGauge().GetValue()), 0))
			if left < 47*time.Hour || left > 49*time.Hour {
				t.Errorf("client certificate expires in %s, want about 48h", left)
			}
		}
	}
	if !found {
		t.Fatalf("no expiry series for the client certificate %s in %v", c.TLS.CertFile, mfs)
	}
}
