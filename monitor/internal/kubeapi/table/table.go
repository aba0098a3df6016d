// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package table renders objects as server-side tables (meta.k8s.io/v1
// Table) with the columns kube-apiserver prints for the same kinds, so
// `kubectl get` shows what its users know.
package table

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Age renders the time since t as kubectl does; zero is "<unknown>".
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func col(name, typ, desc string, priority int32) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: priority}
	if name == "Name" {
		c.Format = "name"
	}
	return c
}

// New returns an empty table with the columns of resource ("nodes",
// "pods", "leases", "events", "namespaces"; anything else: Name, Age).
func New(resource string) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Table"}}
	name := col("Name", "string", "Name must be unique within a namespace.", 0)
	age := col("Age", "string", "Time since the object was created.", 0)
	switch resource {
	case "nodes":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Status", "string", "The status of the node", 0),
			col("Roles", "string", "The roles of the node", 0), age,
			col("Version", "string", "Kubelet Version reported by the node.", 0),
			col("Internal-IP", "string", "List of internal IPs for the node.", 1),
			col("External-IP", "string", "List of external IPs for the node.", 1),
			col("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
			col("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
			col("Container-Runtime", "string", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1)}
	case "pods":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", 0),
			col("Status", "string", "The aggregate status of the containers in this pod.", 0),
			col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0), age,
			col("IP", "string", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1),
			col("Node", "string", "NodeName is a request to schedule this pod onto a specific node.", 1),
			col("Nominated Node", "string", "nominatedNodeName is set when this pod preempts other pods on the node.", 1),
			col("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness.", 1)}
	case "leases":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease.", 0), age}
	case "events":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{
			col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded.", 0),
			col("Type", "string", "Type of this event (Normal, Warning).", 0),
			col("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0),
			col("Object", "string", "The object that this event is about.", 0),
			col("Message", "string", "A human-readable description of the status of this operation.", 0),
			col("Subobject", "string", "The field of the object this event is about.", 1),
			col("Source", "string", "The component reporting this event.", 1),
			col("First Seen", "string", "The time at which the event was first recorded.", 1),
			col("Count", "string", "The number of times this event has occurred.", 1),
			{Name: "Name", Type: "string", Format: "name", Description: "Name of the event.", Priority: 1}}
	case "namespaces":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Status", "string", "The status of the namespace", 0), age}
	case "replicasets":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Desired", "integer", "Number of desired pods. This is a pointer to distinguish between explicit zero and unspecified.", 0),
			col("Current", "integer", "Replicas is the most recently observed number of replicas.", 0),
			col("Ready", "integer", "The number of ready replicas for this replica set.", 0), age,
			col("Selector", "string", "Selector is a label query over pods that should match the replica count.", 1)}
	case "statefulsets":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Ready", "string", "Number of the pod with ready state", 0), age}
	case "daemonsets":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Desired", "integer", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).", 0),
			col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.", 0),
			col("Ready", "integer", "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.", 0),
			col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod", 0),
			col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)", 0),
			col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node.", 0), age,
			col("Selector", "string", "A label query over pods that are managed by the daemon set.", 1)}
	case "poddisruptionbudgets":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name,
			col("Min Available", "string", "The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".", 0),
			col("Max Unavailable", "string", "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".", 0),
			col("Allowed Disruptions", "integer", "Number of pod disruptions that are currently allowed.", 0), age}
	default:
		t.ColumnDefinitions = []metav1.TableColumnDefinition{name, age}
	}
	return t
}

// Add appends the row of obj (one of the k8s.io/api types) to t; the row
// carries the object's metadata for kubectl's NAMESPACE and label columns.
func Add(t *metav1.Table, now time.Time, obj runtime.Object, md metav1.ObjectMeta) {
	row := metav1.TableRow{Object: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: md}}}
	switch o := obj.(type) {
	case *corev1.Node:
		row.Cells = nodeCells(now, o)
	case *corev1.Pod:
		row.Cells, row.Conditions = podCells(now, o)
	case *coordinationv1.Lease:
		holder := ""
		if o.Spec.HolderIdentity != nil {
			holder = *o.Spec.HolderIdentity
		}
		row.Cells = []any{o.Name, holder, Age(now, o.CreationTimestamp.Time)}
	case *corev1.Event:
		row.Cells = eventCells(now, o)
	case *corev1.Namespace:
		row.Cells = []any{o.Name, string(o.Status.Phase), Age(now, o.CreationTimestamp.Time)}
	case *appsv1.ReplicaSet:
		row.Cells = []any{o.Name, int64(ptrOr(o.Spec.Replicas, 1)), int64(o.Status.Replicas), int64(o.Status.ReadyReplicas), Age(now, o.CreationTimestamp.Time), selectorString(o.Spec.Selector)}
	case *appsv1.StatefulSet:
		row.Cells = []any{o.Name, fmt.Sprintf("%d/%d", o.Status.ReadyReplicas, ptrOr(o.Spec.Replicas, 1)), Age(now, o.CreationTimestamp.Time)}
	case *appsv1.DaemonSet:
		s := o.Status
		row.Cells = []any{o.Name, int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled), int64(s.NumberReady), int64(s.UpdatedNumberScheduled),
			int64(s.NumberAvailable), mapString(o.Spec.Template.Spec.NodeSelector), Age(now, o.CreationTimestamp.Time), selectorString(o.Spec.Selector)}
	case *policyv1.PodDisruptionBudget:
		row.Cells = []any{o.Name, intOrNA(o.Spec.MinAvailable), intOrNA(o.Spec.MaxUnavailable), int64(o.Status.DisruptionsAllowed), Age(now, o.CreationTimestamp.Time)}
	default:
		row.Cells = []any{md.Name, Age(now, md.CreationTimestamp.Time)}
	}
	t.Rows = append(t.Rows, row)
}

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

// intOrNA is a budget's bound as kubectl prints it: N/A when unset.
func intOrNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}

func selectorString(s *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil || sel.Empty() {
		return "<none>"
	}
	return sel.String()
}

// mapString is a node selector as kube-apiserver prints it: k=v,k=v
// sorted, <none> when empty.
func mapString(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	return labels.SelectorFromSet(m).String()
}

const labelNodeRolePrefix = "node-role.kubernetes.io/"

func nodeCells(now time.Time, n *corev1.Node) []any {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			} else {
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	roles := map[string]bool{}
	for k, v := range n.Labels {
		if r, ok := strings.CutPrefix(k, labelNodeRolePrefix); ok && r != "" {
			roles[r] = true
		}
		if k == "kubernetes.io/role" && v != "" {
			roles[v] = true
		}
	}
	role := "<none>"
	if len(roles) > 0 {
		rs := make([]string, 0, len(roles))
		for r := range roles {
			rs = append(rs, r)
		}
		sort.Strings(rs)
		role = strings.Join(rs, ",")
	}
	addr := func(t corev1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	info := n.Status.NodeInfo
	return []any{n.Name, status, role, Age(now, n.CreationTimestamp.Time), info.KubeletVersion,
		addr(corev1.NodeInternalIP), addr(corev1.NodeExternalIP), unknown(info.OSImage), unknown(info.KernelVersion), unknown(info.ContainerRuntimeVersion)}
}

// podCells follows kube-apiserver's printPod: READY counts the ready,
// running containers of the spec (a pod without containers, as nodepulse's
// own records are, counts its Ready condition as its one container);
// STATUS is the phase, or the pod's reason, or the reason of the last
// container not running, Terminating once deleted.
func podCells(now time.Time, p *corev1.Pod) ([]any, []metav1.TableRowCondition) {
	total, ready, restarts := len(p.Spec.Containers), 0, int32(0)
	status := string(p.Status.Phase)
	if p.Status.Reason != "" {
		status = p.Status.Reason
	}
	if total == 0 {
		total = 1
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = 1
			}
		}
	}
	hasRunning := false
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := p.Status.ContainerStatuses[i]
		restarts += c.RestartCount
		switch st := c.State; {
		case st.Waiting != nil && st.Waiting.Reason != "":
			status = st.Waiting.Reason
		case st.Terminated != nil && st.Terminated.Reason != "":
			status = st.Terminated.Reason
		case st.Terminated != nil && st.Terminated.Signal != 0:
			status = fmt.Sprintf("Signal:%d", st.Terminated.Signal)
		case st.Terminated != nil:
			status = fmt.Sprintf("ExitCode:%d", st.Terminated.ExitCode)
		case c.Ready && st.Running != nil:
			hasRunning = true
			ready++
		}
	}
	if status == "Completed" && hasRunning {
		status = string(corev1.PodRunning)
	}
	if status == "" {
		status = "Pending"
	}
	if p.DeletionTimestamp != nil {
		status = "Terminating"
	}
	var conds []metav1.TableRowCondition
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		conds = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(p.Status.Phase)}}
	}
	none := func(s string) string {
		if s == "" {
			return "<none>"
		}
		return s
	}
	ip := ""
	if len(p.Status.PodIPs) > 0 {
		ip = p.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if n := len(p.Spec.ReadinessGates); n > 0 {
		met := 0
		for _, g := range p.Spec.ReadinessGates {
			for _, c := range p.Status.Conditions {
				if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
					met++
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", met, n)
	}
	return []any{p.Name, fmt.Sprintf("%d/%d", ready, total), status, fmt.Sprint(restarts), Age(now, p.CreationTimestamp.Time),
		none(ip), none(p.Spec.NodeName), none(p.Status.NominatedNodeName), gates}, conds
}

func eventCells(now time.Time, e *corev1.Event) []any {
	last := e.LastTimestamp.Time
	if last.IsZero() {
		last = e.FirstTimestamp.Time
	}
	if last.IsZero() {
		last = e.EventTime.Time
	}
	obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	source := e.Source.Component
	if e.Source.Host != "" {
		source += ", " + e.Source.Host
	}
	return []any{Age(now, last), e.Type, e.Reason, obj, strings.TrimSpace(e.Message),
		e.InvolvedObject.FieldPath, source, Age(now, e.FirstTimestamp.Time), int64(e.Count), e.Name}
}
