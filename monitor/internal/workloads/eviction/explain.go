// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"context"
	"fmt"
	"strings"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// ExplainPod puts p's fate in words on this replica: from its schedule when
// this replica leads, otherwise a prediction that names the leader, which
// holds the exact time (spec §7: the wait counts from when the leader's
// evictor processed the taint, which only the leader knows).
func (r *Runner) ExplainPod(ctx context.Context, now time.Time, p *podv1.Pod, node *nodev1.Node) (string, []string, time.Time) {
	leading := r.Leading()
	var sched *Scheduled
	if leading {
		if sc, ok := r.Lookup(p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()); ok {
			sched = &sc
		}
	}
	leader := ""
	if !leading && r.cfg.Election != "" {
		leader, _ = r.store.Leader(ctx, r.cfg.Election)
	}
	return ExplainPod(now, p, node, sched, leading, leader)
}

func clock(t time.Time) string { return t.Local().Format("15:04:05") }

// shortTaint names a well-known taint by its last part ("unreachable").
func shortTaint(t *nodev1.Taint) string {
	if k, ok := strings.CutPrefix(t.GetKey(), "node.kubernetes.io/"); ok {
		return k
	}
	return taintString(t)
}

func since(t *nodev1.Taint) string {
	if t.GetTimeAdded() == nil {
		return ""
	}
	return " since " + clock(t.GetTimeAdded().AsTime())
}

// ExplainPod puts a pod's fate in words: whether and when the evictor
// deletes it, and why. sched is the leader's schedule (nil when none or
// when this replica does not lead); the returned time is the deletion time
// when one is known or predicted.
func ExplainPod(now time.Time, p *podv1.Pod, node *nodev1.Node, sched *Scheduled, leading bool, leader string) (string, []string, time.Time) {
	md := p.GetMetadata()
	name := md.GetName()
	nn := p.GetSpec().GetNodeName()
	kind := podutil.OwnerKind(p)
	var d []string
	d = append(d, fmt.Sprintf("pod %s/%s, owner %s, phase %s", md.GetNamespace(), name, orBare(kind), orDash(p.GetStatus().GetPhase())))
	for _, c := range p.GetStatus().GetConditions() {
		line := fmt.Sprintf("condition %s=%s", c.GetType(), c.GetStatus())
		if c.GetReason() != "" {
			line += " (" + c.GetReason() + ")"
		}
		if c.GetLastTransitionTime() != nil {
			line += " since " + clock(c.GetLastTransitionTime().AsTime())
		}
		if c.GetMessage() != "" {
			line += ": " + c.GetMessage()
		}
		d = append(d, line)
	}
	for _, t := range p.GetSpec().GetTolerations() {
		d = append(d, "toleration "+tolerationString(t))
	}
	if kind == podutil.OwnerKindStatefulSet {
		d = append(d, "StatefulSet pod: once deleted, its owner must make sure the old replica is really gone before starting one with the same identity; nodepulse leaves replacement to the owner")
	}
	if nn == "" {
		return fmt.Sprintf("pod %s is not bound to a node; no taint can evict it", name), d, time.Time{}
	}
	if node == nil {
		return fmt.Sprintf("pod %s is bound to node %s, which nodepulse does not know; nothing evicts it (its owner should replace it)", name, nn), d, time.Time{}
	}
	if r := nodemodel.FindCondition(node.GetStatus().GetConditions(), nodemodel.Ready); r != nil {
		d = append(d, fmt.Sprintf("node %s Ready=%s since %s", nn, r.GetStatus(), clock(r.GetLastTransitionTime().AsTime())))
	}
	taints := NoExecuteTaints(node.GetSpec().GetTaints())
	for _, t := range taints {
		d = append(d, "node taint "+taintString(t)+since(t))
	}
	m := Matcher{}
	if sched != nil {
		t := sched.Taint
		d = append(d, fmt.Sprintf("the wait counts from %s, when this leader's evictor processed the taint; changing tolerationSeconds does not move it; it is cancelled if the taint goes or the pod comes to tolerate it for ever", clock(sched.Created)))
		if !sched.FireAt.After(now) {
			return fmt.Sprintf("pod %s on node %s is being deleted now (%s)", name, nn, why(t, sched.Seconds)), d, sched.FireAt
		}
		return fmt.Sprintf("pod %s on node %s will be deleted at %s (%s)", name, nn, clock(sched.FireAt), why(t, sched.Seconds)), d, sched.FireAt
	}
	if len(taints) == 0 {
		// What would happen if the node were lost.
		hyp := m.Decide(now, md.GetUid(), nn, []*nodev1.Taint{lifecycle.UnreachableNoExecute}, p.GetSpec().GetTolerations(), nil)
		switch hyp.Action {
		case Nothing:
			d = append(d, "if the node became unreachable, the pod would stay: it tolerates node.kubernetes.io/unreachable:NoExecute for ever")
		case DeleteNow:
			d = append(d, "if the node became unreachable, the pod would be deleted at once: it does not tolerate node.kubernetes.io/unreachable:NoExecute")
		default:
			d = append(d, fmt.Sprintf("if the node became unreachable, the pod would be deleted %d s after the evictor processes the unreachable:NoExecute taint", hyp.Next.Seconds))
		}
		return fmt.Sprintf("pod %s on node %s is not threatened: the node has no NoExecute taint", name, nn), d, time.Time{}
	}
	dec := m.Decide(now, md.GetUid(), nn, taints, p.GetSpec().GetTolerations(), nil)
	where := "this replica is the leader and has not scheduled it yet"
	if !leading {
		if leader == "" {
			leader = "unknown"
		}
		where = "this replica is not the leader (leader: " + leader + "), which holds the exact time"
	}
	switch dec.Action {
	case Nothing:
		return fmt.Sprintf("pod %s on node %s tolerates every NoExecute taint of the node for ever; it is not evicted", name, nn), d, time.Time{}
	case DeleteNow:
		d = append(d, where)
		return fmt.Sprintf("pod %s on node %s will be deleted as soon as the evictor processes it (%s)", name, nn, dec.Why), d, now
	}
	// Predicted: the taint was processed no earlier than it was added.
	start := now
	if t := dec.Next.Taint; t.GetTimeAdded() != nil {
		start = t.GetTimeAdded().AsTime()
	}
	at := start.Add(time.Duration(dec.Next.Seconds) * time.Second)
	d = append(d, where+"; the prediction counts from when the taint was added, the leader from when it processed it (no earlier)")
	return fmt.Sprintf("pod %s on node %s will be deleted at about %s (%s)", name, nn, clock(at), why(dec.Next.Taint, dec.Next.Seconds)), d, at
}

func why(t *nodev1.Taint, secs int64) string {
	if t == nil {
		return "NoExecute taint"
	}
	return fmt.Sprintf("%s%s, tolerates %d s", shortTaint(t), since(t), secs)
}

func tolerationString(t *nodev1.Toleration) string {
	op := t.GetOperator()
	if op == "" {
		op = "Equal"
	}
	key := t.GetKey()
	if key == "" {
		key = "<every key>"
	}
	s := key + " " + op
	if t.GetValue() != "" {
		s += " " + t.GetValue()
	}
	e := t.GetEffect()
	if e == "" {
		e = "<every effect>"
	}
	s += ":" + e
	if t.TolerationSeconds != nil {
		s += fmt.Sprintf(" for %d s", t.GetTolerationSeconds())
	} else if t.GetEffect() == nodemodel.NoExecute || t.GetEffect() == "" {
		s += " for ever"
	}
	return s
}

func orBare(kind string) string {
	if kind == "" {
		return "none (bare pod)"
	}
	return kind
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ExplainNodePods lists what happens to the pods of a node, for
// ExplainNode: the pending deletions of this replica when it leads, with
// their times, and a prediction for the others.
func (r *Runner) ExplainNodePods(now time.Time, node *nodev1.Node, pods []*podv1.Pod) []string {
	return explainNodePods(now, node, pods, r.Leading(), r.OnNode(node.GetMetadata().GetName()))
}

// explainNodePods is ExplainNodePods on what the runner knows: whether it
// leads and its schedules for the node's pods.
func explainNodePods(now time.Time, node *nodev1.Node, pods []*podv1.Pod, leading bool, schedules []PodSchedule) []string {
	if len(pods) == 0 {
		return nil
	}
	name := node.GetMetadata().GetName()
	taints := NoExecuteTaints(node.GetSpec().GetTaints())
	if len(taints) == 0 {
		return []string{fmt.Sprintf("%d pod(s) on the node; none is threatened (no NoExecute taint)", len(pods))}
	}
	var d []string
	scheduled := map[string]PodSchedule{}
	for _, ps := range schedules {
		scheduled[cache.PodKey(ps.Namespace, ps.Name)] = ps
	}
	for _, p := range pods {
		md := p.GetMetadata()
		key := cache.PodKey(md.GetNamespace(), md.GetName())
		if ps, ok := scheduled[key]; ok {
			d = append(d, fmt.Sprintf("pod %s will be deleted at %s (%s)", key, clock(ps.FireAt), why(ps.Taint, ps.Seconds)))
			continue
		}
		summary, _, _ := ExplainPod(now, p, node, nil, leading, "the leader")
		d = append(d, strings.Replace(summary, "pod "+md.GetName()+" on node "+name, "pod "+key, 1))
	}
	return d
}
