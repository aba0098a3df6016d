// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"slices"
	"strconv"
	"strings"
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// Pod phases, the mirror pod annotation and the owner kind of static pods,
// as in Kubernetes.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
	PodUnknown   = "Unknown"
	// MirrorPodAnnotation marks a mirror pod; its value is the hash of the
	// static pod it mirrors (kubelet: kubernetes.io/config.mirror).
	MirrorPodAnnotation = "kubernetes.io/config.mirror"
	// OwnerKindNode is the controller owner kind of a mirror pod.
	OwnerKindNode = "Node"
)

// PodPhases are the accepted pod phases.
var PodPhases = []string{PodPending, PodRunning, PodSucceeded, PodFailed, PodUnknown}

// Bounds of pod input from reporters.
const (
	// MaxPodAnnotationBytes bounds keys+values of a pod's annotations
	// (Kubernetes: 256 KiB).
	MaxPodAnnotationBytes = 256 << 10
	// maxUIDLength bounds a uid named in a request.
	maxUIDLength = 128
)

// Namespace checks a namespace: a DNS label (RFC 1123), as Kubernetes
// namespaces.
func Namespace(field, ns string) *FieldError {
	if fe := DNSSubdomain(field, ns); fe != nil {
		return fe
	}
	if strings.Contains(ns, ".") || len(ns) > DNS1123LabelMaxLength {
		return fieldErr(field, "%q is not a DNS label: at most %d lower-case alphanumerics or '-', no dots", truncate(ns), DNS1123LabelMaxLength)
	}
	return nil
}

// podRef checks the namespace, name and uid a request names a pod by.
func podRef(field, ns, name, uid string) List {
	var l List
	l.add(Namespace(field+".namespace", ns))
	l.add(DNSSubdomain(field+".name", name))
	switch {
	case uid == "":
		l.add(fieldErr(field+".uid", "must be set: writes to a pod are conditional on its uid"))
	case len(uid) > maxUIDLength:
		l.add(fieldErr(field+".uid", "must be no more than %d characters", maxUIDLength))
	}
	return l
}

// maxContainerStatuses bounds a reported pod's container statuses (one
// per container; the monitor admits at most 64 containers a pod).
const maxContainerStatuses = 64

// PodStatus checks a pod status: the phase, reason and message bounds, and
// conditions with the node-condition rules (type, status, bounded reason
// and message, times not in the future), unique by type.
func PodStatus(field string, st *podv1.PodStatus, now time.Time, lim Limits) List {
	var l List
	if st == nil {
		return List{fieldErr(field, "must be set")}
	}
	if ph := st.GetPhase(); ph != "" && !slices.Contains(PodPhases, ph) {
		l.add(fieldErr(field+".phase", "%q is not one of %s", truncate(ph), strings.Join(PodPhases, ", ")))
	}
	if len(st.GetReason()) > lim.MaxReasonLength {
		l.add(fieldErr(field+".reason", "must be no more than %d characters (got %d)", lim.MaxReasonLength, len(st.GetReason())))
	}
	if len(st.GetMessage()) > lim.MaxMessageLength {
		l.add(fieldErr(field+".message", "must be no more than %d characters (got %d)", lim.MaxMessageLength, len(st.GetMessage())))
	}
	if n := len(st.GetContainerStatuses()); n > maxContainerStatuses {
		l.add(fieldErr(field+".containerStatuses", "must have at most %d entries (got %d)", maxContainerStatuses, n))
	}
	cs := st.GetConditions()
	if len(cs) > lim.MaxConditions {
		return append(l, fieldErr(field+".conditions", "must have at most %d conditions (got %d)", lim.MaxConditions, len(cs)))
	}
	seen := map[string]bool{}
	for i, c := range cs {
		f := index(field+".conditions", i)
		if c == nil {
			l.add(fieldErr(f, "must not be null"))
			continue
		}
		nc := &nodev1.NodeCondition{Type: c.GetType(), Status: c.GetStatus(), Reason: c.GetReason(), Message: c.GetMessage(), LastTransitionTime: c.GetLastTransitionTime()}
		l = append(l, Condition(f, nc, now, lim)...)
		if c.LastProbeTime != nil {
			l.add(Timestamp(f+".lastProbeTime", c.GetLastProbeTime()))
		}
		if seen[c.GetType()] {
			l.add(fieldErr(f+".type", "duplicate condition type %q", truncate(c.GetType())))
		}
		seen[c.GetType()] = true
	}
	return l
}

// PodStatusUpdate checks a reporter's pod status write; paths start with
// "podStatus.".
func PodStatusUpdate(r *collectorv1.PodStatusUpdate, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("podStatus", "must be set")}
	}
	l := podRef("podStatus", r.GetNamespace(), r.GetName(), r.GetUid())
	return append(l, PodStatus("podStatus.status", r.GetStatus(), now, lim)...)
}

// PodDelete checks a reporter's request to finish a pod's deletion; the
// status written first, when set, must be terminal (the kubelet deletes a
// pod only once the API shows it Failed or Succeeded). Paths start with
// "podDelete.".
func PodDelete(r *collectorv1.PodDelete, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("podDelete", "must be set")}
	}
	l := podRef("podDelete", r.GetNamespace(), r.GetName(), r.GetUid())
	if r.Status != nil {
		l = append(l, PodStatus("podDelete.status", r.GetStatus(), now, lim)...)
		if ph := r.GetStatus().GetPhase(); ph != PodFailed && ph != PodSucceeded {
			l.add(fieldErr("podDelete.status.phase", "%q is not terminal: a pod is deleted once it is Failed or Succeeded", truncate(ph)))
		}
	}
	return l
}

// MirrorPod checks the shape of a mirror pod a reporter asks for: name and
// namespace, labels, annotations (the mirror annotation among them),
// exactly one owner reference, the node as controller, tolerations and
// status. Whether it mirrors the stream's own node is the collector's
// authorisation. Paths start with "mirrorPod.pod.".
func MirrorPod(r *collectorv1.MirrorPod, now time.Time, lim Limits) List {
	p := r.GetPod()
	if p == nil {
		return List{fieldErr("mirrorPod.pod", "must be set")}
	}
	const f = "mirrorPod.pod."
	md := p.GetMetadata()
	if md == nil {
		return List{fieldErr(f+"metadata", "must be set (namespace and name)")}
	}
	var l List
	l.add(Namespace(f+"metadata.namespace", md.GetNamespace()))
	l.add(DNSSubdomain(f+"metadata.name", md.GetName()))
	l = append(l, Labels(f+"metadata.labels", md.GetLabels(), lim.MaxLabels)...)
	size := 0
	keys := make([]string, 0, len(md.GetAnnotations()))
	for k := range md.GetAnnotations() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		size += len(k) + len(md.GetAnnotations()[k])
		if fe := QualifiedName(f+"metadata.annotations["+k+"]", k); fe != nil {
			l.add(fieldErr(fe.Field, "key: %s", fe.Reason))
		}
	}
	if size > MaxPodAnnotationBytes {
		l.add(fieldErr(f+"metadata.annotations", "must be no more than %d bytes in total (got %d)", MaxPodAnnotationBytes, size))
	}
	if md.GetAnnotations()[MirrorPodAnnotation] == "" {
		l.add(fieldErr(f+"metadata.annotations["+MirrorPodAnnotation+"]", "must be set to the static pod's hash: only mirror pods are created by reporters"))
	}
	if md.GetDeletionTimestamp() != nil {
		l.add(fieldErr(f+"metadata.deletionTimestamp", "must not be set: it is output only"))
	}
	refs := md.GetOwnerReferences()
	if len(refs) != 1 {
		l.add(fieldErr(f+"metadata.ownerReferences", "must be exactly the node (kind Node, controller), got %d references", len(refs)))
	} else {
		r := refs[0]
		of := f + "metadata.ownerReferences[0]"
		if r.GetKind() != OwnerKindNode {
			l.add(fieldErr(of+".kind", "must be %q for a mirror pod (got %q)", OwnerKindNode, truncate(r.GetKind())))
		}
		if !r.GetController() {
			l.add(fieldErr(of+".controller", "must be true: the node manages its mirror pods"))
		}
		if r.GetUid() == "" {
			l.add(fieldErr(of+".uid", "must be the node's uid"))
		}
	}
	if p.GetSpec().GetNodeName() == "" {
		l.add(fieldErr(f+"spec.nodeName", "must be the reporter's node"))
	} else {
		l.add(NodeName(f+"spec.nodeName", p.GetSpec().GetNodeName()))
	}
	if sp := p.GetSpec(); sp != nil && sp.TerminationGracePeriodSeconds != nil && sp.GetTerminationGracePeriodSeconds() < 0 {
		l.add(fieldErr(f+"spec.terminationGracePeriodSeconds", "must not be negative (got %s)", strconv.FormatInt(sp.GetTerminationGracePeriodSeconds(), 10)))
	}
	l = append(l, Tolerations(f+"spec.tolerations", p.GetSpec().GetTolerations(), lim)...)
	if p.Status != nil {
		l = append(l, PodStatus(f+"status", p.GetStatus(), now, lim)...)
	}
	return l
}
