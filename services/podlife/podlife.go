// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package podlife holds the life-cycle rules of a pod record shared by the
// monitor and the collector: graceful deletion (the grace period a delete
// gets, the deletion timestamp it sets, when a record is really removed),
// forced deletion with UID and resource-version preconditions, and which
// phases are terminal. Upstream these rules live in the API server's pod
// registry (pkg/registry/core/pod/strategy.go CheckGracefulDelete,
// apiserver pkg/registry/rest/delete.go BeforeDelete); nodepulse has no API
// server in front of etcd, so every writer that deletes a pod goes through
// Delete here and they all agree (spec §12).
package podlife

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Phases, the condition and reasons of the deletion paths (spec §12).
const (
	PhasePending   = "Pending"
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
	PhaseUnknown   = "Unknown"

	// DisruptionTarget is the condition every deleting controller sets.
	DisruptionTarget = "DisruptionTarget"
	// ReasonTaintManager / MessageTaintManager: the taint-eviction
	// controller's DisruptionTarget.
	ReasonTaintManager  = "DeletionByTaintManager"
	MessageTaintManager = "Taint manager: deleting due to NoExecute taint"
	// ReasonPodGC / MessagePodGCOrphan: pod GC's DisruptionTarget for a pod
	// whose node no longer exists.
	ReasonPodGC        = "DeletionByPodGC"
	MessagePodGCOrphan = "PodGC: node no longer exists"
	// DefaultTerminationGracePeriodSeconds is the API default of
	// spec.terminationGracePeriodSeconds.
	DefaultTerminationGracePeriodSeconds int64 = 30
)

// ErrPrecondition: the UID or resource-version precondition of a delete did
// not hold (upstream 409 Conflict; the monitor's API answers Aborted).
var ErrPrecondition = errors.New("precondition failed")

// IsTerminal reports whether the pod's phase is Succeeded or Failed.
func IsTerminal(p *podv1.Pod) bool {
	ph := p.GetStatus().GetPhase()
	return ph == PhaseSucceeded || ph == PhaseFailed
}

// IsTerminating reports whether a graceful deletion of the pod has been
// requested (deletion_timestamp set).
func IsTerminating(p *podv1.Pod) bool {
	return p.GetMetadata().GetDeletionTimestamp() != nil
}

// GracePeriod is the grace a delete of p gets when it is not terminating
// yet (upstream CheckGracefulDelete, then BeforeDelete's negative rule):
// the requested value, else spec.terminationGracePeriodSeconds (nil → 0);
// 0 for an unscheduled pod or one in a terminal phase; a negative value
// becomes 1.
func GracePeriod(p *podv1.Pod, requested *int64) int64 {
	var g int64
	switch {
	case requested != nil:
		g = *requested
	case p.GetSpec().TerminationGracePeriodSeconds != nil:
		g = p.GetSpec().GetTerminationGracePeriodSeconds()
	}
	if p.GetSpec().GetNodeName() == "" || IsTerminal(p) {
		return 0
	}
	if g < 0 {
		return 1
	}
	return g
}

// Store is what Delete needs of a nodestore.Store.
type Store interface {
	nodestore.Reader
	nodestore.Writer
}

// DeleteOptions of Delete.
type DeleteOptions struct {
	// GracePeriodSeconds as requested; nil uses the pod's own
	// (GracePeriod). 0 removes the record at once.
	GracePeriodSeconds *int64
	// UID, when set, must be the pod's UID (else ErrPrecondition).
	UID string
	// ResourceVersion, when set, must be the pod's current store revision
	// in decimal (else ErrPrecondition).
	ResourceVersion string
	// Fence, when set, makes every write conditional on a leadership (the
	// monitor leader's writes); a lost fence returns nodestore.ErrFenced.
	Fence *nodestore.Fence
	// Condition, when set, is set on the pod's status before the deletion,
	// with a separate write as upstream's status patch (DisruptionTarget).
	// Its transition time is now when its status changes.
	Condition *podv1.PodCondition
	// MarkFailed sets a non-terminal pod's phase to Failed in that write
	// (pod GC's force deletion, upstream markFailedAndDeletePodWithCondition).
	MarkFailed bool
	// Unchanged are checks (nodestore.Unchanged) every write also carries:
	// the objects the caller decided on, which must not have changed since
	// (the taint eviction's node records). A failed check returns
	// ErrStale and writes nothing; the caller reads again and decides anew.
	Unchanged []nodestore.Op
}

// ErrStale: an object of DeleteOptions.Unchanged is no longer at the
// revision the deletion was decided on.
var ErrStale = errors.New("an object the deletion was decided on has changed")

// casRetries bounds how often Delete reads again after a concurrent change.
const casRetries = 8

// Delete applies a delete request to the pod ns/name at time now (spec
// §12.2, upstream BeforeDelete and Store.Delete):
//
//   - not terminating, grace > 0: deletion_timestamp = now + grace,
//     deletion_grace_period_seconds = grace, generation bumped when > 0; the
//     record stays (Terminating); gone is false;
//   - grace 0: the record is removed; gone is true and pod is its last
//     state;
//   - already terminating with a recorded grace > 0: a shorter requested
//     grace moves the timestamp to (old − old grace + new grace), never
//     before now (a clamped grace is recorded as 1), and 0 removes; an
//     equal, longer or absent grace changes nothing ("pending graceful");
//   - already terminating with no or zero recorded grace: removed.
//
// The returned pod carries namespace, name and its resource version. A
// missing pod returns nodestore.ErrNotFound, a failed precondition
// ErrPrecondition, a lost fence nodestore.ErrFenced.
func Delete(ctx context.Context, st Store, ns, name string, opts DeleteOptions, now time.Time) (*podv1.Pod, bool, error) {
	p, gone, _, err := DeleteRevision(ctx, st, ns, name, opts, now)
	return p, gone, err
}

// DeleteRevision is Delete that also returns the store revision of its last
// write (0 when it wrote nothing), for a reader that waits for its own
// write to show (the monitor's API).
func DeleteRevision(ctx context.Context, st Store, ns, name string, opts DeleteOptions, now time.Time) (*podv1.Pod, bool, int64, error) {
	key := ns + "/" + name
	var wantRev int64
	if opts.ResourceVersion != "" {
		v, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || v <= 0 {
			return nil, false, 0, fmt.Errorf("resourceVersion: %w: %q is not a store revision", ErrPrecondition, opts.ResourceVersion)
		}
		wantRev = v
	}
	req := opts.GracePeriodSeconds
	if req != nil && *req < 0 {
		one := int64(1)
		req = &one // BeforeDelete: a negative request means 1 s
	}
	for range casRetries {
		o, err := st.Get(ctx, nodestore.Pods, key)
		if err != nil {
			return nil, false, 0, err
		}
		p := stored(o.Value.(*podv1.Pod))
		if opts.UID != "" && p.GetMetadata().GetUid() != opts.UID {
			return nil, false, 0, fmt.Errorf("uid: %w: pod %s has uid %s, not %s", ErrPrecondition, key, p.GetMetadata().GetUid(), opts.UID)
		}
		if wantRev != 0 && o.ModRevision != wantRev {
			return nil, false, 0, fmt.Errorf("resourceVersion: %w: pod %s is at resource version %d, not %d", ErrPrecondition, key, o.ModRevision, wantRev)
		}
		rev := o.ModRevision
		// The status write comes first and on its own, as upstream's status
		// patch: a watcher sees the reason before the pod goes (or turns
		// Terminating), also when the delete step then fails.
		if changed := markStatus(p, opts, now); changed {
			rev, err = st.Apply(ctx, opts.Fence, append(slices.Clip(opts.Unchanged), nodestore.Op{Kind: nodestore.Pods, Name: key, Value: p, IfModRevision: rev})...)
			if errors.Is(err, nodestore.ErrConflict) {
				if err := staleCheck(ctx, st, opts.Unchanged); err != nil {
					return nil, false, 0, err
				}
				if wantRev != 0 {
					return nil, false, 0, fmt.Errorf("resourceVersion: %w: pod %s changed meanwhile", ErrPrecondition, key)
				}
				continue
			}
			if err != nil {
				return nil, false, 0, err
			}
		}
		np, remove := decide(p, req, now)
		last := rev // the revision of the state returned
		commit := int64(0)
		if rev != o.ModRevision {
			commit = rev
		}
		switch {
		case remove:
			commit, err = st.Apply(ctx, opts.Fence, append(slices.Clip(opts.Unchanged), nodestore.Op{Kind: nodestore.Pods, Name: key, IfModRevision: rev})...)
		case np != nil:
			last, err = st.Apply(ctx, opts.Fence, append(slices.Clip(opts.Unchanged), nodestore.Op{Kind: nodestore.Pods, Name: key, Value: np, IfModRevision: rev})...)
			commit, p = last, np
		}
		if errors.Is(err, nodestore.ErrConflict) {
			if err := staleCheck(ctx, st, opts.Unchanged); err != nil {
				return nil, false, 0, err
			}
			if wantRev != 0 {
				return nil, false, 0, fmt.Errorf("resourceVersion: %w: pod %s changed meanwhile", ErrPrecondition, key)
			}
			continue
		}
		if err != nil {
			return nil, false, 0, err
		}
		return served(p, ns, name, last), remove, commit, nil
	}
	return nil, false, 0, fmt.Errorf("delete pod %s: %w (it kept changing)", key, nodestore.ErrConflict)
}

// staleCheck tells, after a conflict, whether a check of checks failed (it
// returns ErrStale, or the read's error) rather than the pod's own
// precondition (nil).
func staleCheck(ctx context.Context, st Store, checks []nodestore.Op) error {
	for _, c := range checks {
		o, err := st.Get(ctx, c.Kind, c.Name)
		var rev int64
		switch {
		case errors.Is(err, nodestore.ErrNotFound):
		case err != nil:
			return fmt.Errorf("read %s/%s after a conflict: %w", c.Kind, c.Name, err)
		default:
			rev = o.ModRevision
		}
		if (c.IfAbsent && rev != 0) || (c.IfModRevision > 0 && rev != c.IfModRevision) {
			return fmt.Errorf("%w: %s/%s is at revision %d", ErrStale, c.Kind, c.Name, rev)
		}
	}
	return nil
}

// ForceDelete is pod GC's force deletion: a non-terminal pod is set Failed
// (with cond, when given) and then removed with grace 0, both conditional
// on the revision read (and on the fence).
func ForceDelete(ctx context.Context, st Store, ns, name string, uid string, cond *podv1.PodCondition, fence *nodestore.Fence, now time.Time) (*podv1.Pod, error) {
	zero := int64(0)
	p, _, err := Delete(ctx, st, ns, name, DeleteOptions{GracePeriodSeconds: &zero, UID: uid, Fence: fence, Condition: cond, MarkFailed: true}, now)
	return p, err
}

// decide returns the record to write (nil: none) or remove = true.
func decide(p *podv1.Pod, req *int64, now time.Time) (*podv1.Pod, bool) {
	md := p.GetMetadata()
	if IsTerminating(p) {
		old := md.GetDeletionGracePeriodSeconds()
		if md.DeletionGracePeriodSeconds == nil || old <= 0 {
			return nil, true // an interrupted grace-0 delete: finish it
		}
		if req == nil || *req >= old {
			return nil, false // pending graceful: only a shorter grace counts
		}
		if *req == 0 {
			return nil, true
		}
		g := *req
		at := md.GetDeletionTimestamp().AsTime().Add(time.Duration(g-old) * time.Second)
		if at.Before(now) {
			at, g = now, 1
		}
		np := proto.CloneOf(p)
		np.Metadata.DeletionTimestamp = nodemodel.Timestamp(at)
		np.Metadata.DeletionGracePeriodSeconds = &g
		return np, false
	}
	g := GracePeriod(p, req)
	if g == 0 {
		return nil, true
	}
	np := proto.CloneOf(p)
	if np.Metadata == nil {
		np.Metadata = &nodev1.ObjectMeta{}
	}
	np.Metadata.DeletionTimestamp = nodemodel.Timestamp(now.Add(time.Duration(g) * time.Second))
	np.Metadata.DeletionGracePeriodSeconds = &g
	if np.Metadata.Generation > 0 {
		np.Metadata.Generation++
	}
	return np, false
}

// markStatus applies opts.Condition and opts.MarkFailed to p in place and
// reports whether anything changed.
func markStatus(p *podv1.Pod, opts DeleteOptions, now time.Time) bool {
	if opts.Condition == nil && !opts.MarkFailed {
		return false
	}
	if p.Status == nil {
		p.Status = &podv1.PodStatus{}
	}
	changed := false
	if opts.MarkFailed && !IsTerminal(p) {
		p.Status.Phase = PhaseFailed
		changed = true
	}
	if opts.Condition != nil {
		changed = SetCondition(p.Status, proto.CloneOf(opts.Condition), now) || changed
	}
	return changed
}

// SetCondition is upstream UpdatePodCondition: the transition time is now
// when the status changes (or the condition is new) and kept otherwise; it
// reports whether anything changed. c is stored as given (not copied).
func SetCondition(st *podv1.PodStatus, c *podv1.PodCondition, now time.Time) bool {
	c.LastTransitionTime = nodemodel.Timestamp(now)
	for i, old := range st.Conditions {
		if old.GetType() != c.GetType() {
			continue
		}
		if old.GetStatus() == c.GetStatus() {
			c.LastTransitionTime = old.GetLastTransitionTime()
		}
		equal := proto.Equal(old, c)
		st.Conditions[i] = c
		return !equal
	}
	st.Conditions = append(st.Conditions, c)
	return true
}

// stored is a copy of p as written: the resource version is the store's
// revision, never part of the value.
func stored(p *podv1.Pod) *podv1.Pod {
	s := proto.CloneOf(p)
	if s.Metadata == nil {
		s.Metadata = &nodev1.ObjectMeta{}
	}
	s.Metadata.ResourceVersion = ""
	return s
}

// served is p as a reader sees it: identity from the key, the revision as
// its resource version.
func served(p *podv1.Pod, ns, name string, rev int64) *podv1.Pod {
	out := proto.CloneOf(p)
	if out.Metadata == nil {
		out.Metadata = &nodev1.ObjectMeta{}
	}
	out.Metadata.Namespace, out.Metadata.Name = ns, name
	out.Metadata.ResourceVersion = strconv.FormatInt(rev, 10)
	return out
}
