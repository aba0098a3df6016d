// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package disruption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// The eviction's strings (upstream eviction.go).
const (
	ReasonEvictionAPI  = "EvictionByEvictionAPI"
	MessageEvictionAPI = "Eviction API: evicting"
	// MessageRefused is the 429's message.
	MessageRefused = "Cannot evict pod as it would violate the pod's disruption budget."
	// MessageMultiple is upstream's 500 for a pod under two budgets.
	MessageMultiple = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
	// CauseDisruptionBudget is the cause type of a refusal.
	CauseDisruptionBudget = "DisruptionBudget"
	// RetryProcessing is the Retry-After of a budget the controller has not
	// caught up with (upstream 10 s).
	RetryProcessing = 10 * time.Second
)

// RefusalKind says how an eviction was refused.
type RefusalKind int

// Refusal kinds, mapped to gRPC codes at the API edge.
const (
	// TooManyRequests: the budget allows no disruption now (HTTP 429,
	// gRPC ResourceExhausted); retry later.
	TooManyRequests RefusalKind = iota + 1
	// Forbidden: the budget is in a state no retry fixes soon (HTTP 403,
	// gRPC FailedPrecondition).
	Forbidden
	// MultipleBudgets: more than one budget selects the pod (upstream
	// HTTP 500; gRPC FailedPrecondition).
	MultipleBudgets
)

// Refusal is an eviction the budgets do not allow.
type Refusal struct {
	Kind    RefusalKind
	Message string
	// Budget names the budget; Cause is the budget's reason in words.
	Budget, Cause string
	// RetryAfter, when > 0: upstream's Retry-After.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	if r.Cause != "" {
		return r.Message + " " + r.Cause
	}
	return r.Message
}

// Store is what an eviction reads and writes.
type Store interface {
	nodestore.Reader
	nodestore.Writer
}

// EvictOptions of one eviction (the Eviction's DeleteOptions).
type EvictOptions struct {
	GracePeriodSeconds *int64
	// UID, when set, must be the pod's UID (podlife.ErrPrecondition).
	UID string
}

// EvictResult is what an eviction did.
type EvictResult struct {
	// Pod after the deletion, Gone when its record was removed, Rev the
	// revision of the last write (0: none).
	Pod  *podv1.Pod
	Gone bool
	Rev  int64
	// Budget names the budget whose disruption the eviction used; "" when
	// none was needed (no budget, a pod not running, an unhealthy pod the
	// policy lets go).
	Budget string
}

// evictRetries bounds the rounds after a concurrent change of the budget
// or the pod (upstream retries conflicts too).
const evictRetries = 10

// Evict is the eviction subresource (spec §15.2, upstream EvictionREST.Create)
// of pod ns/name at now:
//
//  1. a Pending, Succeeded or Failed pod, or one already Terminating, is
//     deleted without a budget;
//  2. more than one budget → MultipleBudgets; none → deleted;
//  3. a pod not Ready goes without using the budget under AlwaysAllow, or
//     under IfHealthyBudget (default) when currentHealthy ≥ desiredHealthy
//     > 0; then its delete is conditional on the revision read;
//  4. checkAndDecrement: observedGeneration < generation → TooManyRequests
//     with RetryAfter 10 s; disruptionsAllowed < 0 or too many unconfirmed
//     evictions → Forbidden; 0 → TooManyRequests; else the budget's
//     disruptionsAllowed − 1 and disruptedPods[pod] = now, written
//     conditional on the budget's revision (a concurrent eviction makes it
//     read again, so two evictions never spend one disruption);
//  5. DisruptionTarget=True/EvictionByEvictionAPI, then a graceful delete
//     (podlife.Delete).
func Evict(ctx context.Context, st Store, ns, name string, opts EvictOptions, now time.Time) (EvictResult, error) {
	key := ns + "/" + name
	for range evictRetries {
		o, err := st.Get(ctx, nodestore.Pods, key)
		if err != nil {
			return EvictResult{}, err
		}
		pod := o.Value.(*podv1.Pod)
		uid := pod.GetMetadata().GetUid()
		if opts.UID != "" && uid != opts.UID {
			return EvictResult{}, fmt.Errorf("uid: %w: pod %s has uid %s, not %s", podlife.ErrPrecondition, key, uid, opts.UID)
		}
		del := podlife.DeleteOptions{GracePeriodSeconds: opts.GracePeriodSeconds, UID: uid,
			Condition: &podv1.PodCondition{Type: podlife.DisruptionTarget, Status: nodemodel.True, Reason: ReasonEvictionAPI, Message: MessageEvictionAPI}}
		ph := pod.GetStatus().GetPhase()
		if ph == podlife.PhasePending || podlife.IsTerminal(pod) || podlife.IsTerminating(pod) {
			return remove(ctx, st, ns, name, del, now, "")
		}
		pdbs, err := budgetsOf(ctx, st, pod)
		if err != nil {
			return EvictResult{}, err
		}
		switch len(pdbs) {
		case 0:
			return remove(ctx, st, ns, name, del, now, "")
		case 1:
		default:
			return EvictResult{}, &Refusal{Kind: MultipleBudgets, Message: MessageMultiple}
		}
		b := pdbs[0]
		pdb := b.Value.(*policyv1.PodDisruptionBudget)
		if !IsReady(pod) {
			s := pdb.GetStatus()
			if pdb.GetSpec().GetUnhealthyPodEvictionPolicy() == PolicyAlwaysAllow ||
				(s.GetCurrentHealthy() >= s.GetDesiredHealthy() && s.GetDesiredHealthy() > 0) {
				// The pod must still be the unhealthy one checked.
				del.ResourceVersion = strconv.FormatInt(o.ModRevision, 10)
				r, err := remove(ctx, st, ns, name, del, now, "")
				if errors.Is(err, podlife.ErrPrecondition) {
					continue // it changed meanwhile: decide again
				}
				return r, err
			}
		}
		if err := checkAndDecrement(pdb, name, now); err != nil {
			return EvictResult{}, err
		}
		_, err = st.Apply(ctx, nil, nodestore.Op{Kind: nodestore.PodDisruptionBudgets, Name: b.Name, Value: pdb, IfModRevision: b.ModRevision})
		if errors.Is(err, nodestore.ErrConflict) {
			continue
		}
		if err != nil {
			return EvictResult{}, fmt.Errorf("update disruption budget %s: %w", b.Name, err)
		}
		return remove(ctx, st, ns, name, del, now, pdb.GetMetadata().GetName())
	}
	return EvictResult{}, fmt.Errorf("evict pod %s: %w (the pod or its budget kept changing)", key, nodestore.ErrConflict)
}

// checkAndDecrement is upstream's: refuse, or spend one disruption of pdb
// (modified in place) for pod name.
func checkAndDecrement(pdb *policyv1.PodDisruptionBudget, pod string, now time.Time) error {
	name := pdb.GetMetadata().GetName()
	s := pdb.GetStatus()
	if s.GetObservedGeneration() < pdb.GetMetadata().GetGeneration() {
		return &Refusal{Kind: TooManyRequests, Message: MessageRefused, Budget: name, RetryAfter: RetryProcessing,
			Cause: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)}
	}
	if s.GetDisruptionsAllowed() < 0 {
		return &Refusal{Kind: Forbidden, Message: "pdb disruptions allowed is negative", Budget: name}
	}
	if len(s.GetDisruptedPods()) > MaxDisruptedPods {
		return &Refusal{Kind: Forbidden, Message: "DisruptedPods map too big - too many evictions not confirmed by PDB controller", Budget: name}
	}
	if s.GetDisruptionsAllowed() == 0 {
		return &Refusal{Kind: TooManyRequests, Message: MessageRefused, Budget: name,
			Cause: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", name, s.GetDesiredHealthy(), s.GetCurrentHealthy())}
	}
	s = proto.CloneOf(s)
	s.DisruptionsAllowed--
	if s.DisruptedPods == nil {
		s.DisruptedPods = map[string]*timestamppb.Timestamp{}
	}
	s.DisruptedPods[pod] = nodemodel.Timestamp(now)
	pdb.Status = s
	return nil
}

// budgetsOf lists the budgets of the pod's namespace that select it.
func budgetsOf(ctx context.Context, st Store, pod *podv1.Pod) ([]nodestore.Object, error) {
	all, _, err := st.List(ctx, nodestore.PodDisruptionBudgets, nodestore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list disruption budgets: %w", err)
	}
	var out []nodestore.Object
	for _, o := range all {
		pdb := o.Value.(*policyv1.PodDisruptionBudget)
		identify(pdb, o.Name)
		if pdb.GetMetadata().GetNamespace() == pod.GetMetadata().GetNamespace() && Selects(pdb, pod.GetMetadata().GetLabels()) {
			out = append(out, o)
		}
	}
	return out, nil
}

// identify sets the budget's namespace and name from its store key.
func identify(pdb *policyv1.PodDisruptionBudget, key string) {
	if pdb.Metadata == nil {
		pdb.Metadata = &nodev1.ObjectMeta{}
	}
	if ns, name, ok := strings.Cut(key, "/"); ok {
		pdb.Metadata.Namespace, pdb.Metadata.Name = ns, name
	}
}

func remove(ctx context.Context, st Store, ns, name string, del podlife.DeleteOptions, now time.Time, budget string) (EvictResult, error) {
	p, gone, rev, err := podlife.DeleteRevision(ctx, st, ns, name, del, now)
	if err != nil {
		return EvictResult{}, err
	}
	return EvictResult{Pod: p, Gone: gone, Rev: rev, Budget: budget}, nil
}
