// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package patch

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestKubectlPatches(t *testing.T) {
	orig := `{"metadata":{"name":"n","labels":{"a":"1"}},"spec":{"taints":[{"key":"x","effect":"NoSchedule"},{"key":"y","effect":"NoExecute"}]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
	for _, c := range []struct{ ctype, body, want string }{
		// taint: the whole list replaces (spec.taints has no merge key).
		{Strategic, `{"spec":{"taints":[{"key":"z","effect":"NoSchedule"}]}}`,
			`{"metadata":{"labels":{"a":"1"},"name":"n"},"spec":{"taints":[{"effect":"NoSchedule","key":"z"}]},"status":{"conditions":[{"status":"True","type":"Ready"}]}}`},
		// uncordon sends null.
		{Strategic, `{"spec":{"unschedulable":null,"taints":null}}`,
			`{"metadata":{"labels":{"a":"1"},"name":"n"},"spec":{},"status":{"conditions":[{"status":"True","type":"Ready"}]}}`},
		// label: merge patch, null removes.
		{Merge + "; charset=utf-8", `{"metadata":{"labels":{"a":null,"b":"2"}}}`,
			`{"metadata":{"labels":{"b":"2"},"name":"n"},"spec":{"taints":[{"effect":"NoSchedule","key":"x"},{"effect":"NoExecute","key":"y"}]},"status":{"conditions":[{"status":"True","type":"Ready"}]}}`},
		{JSON, `[{"op":"remove","path":"/spec/taints/0"}]`,
			`{"metadata":{"labels":{"a":"1"},"name":"n"},"spec":{"taints":[{"effect":"NoExecute","key":"y"}]},"status":{"conditions":[{"status":"True","type":"Ready"}]}}`},
	} {
		got, err := Apply(c.ctype, []byte(orig), []byte(c.body), corev1.Node{})
		if err != nil {
			t.Fatalf("%s: %v", c.ctype, err)
		}
		if !jsonEqual(t, got, c.want) {
			t.Errorf("%s %s:\n got %s\nwant %s", c.ctype, c.body, got, c.want)
		}
	}
	if _, err := Apply(ServerSideApply, []byte(orig), []byte("{}"), corev1.Node{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("apply patch: %v", err)
	}
}
