// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package quantity

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseAndCompare(t *testing.T) {
	cases := []struct {
		a, b string
		cmp  int
	}{
		{"1Ki", "1024", 0},
		{"1k", "1000", 0},
		{"500m", "0.5", 0},
		{"1.5Gi", "1536Mi", 0},
		{"2e3", "2k", 0},
		{"1E-3", "1m", 0},
		{"100Mi", "100M", 1},
		{"0", "0m", 0},
		{"-1", "0", -1},
		{".5", "500m", 0},
		{"4", "3920m", 1},
		{"-2", "-1", -1},
		{"1Ei", "1E", 1},
		{"9223372036854775807", "1Ei", 1},
	}
	for _, c := range cases {
		a, err := Parse(c.a)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.a, err)
		}
		b, err := Parse(c.b)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.b, err)
		}
		if got := a.Cmp(b); got != c.cmp {
			t.Errorf("Cmp(%s, %s) = %d, want %d", c.a, c.b, got, c.cmp)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", "abc", "1Kb", "1.2.3", "--1", "1 Gi", "1e99", "Ki", "0x10",
		" 4", "4 ", "\t4", "4\n", // resource.ParseQuantity refuses surrounding spaces
		"9999999999999999999999999999999999999999999999999999999999999999"[:63] + "E", // prints 81 digits
	} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
	long := make([]byte, MaxLen+1)
	for i := range long {
		long[i] = '1'
	}
	if _, err := Parse(string(long)); err == nil {
		t.Error("overlong quantity accepted")
	}
}

func TestString(t *testing.T) {
	cases := map[string]string{
		"16318080Ki": "16318080Ki",
		"1024":       "1Ki",
		"1000":       "1000",
		"110":        "110",
		"0.5":        "500m",
		"2":          "2",
		"1Gi":        "1Gi",
		"1.5Gi":      "1536Mi",
		"0":          "0",
	}
	for in, want := range cases {
		if got := MustParse(in).String(); got != want {
			t.Errorf("String(%s) = %s, want %s", in, got, want)
		}
	}
	if got := Milli(1500); got != "1500m" {
		t.Errorf("Milli(1500) = %s", got)
	}
	if got := Milli(4000); got != "4" {
		t.Errorf("Milli(4000) = %s", got)
	}
	if got := Bytes(100 << 20); got != "100Mi" {
		t.Errorf("Bytes = %s", got)
	}
}

func TestArithmetic(t *testing.T) {
	c := MustParse("16Gi").Sub(MustParse("100Mi"))
	if c.String() != "16284Mi" {
		t.Errorf("16Gi-100Mi = %s", c)
	}
	if v, ok := MustParse("1500m").Int64(); !ok || v != 2 {
		t.Errorf("Int64(1500m) = %d, %v (rounds up)", v, ok)
	}
	if v, _ := MustParse("1.5").MilliValue(); v != 1500 {
		t.Errorf("MilliValue = %d", v)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "500m", "1.5Gi", "2e3", "-1Ki", ".5", "1E-3"} {
		f.Add(s)
	}
	// Regression inputs the fuzzer found are in testdata/fuzz/FuzzParse.
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			return
		}
		if strings.TrimSpace(s) != s {
			t.Fatalf("Parse(%q) accepted surrounding spaces", s)
		}
		// What String prints must parse back to the same value.
		back, err := Parse(q.String())
		if err != nil {
			t.Fatalf("Parse(String(%q)=%q): %v", s, q.String(), err)
		}
		if back.Cmp(q) != 0 {
			t.Fatalf("round trip of %q changed the value: %s", s, q.String())
		}
	})
}

// TestSmallQuantitiesAllocateNothing: the collector parses and compares a
// dozen quantities in every status report it checks; the ones reporters
// send (whole numbers with a suffix, milli-units) make no garbage.
func TestSmallQuantitiesAllocateNothing(t *testing.T) {
	var z Quantity
	got := testing.AllocsPerRun(100, func() {
		a, err1 := Parse("16318080Ki")
		b, err2 := Parse("1Ei")
		c, err3 := Parse("3920m")
		d, err4 := Parse("4")
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			t.Fatal("parse failed")
		}
		if a.Cmp(b) >= 0 || b.Cmp(a) <= 0 || z.Cmp(a) >= 0 || a.Cmp(a) != 0 || c.Cmp(d) >= 0 || d.Cmp(c) <= 0 || c.Sign() <= 0 {
			t.Fatal("wrong order")
		}
	})
	if got != 0 {
		t.Fatalf("parsing and comparing small quantities allocates %.0f times, want 0", got)
	}
	if z.Cmp(FromInt64(0)) != 0 || z.Sign() != 0 || z.String() != "0" {
		t.Fatal("the zero Quantity is not 0")
	}
}

// TestSmallFormsAgreeWithBig: the int64 forms print, compare and round as
// the exact big.Rat arithmetic does.
func TestSmallFormsAgreeWithBig(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dens := []int64{1, 1e3, 1e6, 1e9}
	pick := func() (int64, int64) {
		d := dens[r.IntN(len(dens))]
		var n int64
		switch r.IntN(4) {
		case 0:
			n = r.Int64N(2000) - 1000
		case 1:
			n = r.Int64N(1e12) * []int64{1, 1000, 1024, 1e6}[r.IntN(4)]
		case 2:
			n = r.Int64() - r.Int64()
		default:
			n = []int64{0, 1, -1, math.MaxInt64, -math.MaxInt64, math.MinInt64}[r.IntN(6)]
		}
		return n, d
	}
	for range 200_000 {
		an, ad := pick()
		bn, bd := pick()
		a, b := Quantity{n: an, d: ad}, Quantity{n: bn, d: bd}
		ra, rb := big.NewRat(an, ad), big.NewRat(bn, bd)
		if got, want := a.Cmp(b), ra.Cmp(rb); got != want {
			t.Fatalf("Cmp(%d/%d, %d/%d) = %d, want %d", an, ad, bn, bd, got, want)
		}
		if got, want := a.Sign(), ra.Sign(); got != want {
			t.Fatalf("Sign(%d/%d) = %d, want %d", an, ad, got, want)
		}
		if got, want := a.String(), (Quantity{r: ra}).String(); got != want {
			t.Fatalf("String(%d/%d) = %s, want %s", an, ad, got, want)
		}
		if back := MustParse(a.String()); back.Cmp(a) != 0 {
			t.Fatalf("String(%d/%d) = %s does not parse back", an, ad, a.String())
		}
	}
}
