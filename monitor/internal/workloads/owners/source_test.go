// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package owners

import (
	"context"
	"testing"
	"testing/synctest"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

func TestMatches(t *testing.T) {
	l := map[string]string{"app": "web", "tier": "front"}
	for _, tc := range []struct {
		name string
		sel  *nodev1.LabelSelector
		want bool
	}{
		{"nil selects nothing", nil, false},
		{"empty selects all", &nodev1.LabelSelector{}, true},
		{"labels", &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
		{"labels differ", &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, false},
		{"In", &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "In", Values: []string{"front", "back"}}}}, true},
		{"NotIn", &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"front"}}}}, false},
		{"NotIn absent", &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "x", Operator: "NotIn", Values: []string{"a"}}}}, true},
		{"Exists", &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "app", Operator: "Exists"}}}, true},
		{"DoesNotExist", &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "app", Operator: "DoesNotExist"}}}, false},
		{"unknown operator", &nodev1.LabelSelector{MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "app", Operator: "Gt"}}}, false},
	} {
		if got := Matches(tc.sel, l); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSourcesAgree: the store and the cache list the same owners, and the
// status written is read back as Stored.
func TestSourcesAgree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := newWorld(t, ctx)
		w.workloads()
		ss := StoreSource{Store: w.store}
		cs := CacheSource{Cache: w.cache, StoreSource: ss}
		a, err := ss.Owners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cs.Owners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != 3 || len(b) != 3 {
			t.Fatalf("%d and %d owners, want 3", len(a), len(b))
		}
		for i := range a {
			if a[i].Kind != b[i].Kind || a[i].Name != b[i].Name || a[i].Namespace != b[i].Namespace || a[i].UID != b[i].UID || a[i].Replicas != b[i].Replicas || a[i].Parallel != b[i].Parallel {
				t.Errorf("owner %d: store %+v, cache %+v", i, a[i], b[i])
			}
		}
		st := Status{ObservedGeneration: 1, Replicas: 3, Ready: 2, Terminating: 1}
		if err := ss.SetStatus(ctx, nil, a[0], st); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b, _ = cs.Owners(ctx)
		if b[0].Kind != KindReplicaSet || b[0].Stored == nil || *b[0].Stored != st {
			t.Fatalf("stored status read back %+v (%s)", b[0].Stored, b[0].Kind)
		}
	})
}
