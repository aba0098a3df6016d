// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/services/validation"
)

// TestParseSelectorNamesField: a refused selector is InvalidArgument whose
// message starts with the request field, whatever the library's words.
func TestParseSelectorNamesField(t *testing.T) {
	for _, s := range []string{"a in (x", "k=-bad-", "bad key=1", "example.com/=v", "k=" + strings.Repeat("v", 64)} {
		_, err := ParseSelector("podSelector", s)
		st, _ := status.FromError(validation.Status(err))
		if err == nil || st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "podSelector: ") {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	l := map[string]string{"app": "web", "tier": "front", "n": "3"}
	for s, want := range map[string]bool{
		"":                        true,
		"app=web":                 true,
		"app==web,tier!=back":     true,
		"tier in (front, back)":   true,
		"tier notin (front)":      false,
		"app,!gone":               true,
		"!app":                    false,
		"n>2,n<4":                 true,
		"missing!=x":              true,
		"missing in (x)":          false,
		" app = web , tier=front": true,
	} {
		sel, err := ParseSelector("labelSelector", s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := sel.Matches(l); got != want {
			t.Errorf("%q matches %v = %v, want %v", s, l, got, want)
		}
	}
	if !(Selector{}).Matches(l) {
		t.Error("the zero Selector must match everything")
	}
}
