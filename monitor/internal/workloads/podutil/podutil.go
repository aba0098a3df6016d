// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package podutil owns the pod model the monitor's writers share (the
// PodService API, admission, the lifecycle controller marking pods not
// ready, the evictor): the condition types, phases and the condition update
// rule of Kubernetes, the stored form of a pod, its owner kind, and the
// validation of pods coming in through the API, so all of them read and
// write pods the same way.
package podutil

import (
	"time"

	"google.golang.org/protobuf/proto"

	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// Pod condition types, phases, owner kinds, and the evictor's reason and
// message (spec §7); the deletion ones are services/podlife's, which the
// collector shares.
const (
	Ready                = "Ready"
	DisruptionTarget     = podlife.DisruptionTarget
	ReasonTaintManager   = podlife.ReasonTaintManager
	MessageTaintManager  = podlife.MessageTaintManager
	PhasePending         = podlife.PhasePending
	PhaseRunning         = podlife.PhaseRunning
	PhaseSucceeded       = podlife.PhaseSucceeded
	PhaseFailed          = podlife.PhaseFailed
	PhaseUnknown         = podlife.PhaseUnknown
	OwnerKindStatefulSet = "StatefulSet"
)

// Phases are the accepted pod phases.
var Phases = []string{PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed, PhaseUnknown}

// FindCondition returns the condition of type t, or nil.
func FindCondition(st *podv1.PodStatus, t string) *podv1.PodCondition {
	for _, c := range st.GetConditions() {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// SetCondition is upstream UpdatePodCondition (podlife.SetCondition): the
// transition time is now when the status changes (or the condition is new)
// and kept otherwise; it reports whether anything changed. c is stored as
// given (not copied).
func SetCondition(st *podv1.PodStatus, c *podv1.PodCondition, now time.Time) bool {
	return podlife.SetCondition(st, c, now)
}

// Stored returns a copy of p in the form written to pods/<ns>/<name>: the
// resource version is the store's revision, never part of the value.
func Stored(p *podv1.Pod) *podv1.Pod {
	s := proto.CloneOf(p)
	if s.Metadata != nil {
		s.Metadata.ResourceVersion = ""
	}
	return s
}

// OwnerKind is the kind of the pod's managing owner: the owner reference
// marked controller, else the first one; "" for a bare pod.
func OwnerKind(p *podv1.Pod) string {
	refs := p.GetMetadata().GetOwnerReferences()
	for _, r := range refs {
		if r.GetController() {
			return r.GetKind()
		}
	}
	if len(refs) > 0 {
		return refs[0].GetKind()
	}
	return ""
}
