// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodemodel

import (
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// FindCondition returns the condition of type t, or nil.
func FindCondition(conds []*nodev1.NodeCondition, t string) *nodev1.NodeCondition {
	for _, c := range conds {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// ConditionStatus returns the status of condition t, or "" when absent.
func ConditionStatus(conds []*nodev1.NodeCondition, t string) string {
	return FindCondition(conds, t).GetStatus()
}

// StatusChanged reports whether b differs from a in anything but condition
// heartbeat times (spec §4.2 step 4): conditions compare as a set by type,
// quantities by value, times by instant. It decides whether a status report
// costs a write.
func StatusChanged(a, b *nodev1.NodeStatus) bool {
	if (a == nil) != (b == nil) {
		return true
	}
	if a == nil {
		return false
	}
	if !conditionsEqual(a.GetConditions(), b.GetConditions()) {
		return true
	}
	if !quantitiesEqual(a.GetCapacity(), b.GetCapacity()) || !quantitiesEqual(a.GetAllocatable(), b.GetAllocatable()) {
		return true
	}
	if !slices.EqualFunc(a.GetAddresses(), b.GetAddresses(), func(x, y *nodev1.NodeAddress) bool {
		return x.GetType() == y.GetType() && x.GetAddress() == y.GetAddress()
	}) {
		return true
	}
	return !proto.Equal(a.GetNodeInfo(), b.GetNodeInfo()) || !proto.Equal(a.GetDaemonEndpoints(), b.GetDaemonEndpoints())
}

func conditionsEqual(a, b []*nodev1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	sa, sb := sortedByType(a), sortedByType(b)
	for i := range sa {
		x, y := sa[i], sb[i]
		if x.GetType() != y.GetType() || x.GetStatus() != y.GetStatus() || x.GetReason() != y.GetReason() ||
			x.GetMessage() != y.GetMessage() || !sameInstant(x.GetLastTransitionTime(), y.GetLastTransitionTime()) {
			return false
		}
	}
	return true
}

func sortedByType(c []*nodev1.NodeCondition) []*nodev1.NodeCondition {
	s := slices.Clone(c)
	slices.SortStableFunc(s, func(x, y *nodev1.NodeCondition) int { return strings.Compare(x.GetType(), y.GetType()) })
	return s
}

func sameInstant(a, b *timestamppb.Timestamp) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.AsTime().Equal(b.AsTime())
}

func quantitiesEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok {
			return false
		}
		if va == vb {
			continue
		}
		qa, ea := resource.ParseQuantity(va)
		qb, eb := resource.ParseQuantity(vb)
		if ea != nil || eb != nil || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// EffectiveConditions returns the conditions Merge would serve, as far as
// their types and statuses go, without copying anything: the reported
// conditions with health overrides put in place of the same type (appended
// when missing). The result shares the inputs' messages; callers must not
// modify it. It exists for hot paths (the monitor judges every node every
// pass) that need only types and statuses; use Merge for anything served.
func EffectiveConditions(status *nodev1.NodeStatus, health *nodev1.NodeHealth) []*nodev1.NodeCondition {
	reported := status.GetConditions()
	overrides := health.GetConditionOverrides()
	if len(overrides) == 0 {
		return reported
	}
	out := make([]*nodev1.NodeCondition, len(reported), len(reported)+len(overrides))
	copy(out, reported)
	for _, o := range overrides {
		replaced := false
		for i, c := range out {
			if c.GetType() == o.GetType() {
				out[i], replaced = o, true
				break
			}
		}
		if !replaced {
			out = append(out, o)
		}
	}
	return out
}

// Merge builds the node as served: metadata and spec from the stored Node,
// status as reported, then the monitor's health record on top: condition
// overrides replace reported conditions of the same type (appended when
// missing), controller taints follow the user's taints, and conditions that
// recovered after an override carry a transition time no earlier than the
// recovery. A node that has no Ready condition at all is served with
// not-ready:NoSchedule (see notReadyUntilReported). Inputs are not
// modified; any of status and health may be nil.
func Merge(meta *nodev1.Node, status *nodev1.NodeStatus, health *nodev1.NodeHealth) *nodev1.Node {
	n := merge(meta, status, health, false)
	notReadyUntilReported(n)
	return n
}

// MergeShared is Merge for a cache that keeps the parts and serves the
// result read-only: the node it returns shares the parts' labels,
// annotations, addresses, resource maps, images, taints and (unless a
// health record changes them) conditions, instead of copying them. Its own
// Node, Metadata, Spec and Status messages and its Spec.Taints slice are
// new, so a caller may set Metadata.Name and ResourceVersion; nothing else
// may be modified, on the result or on the parts.
//
// Why: the monitor holds every node twice, as stored and as served. At
// 100,000 nodes Merge's copies were 246 of the monitor's 990 MB of heap,
// all of it marked by every GC cycle (docs/adr/0018-monitor-shares-unchanged-state.md).
func MergeShared(meta *nodev1.Node, status *nodev1.NodeStatus, health *nodev1.NodeHealth) *nodev1.Node {
	n := merge(meta, status, health, true)
	notReadyUntilReported(n)
	return n
}

// notReadyUntilReported adds not-ready:NoSchedule to a node without a Ready
// condition (registered, no status yet), unless it carries that taint
// already. It is what Kubernetes' TaintNodesByCondition admission plugin
// stores on every new Node; here it is derived when serving, not stored,
// because every node of a joining fleet would otherwise cost the monitor a
// health write and, milliseconds later when its first status arrives, a
// delete: for a 100,000-node fleet joining, up to 200,000 writes and
// ~10 MiB of etcd history for a taint that only a scheduler racing the
// first status would ever see. A node the monitor judged (Ready Unknown after
// the grace period, NodeStatusNeverUpdated) has a Ready condition and gets
// the stored unreachable taint instead.
func notReadyUntilReported(n *nodev1.Node) {
	if FindCondition(n.GetStatus().GetConditions(), Ready) != nil || HasTaint(n.GetSpec().GetTaints(), TaintNotReady, NoSchedule) {
		return
	}
	n.Spec.Taints = append(n.Spec.Taints, &nodev1.Taint{Key: TaintNotReady, Effect: NoSchedule})
}

// merge builds the served node from deep copies of the parts, or, when
// shared, from shallow copies (see MergeShared): new messages at the top,
// the parts' fields below them, and copies of what it changes (the taint
// slice it appends to, the conditions a health record overrides).
func merge(meta *nodev1.Node, status *nodev1.NodeStatus, health *nodev1.NodeHealth, shared bool) *nodev1.Node {
	cp := proto.Clone
	if shared {
		cp = shallowCopy
	}
	n := &nodev1.Node{}
	if meta != nil {
		if m := meta.GetMetadata(); m != nil {
			n.Metadata = cp(m).(*nodev1.ObjectMeta)
		}
		if sp := meta.GetSpec(); sp != nil {
			n.Spec = cp(sp).(*nodev1.NodeSpec)
			n.Spec.Taints = slices.Clip(n.Spec.Taints) // appends below must not write into the part's array
		}
	}
	if n.Spec == nil {
		n.Spec = &nodev1.NodeSpec{}
	}
	if status != nil {
		n.Status = cp(status).(*nodev1.NodeStatus)
	} else {
		n.Status = &nodev1.NodeStatus{}
	}
	if health == nil {
		return n
	}
	if shared && (len(health.GetConditionOverrides()) > 0 || health.GetRecoveryTime() != nil) {
		// Overrides and the recovery time change conditions in place.
		n.Status.Conditions = make([]*nodev1.NodeCondition, len(n.Status.Conditions))
		for i, c := range status.GetConditions() {
			n.Status.Conditions[i] = proto.CloneOf(c)
		}
	}
	for _, o := range health.GetConditionOverrides() {
		if c := FindCondition(n.Status.Conditions, o.GetType()); c != nil {
			proto.Reset(c)
			proto.Merge(c, o)
		} else {
			n.Status.Conditions = append(n.Status.Conditions, proto.CloneOf(o))
		}
	}
	if rt := health.GetRecoveryTime(); rt != nil && len(health.GetConditionOverrides()) == 0 {
		for _, c := range n.Status.Conditions {
			if c.GetLastTransitionTime() == nil || c.GetLastTransitionTime().AsTime().Before(rt.AsTime()) {
				if slices.Contains(ReporterConditions, c.GetType()) {
					c.LastTransitionTime = proto.CloneOf(rt)
				}
			}
		}
	}
	for _, t := range health.GetTaints() {
		if !shared {
			t = proto.CloneOf(t)
		}
		n.Spec.Taints = append(n.Spec.Taints, t)
	}
	return n
}

// shallowCopy returns a new message of m's type whose fields are m's:
// messages, lists and maps below the top are shared, not copied.
func shallowCopy(m proto.Message) proto.Message {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(u)
	}
	return dst.Interface()
}

// TaintKeyEffect identifies a taint.
type TaintKeyEffect struct{ Key, Effect string }

// HasTaint reports whether taints contain one with key and effect.
func HasTaint(taints []*nodev1.Taint, key, effect string) bool {
	for _, t := range taints {
		if t.GetKey() == key && t.GetEffect() == effect {
			return true
		}
	}
	return false
}

// Timestamp converts t to a protobuf timestamp (nil for the zero time).
func Timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
