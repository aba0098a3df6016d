// Package quantity parses and formats Kubernetes resource quantities
// ("4", "500m", "16318080Ki", "1.5Gi", "2e3") exactly, as big rationals, so
// capacity arithmetic and change detection compare values, not spellings.
package quantity

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// Quantity is an exact, non-negative-or-negative rational amount.
type Quantity struct{ r *big.Rat }

var syntax = regexp.MustCompile(`^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$`)

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
// parsing so absurd input costs nothing.
const MaxLen = 64

// Parse reads a quantity in Kubernetes syntax.
func Parse(s string) (Quantity, error) {
	if len(s) > MaxLen {
		return Quantity{}, fmt.Errorf("quantity longer than %d characters", MaxLen)
	}
	m := syntax.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Quantity{}, fmt.Errorf("%q is not a quantity (want e.g. 4, 500m, 16Gi, 1e3)", s)
	}
	num, ok := new(big.Rat).SetString(m[2])
	if !ok {
		return Quantity{}, fmt.Errorf("%q: bad number", s)
	}
	suf := m[3]
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
	if m[1] == "-" {
		num.Neg(num)
	}
	return Quantity{r: num}, nil
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
func FromInt64(n int64) Quantity { return Quantity{r: new(big.Rat).SetInt64(n)} }

// rat returns the value, zero for the zero Quantity.
func (q Quantity) rat() *big.Rat {
	if q.r == nil {
		return new(big.Rat)
	}
	return q.r
}

// Cmp compares q and o: -1, 0 or +1.
func (q Quantity) Cmp(o Quantity) int { return q.rat().Cmp(o.rat()) }

// Sign is -1, 0 or +1.
func (q Quantity) Sign() int { return q.rat().Sign() }

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
	r := q.rat()
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
	// Finer than nano: round up to nano, as Kubernetes does.
	v := new(big.Rat).Quo(r, suffixes["n"])
	i := new(big.Int).Quo(v.Num(), v.Denom())
	if v.Sign() > 0 {
		i.Add(i, big.NewInt(1))
	}
	return i.String() + "n"
}

// Bytes formats a byte count ("16318080Ki" style).
func Bytes(n int64) string { return FromInt64(n).String() }

// Milli formats thousandths of a unit (CPU millicores: 1500 -> "1500m", 2000 -> "2").
func Milli(n int64) string { return Quantity{r: big.NewRat(n, 1000)}.String() }
