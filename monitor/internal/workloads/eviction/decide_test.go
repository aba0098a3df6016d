// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

var (
	t0          = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	unreachable = &nodev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: "NoExecute", TimeAdded: nil}
	notReady    = &nodev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: "NoExecute"}
)

func defaults(notReadySecs, unreachableSecs int64) []*nodev1.Toleration {
	return []*nodev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(notReadySecs)},
		{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(unreachableSecs)},
	}
}

func TestDecide(t *testing.T) {
	m := Matcher{}
	prev := &Scheduled{UID: "u1", Node: "n1", Created: t0, FireAt: t0.Add(300 * time.Second), Seconds: 300}
	later := t0.Add(100 * time.Second)
	forever := []*nodev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute"}}
	cases := []struct {
		name   string
		now    time.Time
		uid    string
		taints []*nodev1.Taint
		tols   []*nodev1.Toleration
		prev   *Scheduled
		want   Action
		fireAt time.Time
	}{
		{"no taint, nothing scheduled", t0, "u1", nil, defaults(300, 300), nil, Nothing, time.Time{}},
		{"1: taints gone cancel", later, "u1", nil, defaults(300, 300), prev, Cancel, time.Time{}},
		{"2: not tolerated deletes now", t0, "u1", []*nodev1.Taint{unreachable}, nil, nil, DeleteNow, t0},
		{"2: not tolerated deletes now even when scheduled", later, "u1", []*nodev1.Taint{unreachable}, nil, prev, DeleteNow, later},
		{"2: one of two taints untolerated", t0, "u1", []*nodev1.Taint{unreachable, {Key: "x", Effect: "NoExecute"}}, defaults(300, 300), nil, DeleteNow, t0},
		{"3: tolerated for ever", t0, "u1", []*nodev1.Taint{unreachable}, forever, nil, Nothing, time.Time{}},
		{"3: tolerated for ever now cancels", later, "u1", []*nodev1.Taint{unreachable}, forever, prev, Cancel, time.Time{}},
		{"3: 0 seconds deletes now", t0, "u1", []*nodev1.Taint{unreachable}, defaults(300, 0), nil, DeleteNow, t0},
		{"3: negative seconds deletes now", t0, "u1", []*nodev1.Taint{unreachable}, defaults(300, -3), nil, DeleteNow, t0},
		{"4: schedule at now+300", t0, "u1", []*nodev1.Taint{unreachable}, defaults(300, 300), nil, Schedule, t0.Add(300 * time.Second)},
		{"4: schedule at now+60", t0, "u1", []*nodev1.Taint{unreachable}, defaults(300, 60), nil, Schedule, t0.Add(60 * time.Second)},
		{"4: existing kept when seconds shrink", later, "u1", []*nodev1.Taint{unreachable}, defaults(300, 10), prev, Keep, prev.FireAt},
		{"4: existing kept when seconds grow", later, "u1", []*nodev1.Taint{unreachable}, defaults(300, 3000), prev, Keep, prev.FireAt},
		{"4: existing kept when seconds drop to 0", later, "u1", []*nodev1.Taint{unreachable}, defaults(300, 0), prev, Keep, prev.FireAt},
		{"4: existing kept across a taint swap", later, "u1", []*nodev1.Taint{notReady}, defaults(300, 300), prev, Keep, prev.FireAt},
		{"4: same-instant schedule is replaced", t0, "u1", []*nodev1.Taint{unreachable}, defaults(300, 60), prev, Schedule, t0.Add(60 * time.Second)},
		{"another pod of the same name starts afresh", later, "u2", []*nodev1.Taint{unreachable}, defaults(300, 300), prev, Schedule, later.Add(300 * time.Second)},
		{"two taints: minimum of the first matches", t0, "u1", []*nodev1.Taint{unreachable, notReady}, defaults(30, 300), nil, Schedule, t0.Add(30 * time.Second)},
	}
	for _, c := range cases {
		d := m.Decide(c.now, c.uid, "n1", c.taints, c.tols, c.prev)
		if d.Action != c.want {
			t.Errorf("%s: action %s, want %s (%s)", c.name, d.Action, c.want, d.Why)
			continue
		}
		if !c.fireAt.IsZero() && !d.Next.FireAt.Equal(c.fireAt) {
			t.Errorf("%s: fire at %s, want %s", c.name, d.Next.FireAt, c.fireAt)
		}
		if d.Why == "" {
			t.Errorf("%s: no reason given", c.name)
		}
	}
}
