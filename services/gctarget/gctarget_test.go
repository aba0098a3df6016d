// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package gctarget

import (
	"testing"

	"go.uber.org/zap"
)

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name    string
		percent int
		env     string
		want    int // target set, 0: none
	}{
		{"flag applies", 200, "", 200},
		{"GOGC wins", 200, "50", 0},
		{"zero keeps Go's default", 0, "", 0},
		{"negative turns it off", -5, "", -1},
		{"GOGC wins over off", -1, "100", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := 0
			got := apply(zap.NewNop(), c.percent, c.env, func(p int) int { set = p; return 100 })
			if got != c.want || set != c.want {
				t.Fatalf("apply(%d, GOGC=%q) = %d, set %d; want %d", c.percent, c.env, got, set, c.want)
			}
		})
	}
}

func TestSetMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		mib     int64
		env     string
		want    bool
		wantSet int64
	}{
		{"flag applies", 6144, "", true, 6144 << 20},
		{"GOMEMLIMIT wins", 6144, "2GiB", true, 0},
		{"GOMEMLIMIT alone is a limit", 0, "2GiB", true, 0},
		{"zero: no limit", 0, "", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var set int64
			got := setMemoryLimit(zap.NewNop(), c.mib, c.env, func(b int64) int64 { set = b; return 0 })
			if got != c.want || set != c.wantSet {
				t.Fatalf("setMemoryLimit(%d, GOMEMLIMIT=%q) = %v, set %d; want %v, %d", c.mib, c.env, got, set, c.want, c.wantSet)
			}
		})
	}
}

func TestApplyWithLimit(t *testing.T) {
	for _, c := range []struct {
		name             string
		percent          int
		mib              int64
		gogc, gomemlimit string
		want             int
		wantErr          bool
	}{
		{"off under a limit", -1, 4096, "", "", -1, false},
		{"off under GOMEMLIMIT", -1, 0, "", "4GiB", -1, false},
		{"off without a limit is refused", -1, 0, "", "", 0, true},
		{"GOGC overrides the flag, so no limit is needed", -1, 0, "200", "", 0, false},
		{"a positive target needs no limit", 400, 0, "", "", 400, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gcSet := 0
			got, err := applyWithLimit(zap.NewNop(), c.percent, c.mib, c.gogc, c.gomemlimit,
				func(p int) int { gcSet = p; return 100 }, func(int64) int64 { return 0 })
			if (err != nil) != c.wantErr || got != c.want || gcSet != c.want {
				t.Fatalf("got %d (set %d), %v; want %d, error %v", got, gcSet, err, c.want, c.wantErr)
			}
		})
	}
}
