// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

func secs(s int64) *int64 { return &s }

// TestToleratesTaintTruthTable walks spec §9 row by row.
func TestToleratesTaintTruthTable(t *testing.T) {
	taint := func(k, v, e string) *nodev1.Taint { return &nodev1.Taint{Key: k, Value: v, Effect: e} }
	tol := func(k, op, v, e string) *nodev1.Toleration {
		return &nodev1.Toleration{Key: k, Operator: op, Value: v, Effect: e}
	}
	const k, ne, ns = "example.com/k", "NoExecute", "NoSchedule"
	cases := []struct {
		row   string
		tol   *nodev1.Toleration
		taint *nodev1.Taint
		gate  bool
		want  bool
	}{
		{"1 effect set and different", tol(k, "Exists", "", ns), taint(k, "", ne), false, false},
		{"1 effect set and equal", tol(k, "Exists", "", ne), taint(k, "", ne), false, true},
		{"2 empty effect matches NoExecute", tol(k, "Exists", "", ""), taint(k, "", ne), false, true},
		{"2 empty effect matches NoSchedule", tol(k, "Exists", "", ""), taint(k, "", ns), false, true},
		{"2 empty effect matches PreferNoSchedule", tol(k, "Exists", "", ""), taint(k, "", "PreferNoSchedule"), false, true},
		{"3 key set and different", tol("other", "Exists", "", ne), taint(k, "", ne), false, false},
		{"4 empty key Exists, any key", tol("", "Exists", "", ""), taint(k, "v", ne), false, true},
		{"4 empty key Exists, any value", tol("", "Exists", "", ne), taint("x/y", "anything", ne), false, true},
		{"4 empty key Exists but effect differs", tol("", "Exists", "", ns), taint(k, "", ne), false, false},
		{"5 Exists, key equal, value set", tol(k, "Exists", "", ne), taint(k, "v", ne), false, true},
		{"5 Exists, key equal, empty value", tol(k, "Exists", "", ne), taint(k, "", ne), false, true},
		{"6 Equal, value equal", tol(k, "Equal", "v", ne), taint(k, "v", ne), false, true},
		{"6 empty operator means Equal", tol(k, "", "v", ne), taint(k, "v", ne), false, true},
		{"6 Equal with empty value matches empty value", tol(k, "Equal", "", ne), taint(k, "", ne), false, true},
		{"7 Equal, value differs", tol(k, "Equal", "v", ne), taint(k, "w", ne), false, false},
		{"7 Equal with empty value does not match a value", tol(k, "Equal", "", ne), taint(k, "v", ne), false, false},
		{"7 empty operator, value differs", tol(k, "", "v", ne), taint(k, "", ne), false, false},
		// Upstream quirk, kept: an empty key passes the key check with any
		// operator (validation refuses it at the edge).
		{"upstream: empty key Equal empty value", tol("", "Equal", "", ne), taint(k, "", ne), false, true},
		{"8 Gt gate off", tol(k, "Gt", "5", ne), taint(k, "10", ne), false, false},
		{"8 Gt greater", tol(k, "Gt", "5", ne), taint(k, "10", ne), true, true},
		{"8 Gt equal", tol(k, "Gt", "5", ne), taint(k, "5", ne), true, false},
		{"8 Gt smaller", tol(k, "Gt", "5", ne), taint(k, "4", ne), true, false},
		{"8 Gt negative numbers", tol(k, "Gt", "-5", ne), taint(k, "-4", ne), true, true},
		{"8 Gt leading zero in taint", tol(k, "Gt", "5", ne), taint(k, "010", ne), true, false},
		{"8 Gt plus sign", tol(k, "Gt", "5", ne), taint(k, "+10", ne), true, false},
		{"8 Gt float", tol(k, "Gt", "5", ne), taint(k, "10.0", ne), true, false},
		{"8 Gt empty taint value", tol(k, "Gt", "5", ne), taint(k, "", ne), true, false},
		{"8 Gt non-integer toleration value", tol(k, "Gt", "five", ne), taint(k, "10", ne), true, false},
		{"8 Gt -0", tol(k, "Gt", "-0", ne), taint(k, "10", ne), true, false},
		{"8 Gt overflow", tol(k, "Gt", "5", ne), taint(k, "99999999999999999999", ne), true, false},
		{"8 Gt zero is an integer", tol(k, "Gt", "0", ne), taint(k, "1", ne), true, true},
		{"9 Lt gate off", tol(k, "Lt", "10", ne), taint(k, "5", ne), false, false},
		{"9 Lt smaller", tol(k, "Lt", "10", ne), taint(k, "5", ne), true, true},
		{"9 Lt equal", tol(k, "Lt", "10", ne), taint(k, "10", ne), true, false},
		{"9 Lt greater", tol(k, "Lt", "10", ne), taint(k, "11", ne), true, false},
		{"9 Lt leading zero", tol(k, "Lt", "10", ne), taint(k, "05", ne), true, false},
		{"10 unknown operator", tol(k, "In", "v", ne), taint(k, "v", ne), true, false},
		{"10 lower-case operator", tol(k, "exists", "", ne), taint(k, "", ne), true, false},
	}
	for _, c := range cases {
		got := Matcher{ComparisonOperators: c.gate}.ToleratesTaint(c.tol, c.taint)
		if got != c.want {
			t.Errorf("row %s: tolerates = %v, want %v", c.row, got, c.want)
		}
		if !c.gate && ToleratesTaint(c.tol, c.taint) != got {
			t.Errorf("row %s: package ToleratesTaint differs from Matcher{}", c.row)
		}
	}
}

func TestMatchingAndMinSeconds(t *testing.T) {
	unreach := &nodev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: "NoExecute"}
	custom := &nodev1.Taint{Key: "example.com/maint", Value: "x", Effect: "NoExecute"}
	tols := []*nodev1.Toleration{
		{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(300)},
		{Operator: "Exists", TolerationSeconds: secs(30)}, // would match both, but is not first for unreachable
		{Key: "example.com/maint", Value: "x", Effect: "NoExecute", TolerationSeconds: secs(600)},
	}
	m, bad, ok := Matcher{}.MatchingTolerations([]*nodev1.Taint{unreach, custom}, tols)
	if !ok || bad != nil || len(m) != 2 || m[0] != tols[0] || m[1] != tols[1] {
		t.Fatalf("matching = %v %v %v", m, bad, ok)
	}
	if got := MinTolerationSeconds(m); got != 30 {
		t.Errorf("min = %d, want 30 (first match per taint, then the minimum)", got)
	}
	if _, bad, ok := (Matcher{}).MatchingTolerations([]*nodev1.Taint{unreach, {Key: "other", Effect: "NoExecute"}}, tols[:1]); ok || bad.GetKey() != "other" {
		t.Errorf("untolerated taint not reported: %v %v", bad, ok)
	}
	for _, c := range []struct {
		tols []*nodev1.Toleration
		want int64
	}{
		{nil, -1},
		{[]*nodev1.Toleration{{Key: "a"}}, -1},
		{[]*nodev1.Toleration{{Key: "a", TolerationSeconds: secs(60)}, {Key: "b"}}, 60},
		{[]*nodev1.Toleration{{Key: "a", TolerationSeconds: secs(60)}, {Key: "b", TolerationSeconds: secs(0)}}, 0},
		{[]*nodev1.Toleration{{Key: "a", TolerationSeconds: secs(-5)}, {Key: "b", TolerationSeconds: secs(60)}}, 0},
	} {
		if got := MinTolerationSeconds(c.tols); got != c.want {
			t.Errorf("MinTolerationSeconds(%v) = %d, want %d", c.tols, got, c.want)
		}
	}
}
