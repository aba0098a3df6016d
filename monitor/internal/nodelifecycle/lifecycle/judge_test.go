// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"maps"
	"slices"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Health.Equal compares what a record says (overrides, taints, recovery
// time), not who wrote it when; no record equals an empty one.
func TestHealthEqual(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	unknown := func() *nodev1.NodeCondition {
		return &nodev1.NodeCondition{Type: nodemodel.Ready, Status: nodemodel.Unknown, Reason: nodemodel.ReasonNodeStatusUnknown}
	}
	taint := func(effect string) *nodev1.Taint {
		return &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: effect}
	}
	full := func() *nodev1.NodeHealth {
		return &nodev1.NodeHealth{NodeName: "n", ConditionOverrides: []*nodev1.NodeCondition{unknown()},
			Taints: []*nodev1.Taint{taint(nodemodel.NoSchedule)}, RecoveryTime: nodemodel.Timestamp(t0)}
	}
	for _, c := range []struct {
		name string
		a, b *nodev1.NodeHealth
		want bool
	}{
		{"empty and none", &nodev1.NodeHealth{NodeName: "n"}, nil, true},
		{"something and none", full(), nil, false},
		{"equal values, other objects", full(), full(), true},
		{"writer and time differ", func() *nodev1.NodeHealth {
			h := full()
			h.Leader, h.UpdateTime = "b", nodemodel.Timestamp(t0.Add(time.Hour))
			return h
		}(), full(), true},
		{"one more taint", func() *nodev1.NodeHealth {
			h := full()
			h.Taints = append(h.Taints, taint(nodemodel.NoExecute))
			return h
		}(), full(), false},
		{"another override", func() *nodev1.NodeHealth {
			h := full()
			h.ConditionOverrides[0].Reason = nodemodel.ReasonNodeStatusNeverUpdated
			return h
		}(), full(), false},
		{"no recovery time", func() *nodev1.NodeHealth {
			h := full()
			h.RecoveryTime = nil
			return h
		}(), full(), false},
	} {
		if got := HealthOf(c.a).Equal(c.b); got != c.want {
			t.Errorf("%s: Equal = %v, want %v", c.name, got, c.want)
		}
	}
}

// judgeNode is one node for the judge table: its stored parts, what was
// heard of it, and its record, as the controller would gather them.
type judgeNode struct {
	status    *nodev1.NodeStatus
	health    *nodev1.NodeHealth
	user      []*nodev1.Taint
	heartbeat liveness.Heartbeat
	rec       Record
	fresh     bool
	podRetry  bool
}

func (n judgeNode) input() *JudgeInput {
	meta := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1", Uid: "n1-uid", CreationTimestamp: nodemodel.Timestamp(t0.Add(-time.Hour))},
		Spec: &nodev1.NodeSpec{Taints: n.user}}
	return &JudgeInput{Name: "n1", Meta: meta, Status: n.status, Health: n.health, Node: nodemodel.Merge(meta, n.status, n.health),
		Heartbeat: n.heartbeat, Record: n.rec, New: n.fresh, PodRetry: n.podRetry}
}

// judged is n after a first judgement at t0 (the baseline every later
// pass compares with), its stored record updated as the controller would.
func judged(n judgeNode) judgeNode {
	d := Judge(DefaultConfig(), t0, n.input())
	n.rec = d.Record
	if d.Write {
		n.health = &nodev1.NodeHealth{NodeName: "n1", ConditionOverrides: d.Health.Overrides, Taints: d.Health.Taints, RecoveryTime: d.Health.RecoveryTime}
	}
	return n
}

func noSchedule(key string) *nodev1.Taint {
	return &nodev1.Taint{Key: key, Effect: nodemodel.NoSchedule}
}

func taintKeys(ts []*nodev1.Taint) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		out[t.GetKey()+":"+t.GetEffect()] = true
	}
	return out
}

// TestJudge drives the pure judge through spec §6.2-§6.5, one node and one
// pass per case, with no cache, store or goroutine.
func TestJudge(t *testing.T) {
	cfg := DefaultConfig()
	past := t0.Add(cfg.GracePeriod + time.Second)
	withCond := func(typ, status string) *nodev1.NodeStatus {
		st := reported(nodemodel.True, t0)
		nodemodel.FindCondition(st.Conditions, typ).Status = status
		return st
	}
	unknownHealth := func(taints ...*nodev1.Taint) *nodev1.NodeHealth {
		st := reported(nodemodel.True, t0)
		overrides, _ := markUnknown(t0, nodemodel.Merge(&nodev1.Node{}, st, nil), nil, time.Time{})
		return &nodev1.NodeHealth{NodeName: "n1", ConditionOverrides: overrides, Taints: taints}
	}
	for _, tc := range []struct {
		name string
		node judgeNode
		now  time.Time
		// want: Ready after the pass, the controller taints after it, the
		// queue and pod actions, the events' reasons, whether to write.
		ready  string
		taints []string
		queue  QueueAction
		pods   PodAction
		events []string
		write  bool
		check  func(t *testing.T, d Decision)
	}{
		{name: "within grace: nothing changes", node: judged(judgeNode{status: reported(nodemodel.True, t0)}), now: t0.Add(cfg.GracePeriod),
			ready: nodemodel.True, queue: QueueRemove, pods: PodsForget},
		{name: "past grace: Unknown with the exact reason and message, NoSchedule at once", node: judged(judgeNode{status: reported(nodemodel.True, t0)}), now: past,
			ready: nodemodel.Unknown, taints: []string{"node.kubernetes.io/unreachable:NoSchedule"},
			// NoExecute trails by one pass: decided from Ready as read (True).
			queue: QueueRemove, pods: PodsMark, events: []string{"NodeNotReady"}, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.Result.Marked {
					t.Error("not Marked")
				}
				for _, typ := range nodemodel.ReporterConditions {
					c := nodemodel.FindCondition(d.Health.Overrides, typ)
					if c.GetStatus() != nodemodel.Unknown || c.GetReason() != "NodeStatusUnknown" || c.GetMessage() != "Kubelet stopped posting node status." {
						t.Errorf("%s override = %v", typ, c)
					}
				}
				if nodemodel.FindCondition(d.Health.Overrides, nodemodel.NetworkUnavailable) != nil {
					t.Error("NetworkUnavailable overridden")
				}
			}},
		{name: "a lease renewal keeps it Ready past the status's grace", node: func() judgeNode {
			n := judged(judgeNode{status: reported(nodemodel.True, t0), heartbeat: liveness.Heartbeat{LeaseRenew: t0}})
			n.heartbeat.LeaseRenew = t0.Add(30 * time.Second) // reporter clock: only compared with itself
			return n
		}(), now: past, ready: nodemodel.True, queue: QueueRemove, pods: PodsForget,
			check: func(t *testing.T, d Decision) {
				if !d.LeaseAdvanced || !d.Record.Probe.Equal(past) {
					t.Errorf("lease not heard: advanced=%v probe=%v", d.LeaseAdvanced, d.Record.Probe)
				}
			}},
		{name: "held (feed stale): not judged past grace", node: judged(judgeNode{status: reported(nodemodel.True, t0), heartbeat: liveness.Heartbeat{Held: true}}),
			now: past.Add(time.Hour), ready: nodemodel.True, queue: QueueRemove, pods: PodsForget},
		{name: "startup grace: no Ready, within 60s of creation", node: judgeNode{status: &nodev1.NodeStatus{}}, now: t0.Add(-time.Hour + cfg.StartupGracePeriod),
			pods: PodsKeep},
		{name: "startup grace: no Ready past it: NeverUpdated", node: judgeNode{status: &nodev1.NodeStatus{}}, now: t0.Add(-time.Hour + cfg.StartupGracePeriod + time.Millisecond),
			// Ready as read is the synthetic Unknown: queued for NoExecute.
			ready: nodemodel.Unknown, taints: []string{"node.kubernetes.io/unreachable:NoSchedule"}, queue: QueueForgetAndAdd, pods: PodsForget, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Result.Grace != cfg.StartupGracePeriod {
					t.Errorf("grace %s", d.Result.Grace)
				}
				for _, typ := range nodemodel.ReporterConditions {
					c := nodemodel.FindCondition(d.Health.Overrides, typ)
					if c.GetReason() != "NodeStatusNeverUpdated" || c.GetMessage() != "Kubelet never posted node status." {
						t.Errorf("%s override = %v", typ, c)
					}
				}
			}},
		{name: "Ready=False: not-ready NoSchedule, queued for NoExecute", node: judgeNode{status: reported(nodemodel.False, t0)}, now: t0,
			ready: nodemodel.False, taints: []string{"node.kubernetes.io/not-ready:NoSchedule"}, queue: QueueForgetAndAdd, pods: PodsForget, write: true},
		{name: "Ready=False with unreachable NoExecute: swapped at once", node: judgeNode{status: reported(nodemodel.False, t0),
			health: &nodev1.NodeHealth{Taints: []*nodev1.Taint{noSchedule(nodemodel.TaintNotReady), UnreachableNoExecute}}}, now: t0,
			ready: nodemodel.False, taints: []string{"node.kubernetes.io/not-ready:NoSchedule", "node.kubernetes.io/not-ready:NoExecute"}, pods: PodsForget, write: true},
		{name: "Ready=Unknown as read: unreachable NoSchedule kept, queued", node: judgeNode{status: reported(nodemodel.True, t0),
			health: unknownHealth(noSchedule(nodemodel.TaintUnreachable))}, now: t0,
			ready: nodemodel.Unknown, taints: []string{"node.kubernetes.io/unreachable:NoSchedule"}, queue: QueueForgetAndAdd, pods: PodsForget},
		{name: "Ready=Unknown with its NoExecute taint: queued, not forgotten", node: judgeNode{status: reported(nodemodel.True, t0),
			health: unknownHealth(noSchedule(nodemodel.TaintUnreachable), UnreachableNoExecute)}, now: t0,
			ready: nodemodel.Unknown, taints: []string{"node.kubernetes.io/unreachable:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"}, queue: QueueAdd, pods: PodsForget},
		{name: "MemoryPressure", node: judgeNode{status: withCond(nodemodel.MemoryPressure, nodemodel.True)}, now: t0,
			ready: nodemodel.True, taints: []string{"node.kubernetes.io/memory-pressure:NoSchedule"}, queue: QueueRemove, pods: PodsForget, write: true},
		{name: "DiskPressure", node: judgeNode{status: withCond(nodemodel.DiskPressure, nodemodel.True)}, now: t0,
			ready: nodemodel.True, taints: []string{"node.kubernetes.io/disk-pressure:NoSchedule"}, queue: QueueRemove, pods: PodsForget, write: true},
		{name: "PIDPressure", node: judgeNode{status: withCond(nodemodel.PIDPressure, nodemodel.True)}, now: t0,
			ready: nodemodel.True, taints: []string{"node.kubernetes.io/pid-pressure:NoSchedule"}, queue: QueueRemove, pods: PodsForget, write: true},
		{name: "NetworkUnavailable", node: judgeNode{status: withCond(nodemodel.NetworkUnavailable, nodemodel.True)}, now: t0,
			ready: nodemodel.True, taints: []string{"node.kubernetes.io/network-unavailable:NoSchedule"}, queue: QueueRemove, pods: PodsForget, write: true},
		{name: "a user taint of the same key is not duplicated", node: judgeNode{status: withCond(nodemodel.MemoryPressure, nodemodel.True),
			user: []*nodev1.Taint{noSchedule(nodemodel.TaintMemoryPressure)}}, now: t0,
			ready: nodemodel.True, queue: QueueRemove, pods: PodsForget},
		{name: "recovery: heard after the marking, overrides lifted and NoSchedule removed", node: func() judgeNode {
			n := judged(judgeNode{status: reported(nodemodel.True, t0), health: unknownHealth(noSchedule(nodemodel.TaintUnreachable), UnreachableNoExecute)})
			n.heartbeat.Renewals++ // a renewal after the first sight
			return n
		}(), now: t0.Add(time.Second),
			// NoExecute goes a pass later, once Ready is read True again.
			ready: nodemodel.True, taints: []string{"node.kubernetes.io/unreachable:NoExecute"}, queue: QueueAdd, pods: PodsForget, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.Result.Recovered || len(d.Health.Overrides) != 0 || !d.Health.RecoveryTime.AsTime().Equal(t0.Add(time.Second)) {
					t.Errorf("recovered=%v overrides=%v recovery=%v", d.Result.Recovered, d.Health.Overrides, d.Health.RecoveryTime)
				}
			}},
		{name: "Ready again as read: both NoExecute taints go, dropped from the queue", node: judgeNode{status: reported(nodemodel.True, t0),
			health: &nodev1.NodeHealth{Taints: []*nodev1.Taint{UnreachableNoExecute, NotReadyNoExecute}}}, now: t0,
			ready: nodemodel.True, queue: QueueRemove, pods: PodsForget, write: true},
		{name: "new node: registered, leftover NoExecute removed", node: judgeNode{status: reported(nodemodel.True, t0), fresh: true,
			health: &nodev1.NodeHealth{Taints: []*nodev1.Taint{NotReadyNoExecute}}}, now: t0,
			ready: nodemodel.True, queue: QueueRemove, pods: PodsForget, events: []string{"RegisteredNode"}, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Events[0].Message != "Registered Node n1 in Controller" {
					t.Errorf("event message %q", d.Events[0].Message)
				}
			}},
		{name: "a failed pod marking is retried while not Ready", node: judgeNode{status: reported(nodemodel.False, t0), podRetry: true,
			health: &nodev1.NodeHealth{Taints: []*nodev1.Taint{noSchedule(nodemodel.TaintNotReady), NotReadyNoExecute}}}, now: t0,
			ready: nodemodel.False, taints: []string{"node.kubernetes.io/not-ready:NoSchedule", "node.kubernetes.io/not-ready:NoExecute"}, queue: QueueAdd, pods: PodsMark},
		{name: "and forgotten once Ready", node: judgeNode{status: reported(nodemodel.True, t0), podRetry: true}, now: t0,
			ready: nodemodel.True, queue: QueueRemove, pods: PodsForget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Judge(cfg, tc.now, tc.node.input())
			if got := d.Result.Current.GetStatus(); got != tc.ready {
				t.Errorf("Ready = %q, want %q", got, tc.ready)
			}
			want := map[string]bool{}
			for _, k := range tc.taints {
				want[k] = true
			}
			if got := taintKeys(d.Health.Taints); !maps.Equal(got, want) {
				t.Errorf("taints = %v, want %v", got, want)
			}
			if d.Queue != tc.queue || d.Pods != tc.pods {
				t.Errorf("queue %v pods %v, want %v %v", d.Queue, d.Pods, tc.queue, tc.pods)
			}
			var reasons []string
			for _, ev := range d.Events {
				reasons = append(reasons, ev.Reason)
			}
			if !slices.Equal(reasons, tc.events) {
				t.Errorf("events %v, want %v", reasons, tc.events)
			}
			if d.Write != tc.write {
				t.Errorf("write = %v, want %v", d.Write, tc.write)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}
