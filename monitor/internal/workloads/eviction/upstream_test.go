// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"math/rand/v2"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// The matcher is kept, not replaced by corev1.Toleration.ToleratesTaint:
// calling the library needs our model converted per check, which measured
// 2.5x the time of the matcher (both allocation-free) on the owners' and
// evictor's per-node loops; see docs/adr/0024-field-libraries.md. The
// library stays the reference: both must agree on every input.

func upstreamTolerates(tol *nodev1.Toleration, taint *nodev1.Taint, gate bool) bool {
	t := corev1.Toleration{Key: tol.GetKey(), Operator: corev1.TolerationOperator(tol.GetOperator()), Value: tol.GetValue(), Effect: corev1.TaintEffect(tol.GetEffect())}
	n := corev1.Taint{Key: taint.GetKey(), Value: taint.GetValue(), Effect: corev1.TaintEffect(taint.GetEffect())}
	return t.ToleratesTaint(logr.Discard(), &n, gate)
}

// TestToleratesTaintAgreesWithUpstream compares the matcher with k8s.io/api
// on random tolerations and taints over small alphabets that hit every
// branch: empty and differing keys and effects, each operator (and an
// unknown one), and numeric values in and out of canonical form for Lt/Gt,
// with the comparison-operator gate on and off.
func TestToleratesTaintAgreesWithUpstream(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(v ...string) string { return v[r.IntN(len(v))] }
	keys := []string{"", "k", "other", "node.kubernetes.io/unreachable"}
	values := []string{"", "v", "7", "007", "-0", "+7", "-3", "12", "9223372036854775808", "1e3", " 7"}
	effects := []string{"", "NoSchedule", "PreferNoSchedule", "NoExecute"}
	ops := []string{"", OpEqual, OpExists, OpLt, OpGt, "In"}
	for i := range 200_000 {
		tol := &nodev1.Toleration{Key: pick(keys...), Operator: pick(ops...), Value: pick(values...), Effect: pick(effects...)}
		taint := &nodev1.Taint{Key: pick(keys...), Value: pick(values...), Effect: pick(effects...)}
		gate := i%2 == 0
		if got, want := (Matcher{ComparisonOperators: gate}).ToleratesTaint(tol, taint), upstreamTolerates(tol, taint, gate); got != want {
			t.Fatalf("gate %v: %v vs %v: matcher says %v, k8s.io/api says %v", gate, tol, taint, got, want)
		}
	}
}

var benchTolerations = []*nodev1.Toleration{
	{Key: "node.kubernetes.io/not-ready", Operator: OpExists, Effect: "NoExecute"},
	{Key: "example.com/gpu", Operator: OpEqual, Value: "a100", Effect: "NoSchedule"},
	{Key: "node.kubernetes.io/unreachable", Operator: OpExists, Effect: "NoExecute"},
}

var benchTaint = &nodev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: "NoExecute"}

// BenchmarkToleratesTaint: the matcher against the library with the
// conversion a call needs (docs/adr/0024-field-libraries.md).
// Run: go test -run '^$' -bench ToleratesTaint -benchmem ./internal/workloads/eviction
func BenchmarkToleratesTaint(b *testing.B) {
	b.Run("matcher", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, t := range benchTolerations {
				_ = Matcher{}.ToleratesTaint(t, benchTaint)
			}
		}
	})
	b.Run("k8s.io-api", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, t := range benchTolerations {
				_ = upstreamTolerates(t, benchTaint, false)
			}
		}
	})
}
