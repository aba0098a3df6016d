// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"fmt"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// Scheduled is a pending deletion of one pod.
type Scheduled struct {
	// UID of the pod it was scheduled for: a pod recreated under the same
	// name is a different pod and never inherits a deletion.
	UID string
	// Node the pod was on.
	Node string
	// Created is when the evictor processed the taint for this pod: the
	// delay counts from here (spec §7), not from the taint's timeAdded.
	Created time.Time
	// FireAt is when the pod is deleted.
	FireAt time.Time
	// Seconds is the toleration that set FireAt, for explanations.
	Seconds int64
	// Taint is the taint the pod tolerates for Seconds (the first matched
	// taint whose toleration gives the minimum), or the one it does not
	// tolerate (deleted at once).
	Taint *nodev1.Taint
	// MetaRev and HealthRev are the mod revisions of the node's records
	// (nodes/<node>, health/<node>; 0 when absent) the decision was made
	// from: the taints are in them, and the deletion is conditional on
	// both, so a view of the node that lags behind the store (a watch on a
	// frozen etcd member, say) can never delete a pod.
	MetaRev, HealthRev int64
}

// Action is what the evictor does with one pod after a decision.
type Action int

// Actions of Decide.
const (
	// Nothing: no NoExecute taint and nothing scheduled.
	Nothing Action = iota
	// Keep the existing schedule unchanged.
	Keep
	// Cancel any scheduled deletion (taints gone, or tolerated for ever).
	Cancel
	// DeleteNow: a taint is not tolerated, or tolerated for 0 seconds
	// (cancel an earlier schedule first).
	DeleteNow
	// Schedule the deletion in Decision.Next.
	Schedule
)

func (a Action) String() string {
	return [...]string{"Nothing", "Keep", "Cancel", "DeleteNow", "Schedule"}[a]
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Next is the schedule to store for Schedule (and for DeleteNow, with
	// FireAt = now, so a delayed firing can still be explained).
	Next Scheduled
	// Untolerated is the taint not tolerated, for DeleteNow.
	Untolerated *nodev1.Taint
	// Why in words, for logs and explanations.
	Why string
}

// Decide applies spec §7 to pod (tolerations tols) on a node with NoExecute
// taints taints (only NoExecute ones: see NoExecuteTaints), at processing
// time now, given the deletion already scheduled for the pod (nil if none).
//
//  1. No taint: cancel.
//  2. A taint no toleration tolerates: delete now.
//  3. Per taint the first matching toleration; the minimum tolerationSeconds
//     among them (≤ 0 → 0); none set → tolerated for ever → cancel.
//  4. Schedule at now+min; an existing schedule created before now is kept
//     exactly as it is, so editing tolerationSeconds neither postpones nor
//     advances it. (Upstream: an existing schedule created at the same
//     instant is replaced, keeping its creation time.)
func (m Matcher) Decide(now time.Time, uid, node string, taints []*nodev1.Taint, tols []*nodev1.Toleration, prev *Scheduled) Decision {
	if prev != nil && prev.UID != uid {
		prev = nil // another pod under the same name: its schedule is void
	}
	if len(taints) == 0 {
		if prev == nil {
			return Decision{Action: Nothing, Why: "node has no NoExecute taint"}
		}
		return Decision{Action: Cancel, Why: "node has no NoExecute taint any more"}
	}
	matched, untolerated, ok := m.MatchingTolerations(taints, tols)
	if !ok {
		return Decision{Action: DeleteNow, Untolerated: untolerated,
			Next: Scheduled{UID: uid, Node: node, Created: now, FireAt: now, Taint: untolerated},
			Why:  fmt.Sprintf("taint %s is not tolerated", taintString(untolerated))}
	}
	secs := MinTolerationSeconds(matched)
	if secs < 0 {
		if prev == nil {
			return Decision{Action: Nothing, Why: "every NoExecute taint is tolerated for ever"}
		}
		return Decision{Action: Cancel, Why: "every NoExecute taint is tolerated for ever now"}
	}
	var which *nodev1.Taint
	for i, t := range matched {
		if t.TolerationSeconds != nil && max(t.GetTolerationSeconds(), 0) == secs {
			which = taints[i]
			break
		}
	}
	d := time.Duration(secs) * time.Second
	trigger := now.Add(d)
	if prev != nil {
		if prev.Created.Add(d).Before(trigger) {
			return Decision{Action: Keep, Next: *prev, Why: fmt.Sprintf("deletion already scheduled at %s (kept as scheduled)", prev.FireAt.Format(time.RFC3339))}
		}
		return Decision{Action: Schedule, Next: Scheduled{UID: uid, Node: node, Created: prev.Created, FireAt: trigger, Seconds: secs, Taint: which},
			Why: fmt.Sprintf("tolerates %s for %ds", taintString(which), secs)}
	}
	if secs == 0 {
		return Decision{Action: DeleteNow, Next: Scheduled{UID: uid, Node: node, Created: now, FireAt: now, Taint: which},
			Why: fmt.Sprintf("tolerates %s for 0s", taintString(which))}
	}
	return Decision{Action: Schedule, Next: Scheduled{UID: uid, Node: node, Created: now, FireAt: trigger, Seconds: secs, Taint: which},
		Why: fmt.Sprintf("tolerates %s for %ds", taintString(which), secs)}
}

func taintString(t *nodev1.Taint) string {
	if t == nil {
		return "<none>"
	}
	s := t.GetKey()
	if t.GetValue() != "" {
		s += "=" + t.GetValue()
	}
	return s + ":" + t.GetEffect()
}
