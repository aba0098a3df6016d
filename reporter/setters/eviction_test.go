// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package setters

import (
	"math/big"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPercentageThresholdIsWholeBytes(t *testing.T) {
	th := Threshold{Fraction: big.NewRat(1, 10)}
	got := th.amount(264212084 * 1024)
	if v, ok := got.AsInt64(); !ok || got.Cmp(*resource.NewQuantity(v, resource.BinarySI)) != 0 {
		t.Fatalf("amount = %s, want a whole number of bytes", got.String())
	}
	if got.Cmp(*resource.NewQuantity(264212084*1024/10, resource.BinarySI)) < 0 {
		t.Fatalf("amount = %s rounds the reservation down", got.String())
	}
}
