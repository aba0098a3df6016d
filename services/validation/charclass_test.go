// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// The regular expressions the hand-written checks replace (Kubernetes'
// own); every string over an alphabet that exercises each class must get
// the same answer from both.
var (
	refDNSLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	refQualified = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	refLabelVal  = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	refSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func TestCharacterClassesMatchTheirRegexps(t *testing.T) {
	const alphabet = "az09AZ-_./ é"
	r := rand.New(rand.NewPCG(1, 2))
	check := func(s string) {
		t.Helper()
		if got, want := isDNSLabel(s), refDNSLabel.MatchString(s); got != want {
			t.Fatalf("isDNSLabel(%q) = %v, regexp says %v", s, got, want)
		}
		if got, want := isQualified(s), refQualified.MatchString(s); got != want {
			t.Fatalf("isQualified(%q) = %v, regexp says %v", s, got, want)
		}
		if got, want := LabelValue("f", s) == nil, refLabelVal.MatchString(s); got != want {
			t.Fatalf("LabelValue(%q) ok = %v, regexp says %v", s, got, want)
		}
		if got, want := DNSSubdomain("f", s) == nil, refSubdomain.MatchString(s); got != want {
			t.Fatalf("DNSSubdomain(%q) ok = %v, regexp says %v", s, got, want)
		}
	}
	for _, s := range []string{"", "a", "-", ".", "a-", "-a", "a.b", "a..b", ".a", "a.", "A", "a_b", "a/b", "node-1.example.com", "é"} {
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
