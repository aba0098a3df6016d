// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// checkCertificates holds cert-manager objects to the chain the component
// promises: every Certificate names an Issuer of the set, the CA Issuer's
// Secret comes from a CA Certificate, no pod mounts a Secret holding a CA
// key, and when Certificates are present every Secret a pod mounts is one
// cert-manager writes.
func checkCertificates(objs []object) []string {
	var p []string
	add := func(id, format string, args ...any) { p = append(p, id+": "+fmt.Sprintf(format, args...)) }
	issuers := map[string]*issuer{}
	certs := map[string]*certificate{} // by secretName
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *issuer:
			issuers[v.Name] = v
		case *certificate:
			certs[v.Spec.SecretName] = v
		}
	}
	if len(certs) == 0 {
		return nil
	}
	for _, c := range certs {
		id := "Certificate/" + c.Name
		if c.Spec.IssuerRef.Kind != "" && c.Spec.IssuerRef.Kind != "Issuer" || issuers[c.Spec.IssuerRef.Name] == nil {
			add(id, "issuerRef %s/%s is not an Issuer of the manifests", c.Spec.IssuerRef.Kind, c.Spec.IssuerRef.Name)
		}
		if c.Spec.IsCA && issuers[c.Spec.IssuerRef.Name] != nil && issuers[c.Spec.IssuerRef.Name].Spec.SelfSigned == nil {
			add(id, "a CA certificate should be issued by the self-signed bootstrap Issuer")
		}
	}
	for _, is := range issuers {
		if is.Spec.CA != nil {
			if c := certs[is.Spec.CA.SecretName]; c == nil || !c.Spec.IsCA {
				add("Issuer/"+is.Name, "ca.secretName %q is not the Secret of a CA Certificate", is.Spec.CA.SecretName)
			}
		}
	}
	for _, o := range objs {
		t := podTemplate(o.obj)
		if t == nil {
			continue
		}
		for _, v := range t.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			c := certs[v.Secret.SecretName]
			switch {
			case c == nil:
				add(o.kind+"/"+o.name, "mounts Secret %q, which no Certificate writes", v.Secret.SecretName)
			case c.Spec.IsCA:
				add(o.kind+"/"+o.name, "mounts Secret %q, which holds the CA's private key", v.Secret.SecretName)
			}
		}
	}
	return p
}

// TestCertManagerOverlay: every Secret is written by cert-manager, the
// server certificates name what clients verify, and the reporter's node
// identity is untouched (CN system:node:<node> certificates are per node,
// outside the pods: docs/adr/0030-cert-manager-node-certificates.md).
func TestCertManagerOverlay(t *testing.T) {
	objs, problems := renderAndCheck(t, filepath.Join(repoRoot(t), "deploy", "kubernetes", "overlays", "cert-manager"))
	for _, p := range problems {
		t.Error(p)
	}
	byName := map[string]*certificate{}
	for _, o := range objs {
		if c, ok := o.obj.(*certificate); ok {
			byName[c.Name] = c
		}
	}
	for name, want := range map[string]struct {
		org, dns string
	}{
		"nodepulse-collector":      {"nodepulse:components", "collector.nodepulse.svc"},
		"nodepulse-monitor":        {"nodepulse:components", "monitor.nodepulse.svc"},
		"nodepulse-etcd":           {"nodepulse:components", "*.etcd.nodepulse.svc"},
		"nodepulse-operator-admin": {"nodepulse:operators", ""},
	} {
		c := byName[name]
		if c == nil {
			t.Errorf("no Certificate %s", name)
			continue
		}
		if c.Spec.Subject == nil || !slices.Contains(c.Spec.Subject.Organizations, want.org) {
			t.Errorf("Certificate %s: organizations %v, want %s", name, c.Spec.Subject, want.org)
		}
		if want.dns != "" && !slices.Contains(c.Spec.DNSNames, want.dns) {
			t.Errorf("Certificate %s: dnsNames %v lack %s", name, c.Spec.DNSNames, want.dns)
		}
	}
	if ca := byName["nodepulse-ca"]; ca == nil || slices.Contains(ca.Spec.Usages, "client auth") || slices.Contains(ca.Spec.Usages, "server auth") || !slices.Contains(ca.Spec.Usages, "code signing") {
		t.Errorf("Certificate nodepulse-ca (the CA bundle carrier) must have only a non-TLS extended usage: %+v", ca)
	}
	mon := find[*appsv1.Deployment](objs, "Deployment", "monitor")
	for _, a := range mon.Spec.Template.Spec.Containers[0].Args {
		if name, ok := strings.CutPrefix(a, "--collector.tls-server-name="); ok && !slices.Contains(byName["nodepulse-collector"].Spec.DNSNames, name) {
			t.Errorf("monitors verify collectors as %s, which the collector certificate does not name", name)
		}
	}
}
