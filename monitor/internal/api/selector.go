// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"fmt"
	"slices"
	"strings"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Requirement is one term of a label selector.
type Requirement struct {
	Key    string
	Op     string // "=", "!=", "in", "notin", "exists", "!"
	Values []string
}

// Selector is a conjunction of requirements (Kubernetes label selector).
type Selector []Requirement

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.Key]
		switch r.Op {
		case "=":
			if !ok || v != r.Values[0] {
				return false
			}
		case "!=":
			if ok && v == r.Values[0] {
				return false
			}
		case "in":
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case "notin":
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!":
			if ok {
				return false
			}
		}
	}
	return true
}

// ParseSelector parses Kubernetes label selector syntax: "k=v", "k==v",
// "k!=v", "k in (a,b)", "k notin (a,b)", "k", "!k", comma-separated. field
// names the request field in errors.
func ParseSelector(field, s string) (Selector, error) {
	var out Selector
	terms, err := splitTerms(s)
	if err != nil {
		return nil, &validation.FieldError{Field: field, Reason: err.Error()}
	}
	for _, t := range terms {
		r, err := parseTerm(t)
		if err != nil {
			return nil, &validation.FieldError{Field: field, Reason: fmt.Sprintf("term %q: %v", t, err)}
		}
		if fe := validation.QualifiedName(field, r.Key); fe != nil {
			return nil, &validation.FieldError{Field: field, Reason: fmt.Sprintf("term %q: key %s", t, fe.Reason)}
		}
		for _, v := range r.Values {
			if fe := validation.LabelValue(field, v); fe != nil {
				return nil, &validation.FieldError{Field: field, Reason: fmt.Sprintf("term %q: value %s", t, fe.Reason)}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// splitTerms splits on commas outside parentheses.
func splitTerms(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i, ch := range s {
		switch ch {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ')' at %d", i)
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced '('")
	}
	out = append(out, s[start:])
	terms := out[:0]
	for _, t := range out {
		if t = strings.TrimSpace(t); t != "" {
			terms = append(terms, t)
		}
	}
	return terms, nil
}

func parseTerm(t string) (Requirement, error) {
	if strings.HasPrefix(t, "!") && !strings.ContainsAny(t, "=()") {
		return Requirement{Key: strings.TrimSpace(t[1:]), Op: "!"}, nil
	}
	if i := strings.Index(t, "!="); i >= 0 {
		return Requirement{Key: strings.TrimSpace(t[:i]), Op: "!=", Values: []string{strings.TrimSpace(t[i+2:])}}, nil
	}
	if i := strings.Index(t, "=="); i >= 0 {
		return Requirement{Key: strings.TrimSpace(t[:i]), Op: "=", Values: []string{strings.TrimSpace(t[i+2:])}}, nil
	}
	if i := strings.Index(t, "="); i >= 0 {
		return Requirement{Key: strings.TrimSpace(t[:i]), Op: "=", Values: []string{strings.TrimSpace(t[i+1:])}}, nil
	}
	if i := strings.IndexByte(t, '('); i >= 0 {
		if !strings.HasSuffix(t, ")") {
			return Requirement{}, fmt.Errorf("set must end with ')'")
		}
		head := strings.Fields(t[:i])
		if len(head) != 2 || (head[1] != "in" && head[1] != "notin") {
			return Requirement{}, fmt.Errorf("want 'key in (v1,v2)' or 'key notin (v1,v2)'")
		}
		var vals []string
		for _, v := range strings.Split(t[i+1:len(t)-1], ",") {
			vals = append(vals, strings.TrimSpace(v))
		}
		return Requirement{Key: head[0], Op: head[1], Values: vals}, nil
	}
	if strings.ContainsAny(t, " \t") {
		return Requirement{}, fmt.Errorf("unexpected space")
	}
	return Requirement{Key: t, Op: "exists"}, nil
}

// CondTerm is one term of a condition selector.
type CondTerm struct {
	Type, Status string
	Not          bool
}

var condStatuses = []string{nodemodel.True, nodemodel.False, nodemodel.Unknown}

// ParseConditionSelector parses "Ready=Unknown,MemoryPressure!=True".
func ParseConditionSelector(field, s string) ([]CondTerm, error) {
	var out []CondTerm
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		var ct CondTerm
		var typ, st string
		if i := strings.Index(t, "!="); i >= 0 {
			typ, st, ct.Not = t[:i], t[i+2:], true
		} else if i := strings.Index(t, "=="); i >= 0 {
			typ, st = t[:i], t[i+2:]
		} else if i := strings.Index(t, "="); i >= 0 {
			typ, st = t[:i], t[i+1:]
		} else {
			return nil, &validation.FieldError{Field: field, Reason: fmt.Sprintf("term %q: want Type=Status or Type!=Status", t)}
		}
		ct.Type, ct.Status = strings.TrimSpace(typ), strings.TrimSpace(st)
		if ct.Type == "" {
			return nil, &validation.FieldError{Field: field, Reason: fmt.Sprintf("term %q: empty condition type", t)}
		}
		if !slices.Contains(condStatuses, ct.Status) {
			return nil, &validation.FieldError{Field: field, Reason: fmt.Sprintf("term %q: status must be True, False or Unknown", t)}
		}
		out = append(out, ct)
	}
	return out, nil
}

func conditionsMatch(terms []CondTerm, n *nodev1.Node) bool {
	for _, t := range terms {
		st := nodemodel.ConditionStatus(n.GetStatus().GetConditions(), t.Type)
		if (st == t.Status) == t.Not {
			return false
		}
	}
	return true
}
