// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package devca creates a development certificate authority and the
// certificates a nodepulse deployment needs, with no external tool. It is for
// laptops, CI and trying mTLS out; production keys belong in a real PKI
// (cert-manager, Vault ...), with the same subject conventions (see package
// identity).
package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nodepulse/nodepulse/services/identity"
)

// Request says what to create.
type Request struct {
	// Dir receives the files; created if missing. An existing ca.crt/ca.key
	// there is reused, so certificates can be added later.
	Dir string
	// Hosts are DNS names and IPs put in the server certificate (collector,
	// monitor); localhost and 127.0.0.1 are always included.
	Hosts []string
	// Nodes get node-<name>.crt/.key (role node).
	Nodes []string
	// Operators get operator-<name>.crt/.key (role operator).
	Operators []string
	// Validity of issued certificates; default one year.
	Validity time.Duration
}

// Files created: ca.crt, ca.key, server.crt, server.key (also a component
// client certificate, CN "nodepulse-component", used by collectors and
// monitors towards each other), node-<name>.*, operator-<name>.*.
func Generate(req Request) error {
	if req.Dir == "" {
		return errors.New("devca: no output directory")
	}
	if req.Validity <= 0 {
		req.Validity = 365 * 24 * time.Hour
	}
	if err := os.MkdirAll(req.Dir, 0o755); err != nil {
		return fmt.Errorf("devca: %w", err)
	}
	ca, caKey, err := loadOrCreateCA(req.Dir, req.Validity)
	if err != nil {
		return err
	}
	hosts := append([]string{"localhost", "127.0.0.1", "::1"}, req.Hosts...)
	server := pkix.Name{CommonName: "nodepulse-component", Organization: []string{identity.ComponentOrganization}}
	if err := issue(req.Dir, "server", server, hosts, true, ca, caKey, req.Validity); err != nil {
		return err
	}
	for _, n := range req.Nodes {
		subj := pkix.Name{CommonName: identity.NodeCommonNamePrefix + n, Organization: []string{identity.NodeOrganization}}
		if err := issue(req.Dir, "node-"+n, subj, nil, false, ca, caKey, req.Validity); err != nil {
			return err
		}
	}
	for _, o := range req.Operators {
		subj := pkix.Name{CommonName: o, Organization: []string{identity.OperatorOrganization}}
		if err := issue(req.Dir, "operator-"+o, subj, nil, false, ca, caKey, req.Validity); err != nil {
			return err
		}
	}
	return nil
}

func loadOrCreateCA(dir string, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	crtPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if crtPEM, err := os.ReadFile(crtPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("devca: ca.crt exists but ca.key does not: %w", err)
		}
		cb, _ := pem.Decode(crtPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, errors.New("devca: existing CA files are not PEM")
		}
		c, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("devca: parse ca.crt: %w", err)
		}
		k, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("devca: parse ca.key: %w", err)
		}
		return c, k, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "nodepulse development CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity * 5),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(dir, "ca", der, key); err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func issue(dir, name string, subj pkix.Name, hosts []string, server bool, ca *x509.Certificate, caKey *ecdsa.PrivateKey, validity time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subj,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("devca: issue %s: %w", name, err)
	}
	return writePair(dir, name, der, key)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("devca: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return fmt.Errorf("devca: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
