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
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podgc"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/podlife"
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
	return ExplainPodFate(now, p, node, sched, leading, leader, r.gcView())
}

// GC is what explanations need of pod GC (package podgc), which ends the
// pods the evictor cannot: the Terminating ones of deleted or out-of-service
// nodes and the orphans.
type GC struct {
	// Period and Quarantine of pod GC (--pod-gc-period, --pod-gc-quarantine);
	// zero means the defaults, 20 s and 40 s.
	Period, Quarantine time.Duration
	// Queued, when set, returns when pod GC on this replica first saw the
	// missing node (it force-deletes its pods Quarantine later, at its next
	// pass).
	Queued func(node string) (time.Time, bool)
}

func (g GC) period() time.Duration {
	if g.Period <= 0 {
		return 20 * time.Second
	}
	return g.Period
}

func (g GC) quarantine() time.Duration {
	if g.Quarantine <= 0 {
		return 40 * time.Second
	}
	return g.Quarantine
}

// SetGC tells explanations about pod GC (call before Run).
func (r *Runner) SetGC(g GC) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gc = g
}

func (r *Runner) gcView() GC {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gc
}

// outOfService reports whether pod GC force-deletes the Terminating pods of
// node (spec §12.4).
func outOfService(node *nodev1.Node) bool { return node != nil && podgc.OutOfService(node) }

// explainEnd says how a pod that is already Terminating or has no node
// ends (spec §12): ok is false when neither applies and the evictor's
// explanation follows.
func explainEnd(now time.Time, p *podv1.Pod, node *nodev1.Node, gc GC) (string, []string, time.Time, bool) {
	md := p.GetMetadata()
	name, nn := md.GetName(), p.GetSpec().GetNodeName()
	if !podlife.IsTerminating(p) {
		if nn == "" || node != nil {
			return "", nil, time.Time{}, false
		}
		at, how := orphanDue(now, nn, gc)
		return fmt.Sprintf("pod %s is bound to node %s, which does not exist: pod GC sets it Failed (DeletionByPodGC) and removes it at about %s", name, nn, clock(at)),
			[]string{how}, at, true
	}
	due := md.GetDeletionTimestamp().AsTime()
	grace := md.GetDeletionGracePeriodSeconds()
	requested := due.Add(-time.Duration(grace) * time.Second)
	d := []string{fmt.Sprintf("deletion requested at %s with a grace period of %d s (due %s); nothing removes the pod when that time passes, as in Kubernetes", clock(requested), grace, clock(due))}
	head := fmt.Sprintf("pod %s is Terminating since %s", name, clock(requested))
	switch {
	case nn == "":
		at := now.Add(gc.period())
		return head + fmt.Sprintf(" and is not bound to a node: pod GC removes it by about %s", clock(at)), d, at, true
	case node == nil:
		at, how := orphanDue(now, nn, gc)
		return head + fmt.Sprintf("; its node %s does not exist: pod GC removes it at about %s", nn, clock(at)), append(d, how), at, true
	case outOfService(node):
		at := now.Add(gc.period())
		return head + fmt.Sprintf("; node %s is out of service and not Ready: pod GC sets it Failed and removes it by about %s", nn, clock(at)), d, at, true
	}
	d = append(d, fmt.Sprintf("it ends when node %s's reporter confirms the deletion, when the node is deleted (pod GC, %s after) or tainted %s while not Ready (pod GC, within %s), or with a forced delete (nodepulse delete pod %s -n %s --force)",
		nn, gc.quarantine(), nodemodel.TaintOutOfService, gc.period(), name, md.GetNamespace()))
	return head + fmt.Sprintf(" on node %s: it waits for the node's reporter, pod GC or a forced delete", nn), d, time.Time{}, true
}

// orphanDue is when pod GC removes the pods of a missing node: Quarantine
// after it first saw the node missing, at its next pass.
func orphanDue(now time.Time, node string, gc GC) (time.Time, string) {
	if gc.Queued != nil {
		if q, ok := gc.Queued(node); ok {
			return q.Add(gc.quarantine()), fmt.Sprintf("pod GC saw node %s missing at %s; after %s it checks the store again (a node that reappears saves its pods) and removes them at its next pass (every %s)",
				node, clock(q), gc.quarantine(), gc.period())
		}
	}
	return now.Add(gc.period() + gc.quarantine()), fmt.Sprintf("pod GC queues the missing node %s at its next pass (every %s), checks the store again %s later (a node that reappears saves its pods) and then removes them",
		node, gc.period(), gc.quarantine())
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

// ExplainPod is ExplainPodFate with pod GC's defaults.
func ExplainPod(now time.Time, p *podv1.Pod, node *nodev1.Node, sched *Scheduled, leading bool, leader string) (string, []string, time.Time) {
	return ExplainPodFate(now, p, node, sched, leading, leader, GC{})
}

// ExplainPodFate puts a pod's fate in words: which path ends it and when —
// a Terminating pod waits for its node's reporter, pod GC or a forced
// delete; an orphan goes to pod GC; otherwise whether and when the evictor
// deletes it (it then turns Terminating), and why. sched is the leader's
// schedule (nil when none or when this replica does not lead); the returned
// time is the deletion time when one is known or predicted.
func ExplainPodFate(now time.Time, p *podv1.Pod, node *nodev1.Node, sched *Scheduled, leading bool, leader string, gc GC) (string, []string, time.Time) {
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
	if sum, more, at, ok := explainEnd(now, p, node, gc); ok {
		return sum, append(d, more...), at
	}
	if nn == "" {
		return fmt.Sprintf("pod %s is not bound to a node; no taint can evict it", name), d, time.Time{}
	}
	grace := podlife.GracePeriod(p, nil)
	if grace > 0 {
		d = append(d, fmt.Sprintf("an eviction deletes it gracefully: it turns Terminating with a deletion timestamp %d s later and stays until node %s's reporter confirms, pod GC or a forced delete", grace, nn))
	} else {
		d = append(d, "an eviction removes it at once (grace period 0)")
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
	return explainNodePods(now, node, pods, r.Leading(), r.OnNode(node.GetMetadata().GetName()), r.gcView())
}

// explainNodePods is ExplainNodePods on what the runner knows: whether it
// leads and its schedules for the node's pods.
func explainNodePods(now time.Time, node *nodev1.Node, pods []*podv1.Pod, leading bool, schedules []PodSchedule, gc GC) []string {
	if len(pods) == 0 {
		return nil
	}
	name := node.GetMetadata().GetName()
	var d []string
	if outOfService(node) {
		d = append(d, fmt.Sprintf("the node is tainted %s and not Ready: pod GC sets its Terminating pods Failed and removes them within %s", nodemodel.TaintOutOfService, gc.period()))
	}
	// Terminating pods end the same way whatever the taints: say how.
	live := make([]*podv1.Pod, 0, len(pods))
	for _, p := range pods {
		if !podlife.IsTerminating(p) {
			live = append(live, p)
			continue
		}
		md := p.GetMetadata()
		summary, _, _, _ := explainEnd(now, p, node, gc)
		d = append(d, strings.Replace(summary, "pod "+md.GetName(), "pod "+cache.PodKey(md.GetNamespace(), md.GetName()), 1))
	}
	pods = live
	if len(pods) == 0 {
		return d
	}
	taints := NoExecuteTaints(node.GetSpec().GetTaints())
	if len(taints) == 0 {
		return append(d, fmt.Sprintf("%d pod(s) on the node; none is threatened (no NoExecute taint)", len(pods)))
	}
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
		summary, _, _ := ExplainPodFate(now, p, node, nil, leading, "the leader", gc)
		d = append(d, strings.Replace(summary, "pod "+md.GetName()+" on node "+name, "pod "+key, 1))
	}
	return d
}
