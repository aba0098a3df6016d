// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"strconv"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Toleration operators (spec §2.3); an empty operator means Equal.
const (
	OpEqual  = "Equal"
	OpExists = "Exists"
	OpLt     = "Lt"
	OpGt     = "Gt"
)

// Matcher decides whether tolerations tolerate taints (spec §9).
type Matcher struct {
	// ComparisonOperators is the Kubernetes alpha gate
	// TaintTolerationComparisonOperators (v1.35+): with it off (the default,
	// as upstream) Lt and Gt tolerate nothing.
	ComparisonOperators bool
}

// ToleratesTaint is Matcher{}.ToleratesTaint: the default, gate off.
func ToleratesTaint(tol *nodev1.Toleration, taint *nodev1.Taint) bool {
	return Matcher{}.ToleratesTaint(tol, taint)
}

// ToleratesTaint applies the checks of spec §9 in order; the first failing
// check means "not tolerated". It is upstream's Toleration.ToleratesTaint:
// note that an empty key passes the key check with any operator, so an
// Equal toleration with empty key and value matches every taint with an
// empty value. Validation refuses such tolerations at the API edge
// (services/validation), but stored data is matched as Kubernetes would.
func (m Matcher) ToleratesTaint(tol *nodev1.Toleration, taint *nodev1.Taint) bool {
	if e := tol.GetEffect(); e != "" && e != taint.GetEffect() {
		return false
	}
	if k := tol.GetKey(); k != "" && k != taint.GetKey() {
		return false
	}
	switch tol.GetOperator() {
	case "", OpEqual:
		return tol.GetValue() == taint.GetValue()
	case OpExists:
		return true
	case OpLt, OpGt:
		if !m.ComparisonOperators {
			return false
		}
		tv, ok1 := parseStrictInt(tol.GetValue())
		nv, ok2 := parseStrictInt(taint.GetValue())
		if !ok1 || !ok2 {
			return false
		}
		if tol.GetOperator() == OpGt {
			return nv > tv
		}
		return nv < tv
	}
	return false
}

// parseStrictInt accepts an int64 in canonical decimal form only: no sign
// "+", no leading zero, no "-0", no fraction or exponent, not empty. Values
// such as "007" would otherwise compare equal to "7" and surprise people.
func parseStrictInt(s string) (int64, bool) {
	if s == "" || s[0] == '+' || (len(s) > 1 && s[0] == '0') || (len(s) > 1 && s[:2] == "-0") {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// TolerationsTolerateTaint reports whether any toleration tolerates taint.
func (m Matcher) TolerationsTolerateTaint(tols []*nodev1.Toleration, taint *nodev1.Taint) bool {
	for _, t := range tols {
		if m.ToleratesTaint(t, taint) {
			return true
		}
	}
	return false
}

// MatchingTolerations returns, per taint, the first toleration (in pod
// order) that tolerates it. ok is false, with the first untolerated taint,
// when some taint has none (upstream getMatchingTolerations).
func (m Matcher) MatchingTolerations(taints []*nodev1.Taint, tols []*nodev1.Toleration) (matched []*nodev1.Toleration, untolerated *nodev1.Taint, ok bool) {
	matched = make([]*nodev1.Toleration, 0, len(taints))
	for _, taint := range taints {
		found := false
		for _, t := range tols {
			if m.ToleratesTaint(t, taint) {
				matched = append(matched, t)
				found = true
				break
			}
		}
		if !found {
			return nil, taint, false
		}
	}
	return matched, nil, true
}

// MinTolerationSeconds is the smallest tolerationSeconds among tols: 0 when
// any is set to ≤ 0 (evict at once), -1 when none is set (tolerated for
// ever), as upstream getMinTolerationTime.
func MinTolerationSeconds(tols []*nodev1.Toleration) int64 {
	min := int64(-1)
	for _, t := range tols {
		if t.TolerationSeconds == nil {
			continue
		}
		s := t.GetTolerationSeconds()
		if s <= 0 {
			return 0
		}
		if min < 0 || s < min {
			min = s
		}
	}
	return min
}

// NoExecuteTaints returns the NoExecute taints of a node: the only ones the
// evictor acts on.
func NoExecuteTaints(taints []*nodev1.Taint) []*nodev1.Taint {
	var out []*nodev1.Taint
	for _, t := range taints {
		if t.GetEffect() == nodemodel.NoExecute {
			out = append(out, t)
		}
	}
	return out
}
