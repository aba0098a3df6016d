// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package setters

import (
	"math/big"
	"testing"

	"github.com/nodepulse/nodepulse/services/quantity"
)

func TestPercentageThresholdIsWholeBytes(t *testing.T) {
	th := Threshold{Fraction: big.NewRat(1, 10)}
	got := th.amount(264212084 * 1024)
	if v, ok := got.Int64(); !ok || got.Cmp(quantity.FromInt64(v)) != 0 {
		t.Fatalf("amount = %s, want a whole number of bytes", got)
	}
	if got.Cmp(quantity.FromInt64(264212084*1024/10)) < 0 {
		t.Fatalf("amount = %s rounds the reservation down", got)
	}
}
