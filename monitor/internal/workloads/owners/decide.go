// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package owners holds the owner controllers of the monitor's workloads
// part (spec §16): ReplicaSet (a Deployment is a ReplicaSet owner here),
// StatefulSet and DaemonSet, and the placement loop that binds every
// unbound pod through package placement. They run on the leader only,
// write through nodestore with the leader's fence, and decide from the
// stored state alone, so a new leader takes over where the old one stopped
// without creating a second replacement.
//
// This file is the decisions, as pure functions of an owner, the nodes and
// the pods; controller.go applies them.
package owners

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/eviction"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// Kinds of owners (the ownerReference kind of their pods).
const (
	KindReplicaSet  = "ReplicaSet"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = admission.KindDaemonSet
	// APIVersion of the owner references the controllers write.
	APIVersion = "apps/v1"
)

// MaxCreatesPerSync bounds the pods one owner creates in one sync
// (upstream's burstReplicas, 500); the rest come at the next sync.
const MaxCreatesPerSync = 500

// Owner is what a controller needs of a ReplicaSet, StatefulSet or
// DaemonSet, whatever its stored form.
type Owner struct {
	Kind                 string
	Namespace, Name, UID string
	Generation           int64
	Replicas             int // ReplicaSet, StatefulSet
	// Selector matches the labels of the owner's pods; nil: the owner has
	// none (an invalid record, which the controllers leave alone).
	Selector func(labels map[string]string) bool
	// Template is the pod to create: labels and annotations from its
	// metadata, its spec.
	Template *podv1.Pod
	// Parallel is a StatefulSet's podManagementPolicy: Parallel.
	Parallel bool
	// Stored is the status as read with the owner (nil: unknown); a sync
	// whose status equals it writes nothing.
	Stored *Status
}

// Status is what the controller reports about an owner. ReplicaSet fills
// Replicas, Ready, Terminating; StatefulSet Replicas, Ready; DaemonSet
// Desired, Current, Ready, Misscheduled.
type Status struct {
	ObservedGeneration int64
	Replicas           int
	Ready              int
	Terminating        int
	Desired            int
	Current            int
	Misscheduled       int
}

// Plan is one sync's decision for one owner.
type Plan struct {
	// Create: the pods to create, with owner reference and labels, not yet
	// admitted (controller.go applies the admission defaults and names the
	// unnamed ones).
	Create []*podv1.Pod
	// Delete: the pods to delete gracefully (podlife.Delete, with their UID
	// as precondition).
	Delete []*podv1.Pod
	Status Status
	// Waiting says why a StatefulSet stopped ("" when it did not).
	Waiting string
}

// controllerRef is the owner reference marked controller, if any.
func controllerRef(p *podv1.Pod) *nodev1.OwnerReference {
	for _, r := range p.GetMetadata().GetOwnerReferences() {
		if r.GetController() {
			return r
		}
	}
	return nil
}

// claimed: the pod's controller reference is the owner (by UID) and its
// labels match the selector. Adoption of orphans and release of pods whose
// labels no longer match are not done (spec §16.2): a pod is the owner's
// only if the owner created it.
func claimed(o Owner, p *podv1.Pod) bool {
	r := controllerRef(p)
	if r == nil || r.GetUid() != o.UID || r.GetKind() != o.Kind {
		return false
	}
	return o.Selector != nil && o.Selector(p.GetMetadata().GetLabels())
}

// Managed reports whether the controllers act for o: its selector exists
// and selects its own template, as validation requires of every owner
// (upstream ValidateReplicaSetSpec and its kin). A record written around
// validation that fails this is left alone, rather than made to create
// pods it would never count as its own.
func Managed(o Owner) bool {
	return o.Selector != nil && o.Selector(o.Template.GetMetadata().GetLabels())
}

// active is upstream IsPodActive: not terminal and not terminating.
func active(p *podv1.Pod) bool {
	return !podlife.IsTerminal(p) && !podlife.IsTerminating(p)
}

// Ready: the pod's Ready condition is True.
func Ready(p *podv1.Pod) bool {
	return podutil.FindCondition(p.GetStatus(), "Ready").GetStatus() == nodemodel.True
}

func runningReady(p *podv1.Pod) bool {
	return p.GetStatus().GetPhase() == podlife.PhaseRunning && Ready(p)
}

// newPod builds a pod of o from its template: name, namespace, labels and
// annotations of the template, the controller owner reference, phase
// Pending, node node ("" for placement).
func newPod(o Owner, name, node string) *podv1.Pod {
	p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{}, Spec: &podv1.PodSpec{}, Status: &podv1.PodStatus{Phase: podlife.PhasePending}}
	if t := o.Template; t != nil {
		if t.Spec != nil {
			p.Spec = proto.CloneOf(t.Spec)
		}
		if md := t.GetMetadata(); md != nil {
			if len(md.Labels) > 0 {
				p.Metadata.Labels = maps(md.Labels)
			}
			if len(md.Annotations) > 0 {
				p.Metadata.Annotations = maps(md.Annotations)
			}
		}
	}
	p.Metadata.Namespace, p.Metadata.Name = o.Namespace, name
	p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{ApiVersion: APIVersion, Kind: o.Kind, Name: o.Name, Uid: o.UID, Controller: true}}
	p.Spec.NodeName = node
	return p
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ReplicaSet decides one sync of a ReplicaSet (upstream manageReplicas,
// spec §16.2). Active claimed pods are compared with Replicas: missing
// ones are created (unnamed: the controller names them <rs>-<5 random
// characters>, upstream's generateName), the surplus deleted. A terminating pod is not active, so its replacement is
// created in the same sync that first sees its deletion timestamp.
func ReplicaSet(o Owner, pods []*podv1.Pod) Plan {
	var act []*podv1.Pod
	st := Status{ObservedGeneration: o.Generation}
	for _, p := range pods {
		if !claimed(o, p) {
			continue
		}
		switch {
		case active(p):
			act = append(act, p)
			if Ready(p) {
				st.Ready++
			}
		case podlife.IsTerminating(p) && !podlife.IsTerminal(p):
			st.Terminating++
		}
	}
	var plan Plan
	switch diff := len(act) - o.Replicas; {
	case diff < 0:
		for range min(-diff, MaxCreatesPerSync) {
			plan.Create = append(plan.Create, newPod(o, "", ""))
		}
	case diff > 0:
		slices.SortStableFunc(act, deletionOrder)
		plan.Delete = act[:diff]
	}
	st.Replicas = len(act)
	plan.Status = st
	return plan
}

// deletionOrder ranks the pods to delete first first, upstream's
// ActivePods ordering simplified (spec §16.2): unbound before bound,
// Pending before Unknown before Running, not Ready before Ready, newer
// before older, then by name so every replica decides alike.
func deletionOrder(a, b *podv1.Pod) int {
	bound := func(p *podv1.Pod) int {
		if p.GetSpec().GetNodeName() == "" {
			return 0
		}
		return 1
	}
	phase := func(p *podv1.Pod) int {
		switch p.GetStatus().GetPhase() {
		case podlife.PhasePending:
			return 0
		case podlife.PhaseUnknown:
			return 1
		case podlife.PhaseRunning:
			return 2
		}
		return 3
	}
	ready := func(p *podv1.Pod) int {
		if Ready(p) {
			return 1
		}
		return 0
	}
	if c := cmp.Compare(bound(a), bound(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(phase(a), phase(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(ready(a), ready(b)); c != 0 {
		return c
	}
	ta, tb := a.GetMetadata().GetCreationTimestamp().AsTime(), b.GetMetadata().GetCreationTimestamp().AsTime()
	if c := tb.Compare(ta); c != 0 {
		return c
	}
	return cmp.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName())
}

// WaitingForTerminate is upstream's log line for an OrderedReady
// StatefulSet stopped at a terminating pod.
const WaitingForTerminate = "StatefulSet is waiting for Pod to Terminate"

// ordinal parses "<set>-<i>".
func ordinal(set, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, set+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0
}

// StatefulSet decides one sync of a StatefulSet (upstream
// StatefulSetControl, spec §16.3). Ordinal i's slot is filled by any pod
// named <set>-<i>, claimed or not, terminating or not: a pod is created
// only into an empty slot, so two pods never share an identity.
// OrderedReady stops at the first slot that is empty (after creating it),
// terminating, or not Running and Ready; Parallel treats each ordinal on
// its own. A Failed or Succeeded pod is deleted, and recreated at a later
// sync once it is gone. Scale down deletes the highest ordinals first;
// OrderedReady one at a time and only when the kept ordinals did not stop
// the sync.
func StatefulSet(o Owner, pods []*podv1.Pod) Plan {
	byName := map[string]*podv1.Pod{}
	st := Status{ObservedGeneration: o.Generation}
	var condemned []*podv1.Pod
	for _, p := range pods {
		if p.GetMetadata().GetNamespace() != o.Namespace {
			continue
		}
		name := p.GetMetadata().GetName()
		i, ok := ordinal(o.Name, name)
		if !ok {
			continue
		}
		byName[name] = p
		if !claimed(o, p) {
			continue
		}
		// StatefulSet status has no terminating count (upstream neither).
		if !podlife.IsTerminating(p) {
			st.Replicas++
			if runningReady(p) {
				st.Ready++
			}
		}
		if i >= o.Replicas {
			condemned = append(condemned, p)
		}
	}
	var plan Plan
	stopped := false
	for i := range o.Replicas {
		name := fmt.Sprintf("%s-%d", o.Name, i)
		p, ok := byName[name]
		switch {
		case !ok:
			plan.Create = append(plan.Create, newPod(o, name, ""))
			if !o.Parallel {
				stopped, plan.Waiting = true, "StatefulSet is waiting for Pod "+name+" to be Running and Ready"
			}
		case podlife.IsTerminal(p) && !podlife.IsTerminating(p):
			if claimed(o, p) {
				plan.Delete = append(plan.Delete, p)
			}
			if !o.Parallel {
				stopped, plan.Waiting = true, "StatefulSet is recreating failed Pod "+name
			}
		case podlife.IsTerminating(p):
			if !o.Parallel {
				stopped, plan.Waiting = true, WaitingForTerminate+" "+name
			}
		case !runningReady(p):
			if !o.Parallel {
				stopped, plan.Waiting = true, "StatefulSet is waiting for Pod "+name+" to be Running and Ready"
			}
		}
		if stopped {
			break
		}
	}
	if !stopped {
		slices.SortFunc(condemned, func(a, b *podv1.Pod) int {
			ia, _ := ordinal(o.Name, a.GetMetadata().GetName())
			ib, _ := ordinal(o.Name, b.GetMetadata().GetName())
			return cmp.Compare(ib, ia) // highest first
		})
		for _, p := range condemned {
			if podlife.IsTerminating(p) {
				if !o.Parallel {
					plan.Waiting = WaitingForTerminate + " " + p.GetMetadata().GetName()
					break
				}
				continue
			}
			plan.Delete = append(plan.Delete, p)
			if !o.Parallel {
				break
			}
		}
	}
	plan.Status = st
	return plan
}

// DaemonTolerations returns the tolerations a pod of the DaemonSet o
// carries once admitted (spec §8: upstream AddOrUpdateDaemonPodTolerations
// and DefaultTolerationSeconds).
func DaemonTolerations(o Owner, adm admission.Config) *podv1.Pod {
	p := newPod(o, o.Name, "")
	adm.Apply(p)
	return p
}

// NodeShouldRunDaemonPod is upstream's (shouldRun, shouldContinueRunning)
// for the admitted daemon pod p on node n (spec §16.4): a pod pinned by
// name elsewhere fits neither; an untolerated NoSchedule or NoExecute
// taint stops new pods, and only an untolerated NoExecute taint stops the
// running one.
func NodeShouldRunDaemonPod(n *nodev1.Node, p *podv1.Pod) (shouldRun, shouldContinueRunning bool) {
	if nn := p.GetSpec().GetNodeName(); nn != "" && nn != n.GetMetadata().GetName() {
		return false, false
	}
	shouldRun, shouldContinueRunning = true, true
	tols := p.GetSpec().GetTolerations()
	for _, t := range n.GetSpec().GetTaints() {
		if t.GetEffect() != nodemodel.NoSchedule && t.GetEffect() != nodemodel.NoExecute {
			continue
		}
		if (eviction.Matcher{}).TolerationsTolerateTaint(tols, t) {
			continue
		}
		shouldRun = false
		if t.GetEffect() == nodemodel.NoExecute {
			shouldContinueRunning = false
		}
	}
	return shouldRun, shouldContinueRunning
}

// DaemonSet decides one sync of a DaemonSet (upstream manage and
// podsShouldBeOnNode, spec §16.4) given its admitted pod shape: on a node
// that should run it and has none of its pods (terminating ones count), a
// pod bound to the node is created; Failed pods are deleted (recreated at
// a later sync); of several live pods the oldest stays; on a node that
// should not continue running it, its pods are deleted.
func DaemonSet(o Owner, shape *podv1.Pod, nodes []*nodev1.Node, pods []*podv1.Pod) Plan {
	byNode := map[string][]*podv1.Pod{}
	for _, p := range pods {
		if claimed(o, p) && p.GetSpec().GetNodeName() != "" {
			nn := p.GetSpec().GetNodeName()
			byNode[nn] = append(byNode[nn], p)
		}
	}
	st := Status{ObservedGeneration: o.Generation}
	var plan Plan
	for _, n := range nodes {
		name := n.GetMetadata().GetName()
		run, cont := NodeShouldRunDaemonPod(n, shape)
		dp := byNode[name]
		var live []*podv1.Pod
		for _, p := range dp {
			if podlife.IsTerminating(p) {
				continue
			}
			if p.GetStatus().GetPhase() == podlife.PhaseFailed {
				plan.Delete = append(plan.Delete, p)
				continue
			}
			live = append(live, p)
		}
		switch {
		case run && len(dp) == 0:
			plan.Create = append(plan.Create, newPod(o, "", name))
		case !cont:
			plan.Delete = append(plan.Delete, live...)
		case len(live) > 1:
			slices.SortFunc(live, func(a, b *podv1.Pod) int {
				if c := a.GetMetadata().GetCreationTimestamp().AsTime().Compare(b.GetMetadata().GetCreationTimestamp().AsTime()); c != 0 {
					return c
				}
				return cmp.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName())
			})
			plan.Delete = append(plan.Delete, live[1:]...)
		}
		// As upstream's updateDaemonSetStatus, terminating pods count as
		// scheduled: the node still has the daemon.
		scheduled := len(dp) > 0
		switch {
		case run:
			st.Desired++
			if scheduled {
				st.Current++
				if slices.ContainsFunc(dp, Ready) {
					st.Ready++
				}
			}
		case scheduled:
			st.Misscheduled++
		}
	}
	plan.Status = st
	return plan
}

// Orphans returns the pods whose controller is a ReplicaSet, StatefulSet
// or DaemonSet (by uid) that no longer exists, and that are not already
// Terminating: Kubernetes' background cascading deletion of a deleted
// owner's pods (the garbage collector, pkg/controller/garbagecollector),
// done by the owner controllers here (spec §16.1). A reference without a
// uid names no object and is left alone (a record an orchestrator wrote).
func Orphans(owners []Owner, pods []*podv1.Pod) []*podv1.Pod {
	type id struct{ kind, uid string }
	live := map[id]bool{}
	for _, o := range owners {
		live[id{o.Kind, o.UID}] = true
	}
	var out []*podv1.Pod
	for _, p := range pods {
		r := controllerRef(p)
		switch r.GetKind() {
		case KindReplicaSet, KindStatefulSet, KindDaemonSet:
		default:
			continue
		}
		if r.GetUid() == "" || live[id{r.GetKind(), r.GetUid()}] || podlife.IsTerminating(p) {
			continue
		}
		out = append(out, p)
	}
	return out
}
