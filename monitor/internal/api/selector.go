// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Selector is a parsed Kubernetes label selector (k8s.io/apimachinery's
// labels package, the one kubectl and the API server use). The zero
// Selector matches everything.
type Selector struct{ s labels.Selector }

// Matches reports whether m satisfies every requirement.
func (s Selector) Matches(m map[string]string) bool {
	return s.s == nil || s.s.Matches(labels.Set(m))
}

// ParseSelector parses Kubernetes label selector syntax: "k=v", "k==v",
// "k!=v", "k in (a,b)", "k notin (a,b)", "k", "!k", "k>1", "k<1",
// comma-separated; keys and values are checked as the API server checks
// them. field names the request field in errors, which become
// InvalidArgument through validation.Status.
func ParseSelector(field, s string) (Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return Selector{}, &validation.FieldError{Field: field, Reason: fmt.Sprintf("%q is not a label selector: %v", s, err)}
	}
	return Selector{s: sel}, nil
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
