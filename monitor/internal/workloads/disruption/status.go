// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package disruption owns PodDisruptionBudgets at work (spec §15): the
// disruption controller that keeps each budget's status (upstream
// pkg/controller/disruption/disruption.go) on the monitor leader, and the
// eviction call's rules (upstream pkg/registry/core/pod/storage/eviction.go,
// EvictionREST.Create and checkAndDecrement), which any replica serves with
// optimistic concurrency on the budget's revision. A budget only limits
// voluntary disruptions: the taint evictor and pod GC never read it.
package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// Upstream constants (pkg/controller/disruption, policy/v1 types).
const (
	// DeletionTimeout: an evicted pod not seen Terminating or gone within
	// this long counts as healthy again (upstream DeletionTimeout).
	DeletionTimeout = 2 * time.Minute
	// MaxDisruptedPods: more unconfirmed evictions are refused (upstream
	// MaxDisruptedPodSize).
	MaxDisruptedPods = 2000

	ConditionDisruptionAllowed = "DisruptionAllowed"
	ReasonSufficientPods       = "SufficientPods"
	ReasonInsufficientPods     = "InsufficientPods"
	ReasonSyncFailed           = "SyncFailed"

	PolicyIfHealthyBudget = "IfHealthyBudget"
	PolicyAlwaysAllow     = "AlwaysAllow"
)

// Scale finds the desired scale of a pod's controller (upstream's finders:
// ReplicaSet and StatefulSet spec.replicas); found is false for a kind no
// finder knows, which fails the budget's sync as upstream.
type Scale func(ns string, ref *nodev1.OwnerReference) (scale int32, found bool, err error)

// Selects reports whether the budget's selector matches labels: a nil
// selector matches nothing, an empty one every pod of the namespace
// (policy/v1).
func Selects(pdb *policyv1.PodDisruptionBudget, labels map[string]string) bool {
	sel := pdb.GetSpec().GetSelector()
	if sel == nil {
		return false
	}
	return MatchSelector(sel, labels)
}

// MatchSelector is metav1.LabelSelector matching: every term holds.
func MatchSelector(sel *nodev1.LabelSelector, labels map[string]string) bool {
	for k, v := range sel.GetMatchLabels() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range sel.GetMatchExpressions() {
		v, ok := labels[r.GetKey()]
		in := false
		for _, x := range r.GetValues() {
			if x == v {
				in = true
			}
		}
		switch r.GetOperator() {
		case "In":
			if !ok || !in {
				return false
			}
		case "NotIn":
			if ok && in {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Matched returns the pods of the budget's namespace it selects.
func Matched(pdb *policyv1.PodDisruptionBudget, pods []*podv1.Pod) []*podv1.Pod {
	var out []*podv1.Pod
	ns := pdb.GetMetadata().GetNamespace()
	for _, p := range pods {
		if p.GetMetadata().GetNamespace() == ns && Selects(pdb, p.GetMetadata().GetLabels()) {
			out = append(out, p)
		}
	}
	return out
}

// IsReady is upstream IsPodReady: condition Ready is True.
func IsReady(p *podv1.Pod) bool {
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Ready" {
			return c.GetStatus() == nodemodel.True
		}
	}
	return false
}

// scaled is intstr.GetScaledValueFromIntOrPercent rounding up.
func scaled(v *policyv1.IntOrString, total int32) (int32, error) {
	switch x := v.GetValue().(type) {
	case *policyv1.IntOrString_IntValue:
		return x.IntValue, nil
	case *policyv1.IntOrString_StrValue:
		s, ok := strings.CutSuffix(x.StrValue, "%")
		n, err := strconv.Atoi(s)
		if !ok || err != nil {
			return 0, fmt.Errorf("invalid value for IntOrString: invalid value %q: must be an integer or a percentage", x.StrValue)
		}
		return int32(math.Ceil(float64(n) * float64(total) / 100)), nil
	}
	return 0, nil
}

func isPercent(v *policyv1.IntOrString) bool {
	_, ok := v.GetValue().(*policyv1.IntOrString_StrValue)
	return ok
}

// expectedScale is upstream getExpectedScale: the sum of the scales of the
// controllers of the matched pods, each controller once; pods without a
// controller are left out.
func expectedScale(ns string, pods []*podv1.Pod, scale Scale) (int32, error) {
	seen := map[string]int32{}
	for _, p := range pods {
		var ref *nodev1.OwnerReference
		for _, r := range p.GetMetadata().GetOwnerReferences() {
			if r.GetController() {
				ref = r
				break
			}
		}
		if ref == nil {
			continue // unmanaged: upstream reports it and leaves it out
		}
		if _, ok := seen[ref.GetUid()]; ok {
			continue
		}
		n, found, err := scale(ns, ref)
		if err != nil {
			return 0, err
		}
		if !found {
			return 0, fmt.Errorf("found no controllers for pod %q", p.GetMetadata().GetName())
		}
		seen[ref.GetUid()] = n
	}
	var sum int32
	for _, n := range seen {
		sum += n
	}
	return sum, nil
}

// Compute is upstream trySync for one budget over the pods of its
// namespace at now: expectedPods, desiredHealthy, currentHealthy,
// disruptionsAllowed, the disrupted pods still pending and
// observedGeneration; the DisruptionAllowed condition is set as upstream
// UpdateDisruptionAllowedCondition. An error is a sync failure (the caller
// writes FailSafe).
func Compute(pdb *policyv1.PodDisruptionBudget, pods []*podv1.Pod, scale Scale, now time.Time) (*policyv1.PodDisruptionBudgetStatus, error) {
	ns := pdb.GetMetadata().GetNamespace()
	matched := Matched(pdb, pods)
	var expected, desired int32
	spec := pdb.GetSpec()
	switch {
	case spec.GetMaxUnavailable() != nil:
		var err error
		if expected, err = expectedScale(ns, matched, scale); err != nil {
			return nil, err
		}
		mu, err := scaled(spec.GetMaxUnavailable(), expected)
		if err != nil {
			return nil, err
		}
		desired = max(expected-mu, 0)
	case spec.GetMinAvailable() != nil && !isPercent(spec.GetMinAvailable()):
		desired = spec.GetMinAvailable().GetIntValue()
		expected = int32(len(matched))
	case spec.GetMinAvailable() != nil:
		var err error
		if expected, err = expectedScale(ns, matched, scale); err != nil {
			return nil, err
		}
		if desired, err = scaled(spec.GetMinAvailable(), expected); err != nil {
			return nil, err
		}
	}
	disrupted := disruptedPods(pdb, matched, now)
	var healthy int32
	for _, p := range matched {
		if podlife.IsTerminating(p) {
			continue
		}
		if at, ok := disrupted[p.GetMetadata().GetName()]; ok && at.AsTime().Add(DeletionTimeout).After(now) {
			continue
		}
		if IsReady(p) {
			healthy++
		}
	}
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := &policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.GetMetadata().GetGeneration(),
		DisruptedPods:      disrupted,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		Conditions:         cloneConditions(pdb.GetStatus().GetConditions()),
	}
	if allowed > 0 {
		setCondition(st, nodemodel.True, ReasonSufficientPods, "", now)
	} else {
		setCondition(st, nodemodel.False, ReasonInsufficientPods, "", now)
	}
	return st, nil
}

// FailSafe is upstream failSafe: after a sync error the budget allows no
// disruption and says why; observedGeneration is kept.
func FailSafe(pdb *policyv1.PodDisruptionBudget, err error, now time.Time) *policyv1.PodDisruptionBudgetStatus {
	st := proto.CloneOf(pdb.GetStatus())
	if st == nil {
		st = &policyv1.PodDisruptionBudgetStatus{}
	}
	st.DisruptionsAllowed = 0
	setCondition(st, nodemodel.False, ReasonSyncFailed, err.Error(), now)
	return st
}

// disruptedPods is upstream buildDisruptedPodMap: entries of matched pods
// that are not Terminating and whose eviction is younger than
// DeletionTimeout; the rest are dropped.
func disruptedPods(pdb *policyv1.PodDisruptionBudget, matched []*podv1.Pod, now time.Time) map[string]*timestamppb.Timestamp {
	old := pdb.GetStatus().GetDisruptedPods()
	out := map[string]*timestamppb.Timestamp{}
	for _, p := range matched {
		if podlife.IsTerminating(p) {
			continue
		}
		at, ok := old[p.GetMetadata().GetName()]
		if !ok || at.AsTime().Add(DeletionTimeout).Before(now) {
			continue
		}
		out[p.GetMetadata().GetName()] = at
	}
	return out
}

func cloneConditions(cs []*policyv1.Condition) []*policyv1.Condition {
	out := make([]*policyv1.Condition, len(cs))
	for i, c := range cs {
		out[i] = proto.CloneOf(c)
	}
	return out
}

// setCondition is apimeta.SetStatusCondition for DisruptionAllowed: the
// transition time moves only when the status changes.
func setCondition(st *policyv1.PodDisruptionBudgetStatus, status, reason, msg string, now time.Time) {
	c := &policyv1.Condition{Type: ConditionDisruptionAllowed, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: st.GetObservedGeneration(), LastTransitionTime: nodemodel.Timestamp(now)}
	for i, old := range st.Conditions {
		if old.GetType() == ConditionDisruptionAllowed {
			if old.GetStatus() == status {
				c.LastTransitionTime = old.GetLastTransitionTime()
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}
