// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestQuantityCanonicalForms pins the canonical spellings of
// resource.Quantity where they differ from the hand-written package it
// replaced: the format of the input is kept (a plain "1024" stays decimal
// and prints as "1024", not "1Ki"; a decimal "1000" prints as "1k"). Values
// still compare by value everywhere they are compared (StatusChanged, the
// collector's digest, allocatable ≤ capacity), so only the text differs.
func TestQuantityCanonicalForms(t *testing.T) {
	for in, want := range map[string]string{
		"16318080Ki":   "16318080Ki",
		"1024":         "1024", // the old package printed 1Ki
		"1000":         "1k",   // the old package printed 1000
		"110":          "110",
		"0.5":          "500m",
		"1.5Gi":        "1536Mi",
		"0":            "0",
		"4000m":        "4",
		"2e3":          "2e3",
		"4.0000000001": "4000000001n", // finer than a nano-unit rounds up, as before
	} {
		q, err := resource.ParseQuantity(in)
		if err != nil {
			t.Fatalf("ParseQuantity(%q): %v", in, err)
		}
		if got := q.String(); got != want {
			t.Errorf("String(%s) = %s, want %s", in, got, want)
		}
	}
	// The reporter's own spellings: bytes in binary units, pods decimal,
	// CPU in millicores, as the kubelet writes them.
	if got := resource.NewQuantity(100<<20, resource.BinarySI).String(); got != "100Mi" {
		t.Errorf("100Mi of bytes = %s", got)
	}
	if got := resource.NewMilliQuantity(1500, resource.DecimalSI).String(); got != "1500m" {
		t.Errorf("1500 millicores = %s", got)
	}
	if got := resource.NewMilliQuantity(4000, resource.DecimalSI).String(); got != "4" {
		t.Errorf("4000 millicores = %s", got)
	}
}

func TestQuantityRejects(t *testing.T) {
	for _, s := range []string{"", "abc", "1Kb", "1.2.3", "--1", "1 Gi", "Ki", "0x10",
		" 4", "4 ", "\t4", "4\n", "-1", "1e99", "1e31", "1e-31", "099999999999999e999999999999999", "e3", "-", ".", "+Ki", "2M", "1Ei1", strings.Repeat("1", MaxQuantityLength+1),
	} {
		if e := Quantity("f", "cpu", s); e == nil {
			t.Errorf("Quantity(%q) accepted", s)
		}
	}
	for _, s := range []string{"0", "4", "3920m", "1M", ".5", "1E-3"} {
		if e := Quantity("f", "cpu", s); e != nil {
			t.Errorf("Quantity(%q): %v", s, e)
		}
	}
	if e := Quantity("f", "memory", "1Ei"); e != nil {
		t.Errorf("1Ei of memory refused: %v", e)
	}
	if e := Quantity("f", "memory", "1025Pi"); e == nil {
		t.Error("1025Pi of memory accepted")
	}
}

// TestReportedQuantitiesAllocateNothing: the collector checks a dozen
// quantities in every status report; the ones reporters send (whole
// numbers with a suffix, millicores) cost no garbage, bounds included.
func TestReportedQuantitiesAllocateNothing(t *testing.T) {
	got := testing.AllocsPerRun(100, func() {
		for _, c := range [][2]string{{"memory", "16318080Ki"}, {"cpu", "3920m"}, {"cpu", "4"}, {"pods", "110"}, {"ephemeral-storage", "80Gi"}} {
			if e := Quantity("f", c[0], c[1]); e != nil {
				t.Fatal(e)
			}
		}
	})
	if got != 0 {
		t.Fatalf("checking reported quantities allocates %.0f times, want 0", got)
	}
}

// FuzzQuantityRoundTrip: what ParseQuantity accepts within the largest
// resource bound (±1Ei) prints (String) to text that parses back to the
// same value; the reporter's allocatable and the bounds in error messages
// rely on it. Beyond the bounds the library does not round-trip: a plain
// decimal 10^21 has no SI suffix and prints as "1", and a binary amount past
// 2^63-1 ("1024Ei") is capped; TestQuantityOutsideBoundsRefused keeps such
// values out.
// Regression inputs of the hand-written package it replaced are in
// testdata/fuzz/FuzzQuantityRoundTrip.
// Run: go test -run '^$' -fuzz FuzzQuantityRoundTrip -fuzztime 30s ./validation
func FuzzQuantityRoundTrip(f *testing.F) {
	for _, s := range []string{"1", "500m", "1.5Gi", "2e3", "-1Ki", ".5", "1E-3", "16318080Ki", "1Ei"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuantity(s)
		if err != nil {
			return
		}
		if a := q.DeepCopy(); a.Sign() < 0 {
			a.Neg()
			if a.Cmp(maxBytes) > 0 {
				return
			}
		} else if a.Cmp(maxBytes) > 0 {
			return
		}
		if strings.TrimSpace(s) != s {
			t.Fatalf("ParseQuantity(%q) accepted surrounding spaces", s)
		}
		back, err := resource.ParseQuantity(q.String())
		if err != nil {
			t.Fatalf("ParseQuantity(String(%q)=%q): %v", s, q.String(), err)
		}
		if back.Cmp(q) != 0 {
			t.Fatalf("round trip of %q changed the value: %s", s, q.String())
		}
	})
}

// TestQuantityOutsideBoundsRefused: the values resource.Quantity cannot
// print back (see FuzzQuantityRoundTrip) are all past every bound.
func TestQuantityOutsideBoundsRefused(t *testing.T) {
	for _, s := range []string{"1000000000000000000000", "01000000000000000000000000000000000000000000000000000000", "1024Ei", "100000000000000000000000000000000E"} {
		for _, name := range []string{"memory", "cpu", "pods", "example.com/gpu"} {
			if e := Quantity("f", name, s); e == nil {
				t.Errorf("Quantity(%s=%q) accepted", name, s)
			}
		}
	}
}
