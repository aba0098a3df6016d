// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package selectors parses the label and field selectors of list and watch
// requests with apimachinery's grammar and checks field selectors against
// the field labels kube-apiserver supports per kind.
package selectors

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// supported field labels per resource (kube-apiserver's selectable fields
// of the kinds served).
var supported = map[string][]string{
	"nodes":  {"metadata.name", "spec.unschedulable"},
	"pods":   {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
	"events": {"metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
}

// Fields of a resource's objects a field selector may use.
func Fields(resource string) []string {
	if f, ok := supported[resource]; ok {
		return f
	}
	return []string{"metadata.name", "metadata.namespace"}
}

// Selectors of one request.
type Selectors struct {
	Labels labels.Selector
	Fields fields.Selector
}

// Parse reads labelSelector and fieldSelector for resource; the error text
// is kube-apiserver's for an unknown field label.
func Parse(resource, labelSel, fieldSel string) (Selectors, error) {
	ls, err := labels.Parse(labelSel)
	if err != nil {
		return Selectors{}, fmt.Errorf("unable to parse requirement: %w", err)
	}
	fs, err := fields.ParseSelector(fieldSel)
	if err != nil {
		return Selectors{}, fmt.Errorf("invalid field selector: %w", err)
	}
	allowed := Fields(resource)
	for _, r := range fs.Requirements() {
		if !slices.Contains(allowed, r.Field) {
			q := make([]string, len(allowed))
			for i, a := range allowed {
				q[i] = strconv.Quote(a)
			}
			return Selectors{}, fmt.Errorf("%q is not a known field selector: only %s", r.Field, strings.Join(q, ", "))
		}
	}
	return Selectors{Labels: ls, Fields: fs}, nil
}

// Everything reports whether the selectors select every object.
func (s Selectors) Everything() bool {
	return (s.Labels == nil || s.Labels.Empty()) && (s.Fields == nil || s.Fields.Empty())
}

// LabelString is the label selector as text ("" for none).
func (s Selectors) LabelString() string {
	if s.Labels == nil {
		return ""
	}
	return s.Labels.String()
}

// RequiredField returns the value an exact requirement on field demands
// ("", false when there is none), to narrow a list before filtering.
func (s Selectors) RequiredField(field string) (string, bool) {
	if s.Fields == nil {
		return "", false
	}
	return s.Fields.RequiresExactMatch(field)
}

// Matches reports whether an object with these labels and field values is
// selected.
func (s Selectors) Matches(l map[string]string, f fields.Set) bool {
	if s.Labels != nil && !s.Labels.Matches(labels.Set(l)) {
		return false
	}
	return s.Fields == nil || s.Fields.Matches(f)
}

// NodeFields are a node's selectable fields.
func NodeFields(n *corev1.Node) fields.Set {
	return fields.Set{"metadata.name": n.Name, "spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
}

// PodFields are a pod's selectable fields.
func PodFields(p *corev1.Pod) fields.Set {
	ip := ""
	if len(p.Status.PodIPs) > 0 {
		ip = p.Status.PodIPs[0].IP
	}
	return fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName,
		"spec.restartPolicy": string(p.Spec.RestartPolicy), "spec.schedulerName": p.Spec.SchedulerName,
		"spec.serviceAccountName": p.Spec.ServiceAccountName, "spec.hostNetwork": strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase": string(p.Status.Phase), "status.podIP": ip, "status.nominatedNodeName": p.Status.NominatedNodeName}
}

// EventFields are an event's selectable fields.
func EventFields(e *corev1.Event) fields.Set {
	o := e.InvolvedObject
	return fields.Set{"metadata.name": e.Name, "metadata.namespace": e.Namespace,
		"involvedObject.kind": o.Kind, "involvedObject.namespace": o.Namespace, "involvedObject.name": o.Name,
		"involvedObject.uid": string(o.UID), "involvedObject.apiVersion": o.APIVersion,
		"involvedObject.resourceVersion": o.ResourceVersion, "involvedObject.fieldPath": o.FieldPath,
		"reason": e.Reason, "reportingComponent": e.ReportingController, "source": e.Source.Component, "type": e.Type}
}

// LeaseFields are a lease's selectable fields.
func LeaseFields(l *coordinationv1.Lease) fields.Set {
	return fields.Set{"metadata.name": l.Name, "metadata.namespace": l.Namespace}
}

// MetaFields are the fields every object has.
func MetaFields(name, namespace string) fields.Set {
	return fields.Set{"metadata.name": name, "metadata.namespace": namespace}
}

// Sorted returns the keys of m in order (stable output).
func Sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
