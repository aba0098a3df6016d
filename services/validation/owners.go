// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

// Label selector operators, StatefulSet pod management policies and
// disruption budget eviction policies, spelled as in Kubernetes.
const (
	SelectorOpIn           = "In"
	SelectorOpNotIn        = "NotIn"
	SelectorOpExists       = "Exists"
	SelectorOpDoesNotExist = "DoesNotExist"

	OrderedReadyPodManagement = "OrderedReady"
	ParallelPodManagement     = "Parallel"

	IfHealthyBudget = "IfHealthyBudget"
	AlwaysAllow     = "AlwaysAllow"
)

// Bounds of owner and budget input.
const (
	// MaxSelectorTerms bounds match_labels plus match_expressions.
	MaxSelectorTerms = 64
	// MaxSelectorValues bounds the values of one requirement.
	MaxSelectorValues = 64
	// MaxVolumes bounds a pod's volumes.
	MaxVolumes = 128
	// MaxReplicas bounds an owner's replicas, so one typo cannot ask the
	// controllers for billions of pods.
	MaxReplicas                = 100000
	maxTemplateAnnotationBytes = MaxPodAnnotationBytes
)

// maxStatefulSetName leaves room for "-<ordinal>" up to MaxReplicas in a
// 63-character label value.
var maxStatefulSetName = DNS1123LabelMaxLength - 1 - len(strconv.Itoa(MaxReplicas))

// LabelSelector checks a structured selector: qualified-name keys, label
// values, the four operators with their value rules (In and NotIn need
// values, Exists and DoesNotExist take none), as Kubernetes'
// ValidateLabelSelector.
func LabelSelector(field string, sel *nodev1.LabelSelector) List {
	if sel == nil {
		return nil
	}
	var l List
	if n := len(sel.GetMatchLabels()) + len(sel.GetMatchExpressions()); n > MaxSelectorTerms {
		return List{fieldErr(field, "must have at most %d terms (got %d)", MaxSelectorTerms, n)}
	}
	l = append(l, Labels(field+".matchLabels", sel.GetMatchLabels(), MaxSelectorTerms)...)
	for i, r := range sel.GetMatchExpressions() {
		f := index(field+".matchExpressions", i)
		if r == nil {
			l.add(fieldErr(f, "must not be null"))
			continue
		}
		l.add(QualifiedName(f+".key", r.GetKey()))
		switch r.GetOperator() {
		case SelectorOpIn, SelectorOpNotIn:
			if len(r.GetValues()) == 0 {
				l.add(fieldErr(f+".values", "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case SelectorOpExists, SelectorOpDoesNotExist:
			if len(r.GetValues()) > 0 {
				l.add(fieldErr(f+".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		default:
			l.add(fieldErr(f+".operator", "%q is not a valid selector operator: In, NotIn, Exists or DoesNotExist", truncate(r.GetOperator())))
		}
		if len(r.GetValues()) > MaxSelectorValues {
			l.add(fieldErr(f+".values", "must have at most %d values (got %d)", MaxSelectorValues, len(r.GetValues())))
			continue
		}
		for j, v := range r.GetValues() {
			l.add(LabelValue(index(f+".values", j), v))
		}
	}
	return l
}

// SelectorEmpty reports whether sel has no terms (it then matches every
// object, or, when nil, none).
func SelectorEmpty(sel *nodev1.LabelSelector) bool {
	return len(sel.GetMatchLabels()) == 0 && len(sel.GetMatchExpressions()) == 0
}

// SelectorMatches reports whether labels satisfy sel, as Kubernetes'
// LabelSelectorAsSelector(sel).Matches(labels): a nil selector matches
// nothing, an empty one everything. The matching lives beside the check so
// the two read the operators alike; sel must have passed LabelSelector (an
// unknown operator matches nothing).
func SelectorMatches(sel *nodev1.LabelSelector, labels map[string]string) bool {
	if sel == nil {
		return false
	}
	for k, v := range sel.GetMatchLabels() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range sel.GetMatchExpressions() {
		v, ok := labels[r.GetKey()]
		switch r.GetOperator() {
		case SelectorOpIn:
			if !ok || !slices.Contains(r.GetValues(), v) {
				return false
			}
		case SelectorOpNotIn:
			if ok && slices.Contains(r.GetValues(), v) {
				return false
			}
		case SelectorOpExists:
			if !ok {
				return false
			}
		case SelectorOpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// FormatSelector renders sel in the label selector string syntax
// ("app=web,tier in (a,b),!canary"), sorted, for listings.
func FormatSelector(sel *nodev1.LabelSelector) string {
	if sel == nil {
		return "<none>"
	}
	var parts []string
	for _, k := range sortedKeys(sel.GetMatchLabels()) {
		parts = append(parts, k+"="+sel.GetMatchLabels()[k])
	}
	for _, r := range sel.GetMatchExpressions() {
		switch r.GetOperator() {
		case SelectorOpIn:
			parts = append(parts, r.GetKey()+" in ("+strings.Join(r.GetValues(), ",")+")")
		case SelectorOpNotIn:
			parts = append(parts, r.GetKey()+" notin ("+strings.Join(r.GetValues(), ",")+")")
		case SelectorOpExists:
			parts = append(parts, r.GetKey())
		case SelectorOpDoesNotExist:
			parts = append(parts, "!"+r.GetKey())
		}
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, ",")
}

// objectMeta checks the metadata of an owner or budget to create:
// namespace, name, labels, annotations, and no output-only fields.
func objectMeta(field string, md *nodev1.ObjectMeta, lim Limits) List {
	if md == nil {
		return List{fieldErr(field, "must be set (namespace and name)")}
	}
	var l List
	l.add(Namespace(field+".namespace", md.GetNamespace()))
	l.add(DNSSubdomain(field+".name", md.GetName()))
	l = append(l, Labels(field+".labels", md.GetLabels(), lim.MaxLabels)...)
	l = append(l, annotations(field+".annotations", md.GetAnnotations())...)
	if md.GetDeletionTimestamp() != nil {
		l.add(fieldErr(field+".deletionTimestamp", "must not be set: it is output only"))
	}
	return l
}

func annotations(field string, m map[string]string) List {
	var l List
	size := 0
	for _, k := range sortedKeys(m) {
		size += len(k) + len(m[k])
		if fe := QualifiedName(field+"["+k+"]", k); fe != nil {
			l.add(fieldErr(fe.Field, "key: %s", fe.Reason))
		}
	}
	if size > maxTemplateAnnotationBytes {
		l.add(fieldErr(field, "must be no more than %d bytes in total (got %d)", maxTemplateAnnotationBytes, size))
	}
	return l
}

// Volumes checks a pod's volumes: unique DNS-label names, and the emptyDir
// fields (medium "" or "Memory", a non-negative size limit).
func Volumes(field string, vs []*podv1.Volume) List {
	if len(vs) > MaxVolumes {
		return List{fieldErr(field, "must have at most %d volumes (got %d)", MaxVolumes, len(vs))}
	}
	var l List
	seen := map[string]bool{}
	for i, v := range vs {
		f := index(field, i)
		if v == nil {
			l.add(fieldErr(f, "must not be null"))
			continue
		}
		if fe := DNSSubdomain(f+".name", v.GetName()); fe != nil {
			l.add(fe)
		} else if strings.Contains(v.GetName(), ".") || len(v.GetName()) > DNS1123LabelMaxLength {
			l.add(fieldErr(f+".name", "%q is not a DNS label", truncate(v.GetName())))
		}
		if seen[v.GetName()] {
			l.add(fieldErr(f+".name", "duplicate volume name %q", truncate(v.GetName())))
		}
		seen[v.GetName()] = true
		if ed := v.GetEmptyDir(); ed != nil {
			if m := ed.GetMedium(); m != "" && m != "Memory" {
				l.add(fieldErr(f+".emptyDir.medium", "%q is not a storage medium: \"\" or \"Memory\"", truncate(m)))
			}
			if s := ed.GetSizeLimit(); s != "" {
				l.add(Quantity(f+".emptyDir.sizeLimit", "ephemeral-storage", s))
			}
		}
	}
	return l
}

// PodTemplate checks an owner's pod template: its metadata (labels and
// annotations; name and namespace are assigned per pod), tolerations,
// volumes and grace period.
func PodTemplate(field string, t *podv1.PodTemplateSpec, lim Limits) List {
	if t == nil {
		return List{fieldErr(field, "must be set")}
	}
	var l List
	md := t.GetMetadata()
	l = append(l, Labels(field+".metadata.labels", md.GetLabels(), lim.MaxLabels)...)
	l = append(l, annotations(field+".metadata.annotations", md.GetAnnotations())...)
	if md.GetDeletionTimestamp() != nil {
		l.add(fieldErr(field+".metadata.deletionTimestamp", "must not be set: it is output only"))
	}
	sp := t.GetSpec()
	if nn := sp.GetNodeName(); nn != "" {
		l.add(NodeName(field+".spec.nodeName", nn))
	}
	if sp != nil && sp.TerminationGracePeriodSeconds != nil && sp.GetTerminationGracePeriodSeconds() < 0 {
		l.add(fieldErr(field+".spec.terminationGracePeriodSeconds", "must not be negative (got %s)", strconv.FormatInt(sp.GetTerminationGracePeriodSeconds(), 10)))
	}
	l = append(l, Tolerations(field+".spec.tolerations", sp.GetTolerations(), lim)...)
	l = append(l, Volumes(field+".spec.volumes", sp.GetVolumes())...)
	return l
}

// ownerSpec checks what every owner has: a non-empty selector that the
// template's labels match (Kubernetes refuses a template its own selector
// would not select: the owner would create pods for ever).
func ownerSpec(field, kind string, sel *nodev1.LabelSelector, t *podv1.PodTemplateSpec, lim Limits) List {
	var l List
	switch {
	case sel == nil || SelectorEmpty(sel):
		l.add(fieldErr(field+".selector", "empty selector is invalid for a %s: it would select every pod of the namespace", kind))
	default:
		l = append(l, LabelSelector(field+".selector", sel)...)
	}
	tl := PodTemplate(field+".template", t, lim)
	l = append(l, tl...)
	if len(l) == 0 && !SelectorMatches(sel, t.GetMetadata().GetLabels()) {
		l.add(fieldErr(field+".template.metadata.labels", "`selector` does not match template `labels` (selector %s)", FormatSelector(sel)))
	}
	return l
}

func replicas(field string, r *int32) *FieldError {
	switch {
	case r == nil:
		return nil
	case *r < 0:
		return fieldErr(field, "must be greater than or equal to 0 (got %d)", *r)
	case *r > MaxReplicas:
		return fieldErr(field, "must be no more than %d (got %d)", MaxReplicas, *r)
	}
	return nil
}

// Replicas checks a replica count to scale to.
func Replicas(field string, r int32) *FieldError { return replicas(field, &r) }

// ReplicaSet checks a ReplicaSet to create; paths start with field
// ("workload.replicaSet").
func ReplicaSet(field string, rs *appsv1.ReplicaSet, lim Limits) List {
	if rs == nil {
		return List{fieldErr(field, "must be set")}
	}
	l := objectMeta(field+".metadata", rs.GetMetadata(), lim)
	if rs.GetSpec() == nil {
		return append(l, fieldErr(field+".spec", "must be set (selector and template)"))
	}
	l.add(replicas(field+".spec.replicas", rs.GetSpec().Replicas))
	return append(l, ownerSpec(field+".spec", "ReplicaSet", rs.GetSpec().GetSelector(), rs.GetSpec().GetTemplate(), lim)...)
}

// StatefulSet checks a StatefulSet to create. Its pods are named
// <name>-<ordinal>, so the name leaves room for the ordinal within a DNS
// label (the pod name is also a label value upstream).
func StatefulSet(field string, ss *appsv1.StatefulSet, lim Limits) List {
	if ss == nil {
		return List{fieldErr(field, "must be set")}
	}
	l := objectMeta(field+".metadata", ss.GetMetadata(), lim)
	sp := ss.GetSpec()
	if sp == nil {
		return append(l, fieldErr(field+".spec", "must be set (selector and template)"))
	}
	if n := ss.GetMetadata().GetName(); len(n) > maxStatefulSetName {
		l.add(fieldErr(field+".metadata.name", "must be no more than %d characters (got %d): pod names <name>-<ordinal> must stay valid label values",
			maxStatefulSetName, len(n)))
	}
	l.add(replicas(field+".spec.replicas", sp.Replicas))
	if p := sp.GetPodManagementPolicy(); p != "" && p != OrderedReadyPodManagement && p != ParallelPodManagement {
		l.add(fieldErr(field+".spec.podManagementPolicy", "%q is not a pod management policy: %s or %s", truncate(p), OrderedReadyPodManagement, ParallelPodManagement))
	}
	if s := sp.GetServiceName(); s != "" {
		l.add(DNSSubdomain(field+".spec.serviceName", s))
	}
	return append(l, ownerSpec(field+".spec", "StatefulSet", sp.GetSelector(), sp.GetTemplate(), lim)...)
}

// DaemonSet checks a DaemonSet to create. Its template may not name a node:
// the controller binds one pod to each eligible node.
func DaemonSet(field string, ds *appsv1.DaemonSet, lim Limits) List {
	if ds == nil {
		return List{fieldErr(field, "must be set")}
	}
	l := objectMeta(field+".metadata", ds.GetMetadata(), lim)
	sp := ds.GetSpec()
	if sp == nil {
		return append(l, fieldErr(field+".spec", "must be set (selector and template)"))
	}
	if sp.GetTemplate().GetSpec().GetNodeName() != "" {
		l.add(fieldErr(field+".spec.template.spec.nodeName", "must not be set: a DaemonSet's controller binds one pod to each eligible node"))
	}
	return append(l, ownerSpec(field+".spec", "DaemonSet", sp.GetSelector(), sp.GetTemplate(), lim)...)
}

// IntOrPercent checks a budget's minAvailable or maxUnavailable: a count
// at least 0, or a percentage "N%" with 0 <= N <= 100.
func IntOrPercent(field string, v *policyv1.IntOrString) *FieldError {
	switch x := v.GetValue().(type) {
	case *policyv1.IntOrString_IntValue:
		if x.IntValue < 0 {
			return fieldErr(field, "must be greater than or equal to 0 (got %d)", x.IntValue)
		}
	case *policyv1.IntOrString_StrValue:
		_, err := ParsePercent(x.StrValue)
		if err != nil {
			return fieldErr(field, "%q %v", truncate(x.StrValue), err)
		}
	default:
		return fieldErr(field, "must be a number or a percentage such as \"50%%\"")
	}
	return nil
}

// ParsePercent reads "N%" (0 <= N <= 100) as N.
func ParsePercent(s string) (int, error) {
	num, ok := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || !isPlainInt(num) {
		return 0, errorString("is not a valid percent value: an integer followed by '%', such as \"50%\"")
	}
	if n < 0 || n > 100 {
		return 0, errorString("must be between 0% and 100%")
	}
	return n, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// PodDisruptionBudget checks a budget to create: exactly one of
// minAvailable and maxUnavailable, counts or percentages, the selector
// (empty selects every pod of the namespace, as policy/v1) and the
// unhealthy pod eviction policy.
func PodDisruptionBudget(field string, pdb *policyv1.PodDisruptionBudget, lim Limits) List {
	if pdb == nil {
		return List{fieldErr(field, "must be set")}
	}
	l := objectMeta(field+".metadata", pdb.GetMetadata(), lim)
	sp := pdb.GetSpec()
	f := field + ".spec"
	switch {
	case sp == nil || sp.MinAvailable == nil && sp.MaxUnavailable == nil:
		l.add(fieldErr(f, "exactly one of minAvailable and maxUnavailable must be set"))
	case sp.MinAvailable != nil && sp.MaxUnavailable != nil:
		l.add(fieldErr(f, "minAvailable and maxUnavailable cannot be both set"))
	case sp.MinAvailable != nil:
		l.add(IntOrPercent(f+".minAvailable", sp.MinAvailable))
	default:
		l.add(IntOrPercent(f+".maxUnavailable", sp.MaxUnavailable))
	}
	l = append(l, LabelSelector(f+".selector", sp.GetSelector())...)
	if p := sp.GetUnhealthyPodEvictionPolicy(); p != "" && p != IfHealthyBudget && p != AlwaysAllow {
		l.add(fieldErr(f+".unhealthyPodEvictionPolicy", "%q is not an eviction policy: %s or %s", truncate(p), IfHealthyBudget, AlwaysAllow))
	}
	return l
}
