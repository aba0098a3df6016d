// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package quantity parses and formats Kubernetes resource quantities
// ("4", "500m", "16318080Ki", "1.5Gi", "2e3") exactly, as big rationals, so
// capacity arithmetic and change detection compare values, not spellings.
package quantity

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
)

// Quantity is an exact rational amount.
//
// Nearly every quantity a node reports is n/d with n an int64 and d one of
// 1, 10^3, 10^6, 10^9: a whole number times a suffix, or a count of milli-,
// micro- or nano-units. Those are held as the two integers, the rest as a
// big.Rat, so parsing and comparing the dozen quantities of every status
// report (the collector checks one per node every five minutes) makes no
// garbage.
type Quantity struct {
	r    *big.Rat // the value, when it is not small
	n, d int64    // the value n/d when r is nil; d == 0 (the zero Quantity) reads as 1
}

// den is the small form's denominator.
func (q Quantity) den() int64 {
	if q.d == 0 {
		return 1
	}
	return q.d
}

var suffixes = map[string]*big.Rat{
	"":   big.NewRat(1, 1),
	"n":  big.NewRat(1, 1_000_000_000),
	"u":  big.NewRat(1, 1_000_000),
	"m":  big.NewRat(1, 1000),
	"k":  big.NewRat(1000, 1),
	"M":  new(big.Rat).SetInt64(1_000_000),
	"G":  new(big.Rat).SetInt64(1_000_000_000),
	"T":  new(big.Rat).SetInt64(1_000_000_000_000),
	"P":  new(big.Rat).SetInt64(1_000_000_000_000_000),
	"E":  new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)),
	"Ki": new(big.Rat).SetInt64(1 << 10),
	"Mi": new(big.Rat).SetInt64(1 << 20),
	"Gi": new(big.Rat).SetInt64(1 << 30),
	"Ti": new(big.Rat).SetInt64(1 << 40),
	"Pi": new(big.Rat).SetInt64(1 << 50),
	"Ei": new(big.Rat).SetInt64(1 << 60),
}

// MaxLen bounds the text of a quantity; longer strings are refused before
// parsing so absurd input costs nothing. A quantity whose canonical form
// (String) is longer is refused too, so whatever parses prints to a string
// that parses back to the same value.
const MaxLen = 64

// Parse reads a quantity in Kubernetes syntax. Like Kubernetes'
// resource.ParseQuantity it refuses surrounding spaces, and rounds a value
// finer than a nano-unit up to the next nano-unit, so String prints it
// exactly.
func Parse(s string) (Quantity, error) {
	if len(s) > MaxLen {
		return Quantity{}, fmt.Errorf("quantity longer than %d characters", MaxLen)
	}
	neg, digits, suf, ok := split(s)
	if !ok {
		return Quantity{}, fmt.Errorf("%q is not a quantity (want e.g. 4, 500m, 16Gi, 1e3)", s)
	}
	if n, d, ok := small(digits, suf); ok {
		if neg {
			n = -n
		}
		return Quantity{n: n, d: d}, nil
	}
	num, ok := new(big.Rat).SetString(digits)
	if !ok {
		return Quantity{}, fmt.Errorf("%q: bad number", s)
	}
	if mult, ok := suffixes[suf]; ok {
		num.Mul(num, mult)
	} else { // decimal exponent
		var exp int64
		if _, err := fmt.Sscan(suf[1:], &exp); err != nil || exp > 30 || exp < -30 {
			return Quantity{}, fmt.Errorf("%q: exponent out of range", s)
		}
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(exp)), nil)
		if exp >= 0 {
			num.Mul(num, new(big.Rat).SetInt(p))
		} else {
			num.Quo(num, new(big.Rat).SetInt(p))
		}
	}
	if neg {
		num.Neg(num)
	}
	// The exact path only (the small one makes nothing finer than a nano
	// or longer than 20 digits): round to nano as String does, and refuse
	// what String would print past MaxLen ("9…9E" with 63 nines prints 81
	// digits), which would not parse back.
	if !num.IsInt() {
		num = ceilNano(num)
	}
	q := Quantity{r: num}
	if len(q.String()) > MaxLen {
		return Quantity{}, fmt.Errorf("%q: the value takes more than %d characters to write", s, MaxLen)
	}
	return q, nil
}

// ceilNano rounds r up (towards +∞) to a whole number of nano-units.
func ceilNano(r *big.Rat) *big.Rat {
	v := new(big.Rat).Quo(r, suffixes["n"])
	if v.IsInt() {
		return r
	}
	i := new(big.Int).Quo(v.Num(), v.Denom()) // truncates towards zero
	if v.Sign() > 0 {
		i.Add(i, big.NewInt(1))
	}
	return new(big.Rat).Mul(new(big.Rat).SetInt(i), suffixes["n"])
}

// split checks s against the grammar of a quantity, by hand (a regexp
// match per quantity, and there are a dozen in every status report, was
// most of the collector's cost of checking one):
//
//	[+-]? ( [0-9]+ ( "." [0-9]* )? | "." [0-9]+ ) suffix?
//	suffix = Ki | Mi | Gi | Ti | Pi | Ei | n | u | m | k | M | G | T | P | E | [eE] [+-]? [0-9]+
//
// and returns the sign, the number and the suffix. quantity_test.go checks
// it against the regular expression it replaces.
func split(s string) (neg bool, num, suffix string, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start, digits := i, 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false, "", "", false
	}
	num, suffix = s[start:i], s[i:]
	if _, named := suffixes[suffix]; named {
		return neg, num, suffix, true
	}
	if len(suffix) < 2 || suffix[0] != 'e' && suffix[0] != 'E' {
		return false, "", "", false
	}
	j := 1
	if suffix[j] == '+' || suffix[j] == '-' {
		j++
	}
	if j == len(suffix) {
		return false, "", "", false
	}
	for ; j < len(suffix); j++ {
		if !isDigit(suffix[j]) {
			return false, "", "", false
		}
	}
	return neg, num, suffix, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// smallMultipliers are the suffixes whose value is a whole number.
var smallMultipliers = map[string]int64{
	"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// smallDivisors are the suffixes whose value is a fraction 1/d.
var smallDivisors = map[string]int64{"m": 1e3, "u": 1e6, "n": 1e9}

// small is the common case without big numbers: a whole number of at most
// 18 digits times a suffix, as n/d. ok is false for everything else
// (decimal points, exponents, products past an int64), which the exact path
// handles.
func small(num, suf string) (n, d int64, ok bool) {
	if len(num) > 18 {
		return 0, 0, false
	}
	var v int64
	for i := 0; i < len(num); i++ {
		if !isDigit(num[i]) {
			return 0, 0, false // a fraction
		}
		v = v*10 + int64(num[i]-'0')
	}
	if m, ok := smallMultipliers[suf]; ok {
		if v > math.MaxInt64/m {
			return 0, 0, false
		}
		return v * m, 1, true
	}
	if d, ok := smallDivisors[suf]; ok {
		return v, d, true
	}
	return 0, 0, false
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// MustParse is Parse for constants; it panics on error.
func MustParse(s string) Quantity {
	q, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return q
}

// FromInt64 returns n units.
func FromInt64(n int64) Quantity { return Quantity{n: n, d: 1} }

// rat returns the value as a big.Rat, which callers only read: for a big
// value it is q's own.
func (q Quantity) rat() *big.Rat {
	if q.r == nil {
		return big.NewRat(q.n, q.den())
	}
	return q.r
}

// Cmp compares q and o: -1, 0 or +1.
func (q Quantity) Cmp(o Quantity) int {
	if q.r == nil && o.r == nil {
		return cmpSmall(q.n, q.den(), o.n, o.den())
	}
	return q.rat().Cmp(o.rat())
}

// cmpSmall compares an/ad with bn/bd (ad, bd > 0) by cross-multiplying in
// 128 bits, where the products cannot overflow.
func cmpSmall(an, ad, bn, bd int64) int {
	sa, sb := sign(an), sign(bn)
	if sa != sb || sa == 0 {
		return cmp.Compare(sa, sb)
	}
	ah, al := bits.Mul64(magnitude(an), uint64(bd))
	bh, bl := bits.Mul64(magnitude(bn), uint64(ad))
	c := cmp.Compare(ah, bh)
	if c == 0 {
		c = cmp.Compare(al, bl)
	}
	return c * sa
}

func sign(v int64) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// magnitude is |v|, also for math.MinInt64.
func magnitude(v int64) uint64 {
	if v < 0 {
		return -uint64(v)
	}
	return uint64(v)
}

// Sign is -1, 0 or +1.
func (q Quantity) Sign() int {
	if q.r == nil {
		return sign(q.n)
	}
	return q.r.Sign()
}

// Add returns q+o.
func (q Quantity) Add(o Quantity) Quantity { return Quantity{r: new(big.Rat).Add(q.rat(), o.rat())} }

// Sub returns q-o.
func (q Quantity) Sub(o Quantity) Quantity { return Quantity{r: new(big.Rat).Sub(q.rat(), o.rat())} }

// Mul returns q*f.
func (q Quantity) Mul(f *big.Rat) Quantity { return Quantity{r: new(big.Rat).Mul(q.rat(), f)} }

// Int64 returns the value rounded up to an integer, and whether it fits.
func (q Quantity) Int64() (int64, bool) {
	r := q.rat()
	i := new(big.Int).Quo(r.Num(), r.Denom())
	if new(big.Rat).SetInt(i).Cmp(r) < 0 {
		i.Add(i, big.NewInt(1))
	}
	return i.Int64(), i.IsInt64()
}

// MilliValue returns the value in thousandths, rounded up.
func (q Quantity) MilliValue() (int64, bool) {
	return Quantity{r: new(big.Rat).Mul(q.rat(), big.NewRat(1000, 1))}.Int64()
}

// String formats canonically: integers use the largest binary suffix that
// divides them exactly when they are at least 1Ki and a multiple of 1024,
// else plain digits; fractions use "m" when exact in thousandths, else "n".
func (q Quantity) String() string {
	if q.r == nil && q.n != math.MinInt64 {
		return smallFracString(q.n, q.den())
	}
	r := q.rat()
	if r.IsInt() && r.Num().IsInt64() && r.Num().Int64() != math.MinInt64 {
		return smallString(r.Num().Int64())
	}
	return bigString(r)
}

// binarySuffixes from the largest; 1<<shift is each one's value.
var binarySuffixes = []struct {
	s     string
	shift uint
}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}}

// smallString is String of an integer in int64 arithmetic (capacities are
// all such; bigString allocates for every suffix it tries).
func smallString(n int64) string {
	a := n
	if a < 0 {
		a = -a
	}
	for _, b := range binarySuffixes {
		if d := int64(1) << b.shift; a >= d && a%d == 0 {
			return strconv.FormatInt(n/d, 10) + b.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// smallFracString is String of n/d in int64 arithmetic, d being 1, 10^3,
// 10^6 or 10^9: bigString's choice of suffix without its allocations.
func smallFracString(n, d int64) string {
	if n%d == 0 {
		return smallString(n / d)
	}
	for _, u := range fracUnits {
		// The first unit fine enough to count n/d in whole units. Units
		// run from coarse to fine and d is one of them, so per ≤ d here.
		if step := d / u.per; n%step == 0 {
			return strconv.FormatInt(n/step, 10) + u.s
		}
	}
	panic("quantity: denominator is not 1, 10^3, 10^6 or 10^9") // small makes no other
}

// fracUnits are the suffixes of fractions, from the coarsest; per is how
// many make one.
var fracUnits = []struct {
	s   string
	per int64
}{{"m", 1e3}, {"u", 1e6}, {"n", 1e9}}

// bigString is String for any value.
func bigString(r *big.Rat) string {
	if r.IsInt() {
		n := new(big.Int).Set(r.Num())
		if n.Sign() == 0 {
			return "0"
		}
		for _, s := range []string{"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"} {
			d := suffixes[s].Num()
			if new(big.Int).Abs(n).Cmp(d) >= 0 && new(big.Int).Rem(n, d).Sign() == 0 {
				return new(big.Int).Quo(n, d).String() + s
			}
		}
		return n.String()
	}
	for _, s := range []string{"m", "u", "n"} {
		v := new(big.Rat).Quo(r, suffixes[s])
		if v.IsInt() {
			return v.Num().String() + s
		}
	}
	// Finer than nano (a product or sum, never a parsed value): round up
	// to nano, as Kubernetes does.
	return new(big.Rat).Quo(ceilNano(r), suffixes["n"]).Num().String() + "n"
}

// Bytes formats a byte count ("16318080Ki" style).
func Bytes(n int64) string { return FromInt64(n).String() }

// Milli formats thousandths of a unit (CPU millicores: 1500 -> "1500m", 2000 -> "2").
func Milli(n int64) string { return Quantity{n: n, d: 1000}.String() }
