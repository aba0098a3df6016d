// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"math/rand/v2"
	"strings"
	"testing"

	k8sval "k8s.io/apimachinery/pkg/util/validation"
)

// The hand-written name checks are kept for their cost (the collector runs
// them on every registration and report; k8s.io/apimachinery's regexp-based
// checks measured about 10x the time and 5 allocations for a node name and five
// labels, see docs/adr/0024-field-libraries.md), so the library is their
// reference: every string over an alphabet that exercises each class must
// get the same answer from both.
func TestNameChecksAgreeWithApimachinery(t *testing.T) {
	const alphabet = "az09AZ-_./ é"
	r := rand.New(rand.NewPCG(1, 2))
	check := func(s string) {
		t.Helper()
		// isDNSLabel is the character class alone; callers bound the length.
		if got, want := len(s) <= DNS1123LabelMaxLength && isDNSLabel(s), len(k8sval.IsDNS1123Label(s)) == 0; got != want {
			t.Fatalf("isDNSLabel(%q) = %v, IsDNS1123Label says %v", s, got, want)
		}
		// Ours also bounds each dot-separated part (see below).
		if got, want := DNSSubdomain("f", s) == nil, len(k8sval.IsDNS1123Subdomain(s)) == 0 && partsFit(s); got != want {
			t.Fatalf("DNSSubdomain(%q) ok = %v, IsDNS1123Subdomain says %v", s, got, want)
		}
		prefix, _, _ := strings.Cut(s, "/")
		if got, want := QualifiedName("f", s) == nil, len(k8sval.IsQualifiedName(s)) == 0 && (!strings.Contains(s, "/") || partsFit(prefix)); got != want {
			t.Fatalf("QualifiedName(%q) ok = %v, IsQualifiedName says %v", s, got, want)
		}
		if got, want := LabelValue("f", s) == nil, len(k8sval.IsValidLabelValue(s)) == 0; got != want {
			t.Fatalf("LabelValue(%q) ok = %v, IsValidLabelValue says %v", s, got, want)
		}
		if got, want := Namespace("f", s) == nil, len(k8sval.IsDNS1123Label(s)) == 0; got != want {
			t.Fatalf("Namespace(%q) ok = %v, IsDNS1123Label says %v", s, got, want)
		}
	}
	long := strings.Repeat("a", 63)
	for _, s := range []string{"", "a", "-", ".", "a-", "-a", "a.b", "a..b", ".a", "a.", "A", "a_b", "a/b", "/b", "a/", "a/b/c",
		"node-1.example.com", "example.com/my-key", "é", long, long + "a", long + "." + long, long + "/" + long, "a/" + long + "a"} {
		check(s)
	}
	for range 200_000 {
		b := make([]byte, r.IntN(9))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

// partsFit: every dot-separated part of s is at most a DNS label long.
func partsFit(s string) bool {
	for part := range strings.SplitSeq(s, ".") {
		if len(part) > DNS1123LabelMaxLength {
			return false
		}
	}
	return true
}

// TestSubdomainPartsAreDNSLabels: one deliberate difference. Kubernetes
// bounds a subdomain at 253 characters only; we also bound each
// dot-separated part at 63, as DNS does, so a node name always resolves.
func TestSubdomainPartsAreDNSLabels(t *testing.T) {
	s := strings.Repeat("a", 64) + ".example.com"
	if len(k8sval.IsDNS1123Subdomain(s)) != 0 {
		t.Fatalf("apimachinery refuses %q; the difference is gone, drop this test", s)
	}
	if DNSSubdomain("f", s) == nil {
		t.Fatalf("DNSSubdomain accepted a 64-character part")
	}
}

var benchNodeLabels = map[string]string{"kubernetes.io/hostname": "node-12345", "topology.kubernetes.io/zone": "eu-west-1a",
	"node.kubernetes.io/instance-type": "m5.large", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}

// BenchmarkNameChecks: a node name and five labels, by hand and through
// apimachinery (docs/adr/0024-field-libraries.md).
// Run: go test -run '^$' -bench NameChecks -benchmem ./validation
func BenchmarkNameChecks(b *testing.B) {
	const name = "node-12345.eu-west-1.compute.internal"
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if NodeName("f", name) != nil {
				b.Fatal("refused")
			}
			for k, v := range benchNodeLabels {
				if QualifiedName("f", k) != nil || LabelValue("f", v) != nil {
					b.Fatal("refused")
				}
			}
		}
	})
	b.Run("apimachinery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(k8sval.IsDNS1123Subdomain(name)) != 0 {
				b.Fatal("refused")
			}
			for k, v := range benchNodeLabels {
				if len(k8sval.IsQualifiedName(k)) != 0 || len(k8sval.IsValidLabelValue(v)) != 0 {
					b.Fatal("refused")
				}
			}
		}
	})
}
