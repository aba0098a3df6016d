// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package promtext

import (
	"strings"
	"testing"
)

func TestSumMatchesEveryFragment(t *testing.T) {
	s, err := Parse(strings.NewReader(`# HELP m x
m{kind="lease",result="ok"} 3
m{kind="lease",result="invalid"} 5
m{kind="status",result="ok"} 7
g 2
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		match []string
		want  float64
	}{
		{"m", nil, 15},
		{"m", []string{`kind="lease"`}, 8},
		{"m", []string{`kind="lease"`, `result="ok"`}, 3},
		{"g", nil, 2},
		{"absent", nil, 0},
	} {
		if got := s.Sum(c.name, c.match...); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.match, got, c.want)
		}
	}
}
