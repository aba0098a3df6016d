// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package devca

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodepulse/nodepulse/services/identity"
)

func TestGenerateAndIdentities(t *testing.T) {
	dir := t.TempDir()
	if err := Generate(Request{Dir: dir, Hosts: []string{"collector"}, Nodes: []string{"n1"}, Operators: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	want := map[string]identity.Identity{
		"node-n1":        {Role: identity.Node, Name: "n1"},
		"operator-alice": {Role: identity.Operator, Name: "alice"},
		"server":         {Role: identity.Component, Name: "nodepulse-component"},
	}
	for file, id := range want {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, file+".crt"), filepath.Join(dir, file+".key"))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(pair.Certificate[0])
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s does not verify as a client: %v", file, err)
		}
		if got := identity.FromCert(c); got != id {
			t.Errorf("%s identity = %v, want %v", file, got, id)
		}
	}
	// Re-running reuses the CA: earlier certificates stay valid.
	if err := Generate(Request{Dir: dir, Nodes: []string{"n2"}}); err != nil {
		t.Fatal(err)
	}
	caPEM2, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if string(caPEM) != string(caPEM2) {
		t.Error("CA was replaced on the second run")
	}
}
