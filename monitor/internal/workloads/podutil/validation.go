// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podutil

import (
	"fmt"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"slices"
	"strconv"
	"strings"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Pod input bounds beyond validation.DefaultLimits.
const (
	// maxAnnotationBytes bounds keys+values of annotations (Kubernetes: 256 KiB).
	maxAnnotationBytes = 256 << 10
	maxOwnerRefs       = 16
)

func ferr(field, format string, args ...any) *validation.FieldError {
	return &validation.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ValidateNamespace: a DNS label (RFC 1123), as Kubernetes namespaces.
func ValidateNamespace(field, ns string) *validation.FieldError {
	if fe := validation.DNSSubdomain(field, ns); fe != nil {
		return fe
	}
	if strings.Contains(ns, ".") || len(ns) > validation.DNS1123LabelMaxLength {
		return ferr(field, "%q is not a DNS label: at most %d lower-case alphanumerics or '-', no dots", ns, validation.DNS1123LabelMaxLength)
	}
	return nil
}

// ValidateRef checks the namespace and name a request names a pod by.
func ValidateRef(ns, name string) *validation.FieldError {
	if fe := ValidateNamespace("namespace", ns); fe != nil {
		return fe
	}
	return validation.DNSSubdomain("name", name)
}

// Validate checks a pod to create, with field paths under prefix
// ("pod."), in the JSON names of the API.
func Validate(prefix string, p *podv1.Pod, now time.Time, lim validation.Limits) validation.List {
	var l validation.List
	add := func(fe *validation.FieldError) {
		if fe != nil {
			l = append(l, fe)
		}
	}
	md := p.GetMetadata()
	if md == nil {
		return validation.List{ferr(prefix+"metadata", "must be set (namespace and name)")}
	}
	add(ValidateNamespace(prefix+"metadata.namespace", md.GetNamespace()))
	add(validation.DNSSubdomain(prefix+"metadata.name", md.GetName()))
	l = append(l, validation.Labels(prefix+"metadata.labels", md.GetLabels(), lim.MaxLabels)...)
	size := 0
	for _, k := range sortedKeys(md.GetAnnotations()) {
		size += len(k) + len(md.GetAnnotations()[k])
		if fe := validation.QualifiedName(prefix+"metadata.annotations["+k+"]", k); fe != nil {
			add(ferr(fe.Field, "key: %s", fe.Reason))
		}
	}
	if size > maxAnnotationBytes {
		add(ferr(prefix+"metadata.annotations", "must be no more than %d bytes in total (got %d)", maxAnnotationBytes, size))
	}
	if md.GetDeletionTimestamp() != nil {
		add(ferr(prefix+"metadata.deletionTimestamp", "must not be set: it is output only"))
	}
	if md.DeletionGracePeriodSeconds != nil {
		add(ferr(prefix+"metadata.deletionGracePeriodSeconds", "must not be set: it is output only"))
	}
	refs := md.GetOwnerReferences()
	if len(refs) > maxOwnerRefs {
		add(ferr(prefix+"metadata.ownerReferences", "must have at most %d entries (got %d)", maxOwnerRefs, len(refs)))
	}
	controllers := 0
	for i, r := range refs {
		f := prefix + "metadata.ownerReferences[" + strconv.Itoa(i) + "]"
		if r.GetKind() == "" {
			add(ferr(f+".kind", "must not be empty (e.g. ReplicaSet, StatefulSet, DaemonSet, Job, Node)"))
		}
		if r.GetName() == "" {
			add(ferr(f+".name", "must not be empty"))
		}
		if r.GetController() {
			controllers++
			if controllers > 1 {
				add(ferr(f+".controller", "only one owner reference may be the controller"))
			}
		}
	}
	if nn := p.GetSpec().GetNodeName(); nn != "" {
		add(validation.NodeName(prefix+"spec.nodeName", nn))
	}
	l = append(l, validation.Tolerations(prefix+"spec.tolerations", p.GetSpec().GetTolerations(), lim)...)
	cs := p.GetSpec().GetContainers()
	if len(cs) > maxContainers {
		add(ferr(prefix+"spec.containers", "must have at most %d containers (got %d)", maxContainers, len(cs)))
	}
	names := map[string]bool{}
	for i, c := range cs {
		f := prefix + "spec.containers[" + strconv.Itoa(i) + "]"
		if errs := k8svalidation.IsDNS1123Label(c.GetName()); len(errs) > 0 {
			add(ferr(f+".name", "%s", strings.Join(errs, "; ")))
		}
		if names[c.GetName()] {
			add(ferr(f+".name", "duplicate container name %q", c.GetName()))
		}
		names[c.GetName()] = true
		if len(c.GetImage()) > maxImageLength {
			add(ferr(f+".image", "must be no more than %d characters (got %d)", maxImageLength, len(c.GetImage())))
		}
	}
	if n := len(p.GetSpec().GetReadinessGates()); n > maxContainers {
		add(ferr(prefix+"spec.readinessGates", "must have at most %d entries (got %d)", maxContainers, n))
	}
	l = append(l, validation.Labels(prefix+"spec.nodeSelector", p.GetSpec().GetNodeSelector(), lim.MaxLabels)...)
	l = append(l, ValidateStatus(prefix+"status", p.GetStatus(), now, lim)...)
	return l
}

// ValidateStatus checks a pod status: phase, and conditions with the
// node-condition rules (type, status, bounded reason and message, times not
// in the future), unique by type.
func ValidateStatus(field string, st *podv1.PodStatus, now time.Time, lim validation.Limits) validation.List {
	var l validation.List
	if ph := st.GetPhase(); ph != "" && !slices.Contains(Phases, ph) {
		l = append(l, ferr(field+".phase", "%q is not one of %s", ph, strings.Join(Phases, ", ")))
	}
	cs := st.GetConditions()
	if len(cs) > lim.MaxConditions {
		return append(l, ferr(field+".conditions", "must have at most %d conditions (got %d)", lim.MaxConditions, len(cs)))
	}
	seen := map[string]bool{}
	for i, c := range cs {
		f := field + ".conditions[" + strconv.Itoa(i) + "]"
		if c == nil {
			l = append(l, ferr(f, "must not be null"))
			continue
		}
		nc := &nodev1.NodeCondition{Type: c.GetType(), Status: c.GetStatus(), Reason: c.GetReason(), Message: c.GetMessage(), LastTransitionTime: c.GetLastTransitionTime()}
		l = append(l, validation.Condition(f, nc, now, lim)...)
		if c.LastProbeTime != nil {
			if fe := validation.Timestamp(f+".lastProbeTime", c.GetLastProbeTime()); fe != nil {
				l = append(l, fe)
			}
		}
		if seen[c.GetType()] {
			l = append(l, ferr(f+".type", "duplicate condition type %q", c.GetType()))
		}
		seen[c.GetType()] = true
	}
	return l
}

// maxContainers bounds a pod's containers and readiness gates (upstream
// has no count limit; its 3 MiB request limit bounds them, and nodepulse
// keeps pods in the monitor's memory). maxImageLength is an image
// reference's longest (the registry, path, tag and digest together).
const (
	maxContainers  = 64
	maxImageLength = 4096
)

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
