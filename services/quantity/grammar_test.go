// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package quantity

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"testing"
)

// refSyntax is the regular expression split replaces.
var refSyntax = regexp.MustCompile(`^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$`)

// refParse is Parse as it was with the regular expression and big numbers
// throughout: the reference for split and the small-number fast path. Like
// Parse it rounds to nano-units and refuses values whose canonical form is
// longer than MaxLen.
func refParse(s string) (*big.Rat, bool) {
	m := refSyntax.FindStringSubmatch(s)
	if m == nil {
		return nil, false
	}
	num, ok := new(big.Rat).SetString(m[2])
	if !ok {
		return nil, false
	}
	if mult, ok := suffixes[m[3]]; ok {
		num.Mul(num, mult)
	} else {
		var exp int64
		if _, err := fmt.Sscan(m[3][1:], &exp); err != nil || exp > 30 || exp < -30 {
			return nil, false
		}
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(exp)), nil)
		if exp >= 0 {
			num.Mul(num, new(big.Rat).SetInt(p))
		} else {
			num.Quo(num, new(big.Rat).SetInt(p))
		}
	}
	if m[1] == "-" {
		num.Neg(num)
	}
	num = ceilNano(num)
	if len(bigString(num)) > MaxLen {
		return nil, false
	}
	return num, true
}

func TestParseMatchesTheRegexpGrammar(t *testing.T) {
	check := func(s string) {
		t.Helper()
		_, _, _, ok := split(s)
		if want := refSyntax.MatchString(s); ok != want {
			t.Fatalf("split(%q) ok = %v, regexp says %v", s, ok, want)
		}
		want, wantOK := refParse(s)
		got, err := Parse(s)
		if (err == nil) != wantOK {
			t.Fatalf("Parse(%q) error %v, reference ok %v", s, err, wantOK)
		}
		if wantOK && got.rat().Cmp(want) != 0 {
			t.Fatalf("Parse(%q) = %s, reference %s", s, got.rat().RatString(), want.RatString())
		}
	}
	for _, s := range []string{"0", "4", "500m", "16318080Ki", "1.5Gi", "2e3", "1E3", "1E", "1e", "1e+", "1e-3",
		"+5", "-5", ".5", "5.", ".", "-", "", "Ki", "8Ei", "9Ei", "999999999999999999", "9999999999999999999",
		"9223372036854775807", "9223372036854775808", "1000P", "10000E", "7n", "7u"} {
		check(s)
	}
	const alphabet = "0123456789.+-eEKMGTPiumnk x"
	r := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		b := make([]byte, r.IntN(10))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

func BenchmarkParse(b *testing.B) {
	for _, s := range []string{"16318080Ki", "110", "500m", "1.5Gi"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestSmallStringMatchesBigString(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := []int64{0, 1, -1, 1023, 1024, -1024, 1 << 60, 3 << 60, -(3 << 50), 1<<63 - 1, -(1<<63 - 1)}
	for range 100_000 {
		v := r.Int64N(1<<40) << r.UintN(24)
		if r.IntN(2) == 0 {
			v = -v
		}
		vals = append(vals, v)
	}
	for _, v := range vals {
		if v == math.MinInt64 {
			continue // String takes the big path for it
		}
		if got, want := smallString(v), bigString(new(big.Rat).SetInt64(v)); got != want {
			t.Fatalf("smallString(%d) = %q, bigString %q", v, got, want)
		}
	}
}
