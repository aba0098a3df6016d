// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package convert

import (
	"encoding/json"

	"google.golang.org/protobuf/types/known/timestamppb"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// fastNode is Node without reflection: a list of 100,000 nodes spent most
// of its time in the generic path (docs/benchmarks.md). The test checks
// it against the generic conversion field by field.
func fastNode(n *nodev1.Node) *corev1.Node {
	out := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	out.ObjectMeta = objectMeta(n.GetMetadata())
	sp := n.GetSpec()
	out.Spec.Unschedulable, out.Spec.ProviderID = sp.GetUnschedulable(), sp.GetProviderId()
	for _, t := range sp.GetTaints() {
		out.Spec.Taints = append(out.Spec.Taints, corev1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect()), TimeAdded: timePtr(t.GetTimeAdded())})
	}
	st := n.GetStatus()
	out.Status.Capacity, out.Status.Allocatable = resources(st.GetCapacity()), resources(st.GetAllocatable())
	for _, c := range st.GetConditions() {
		out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(c.GetType()), Status: corev1.ConditionStatus(c.GetStatus()),
			LastHeartbeatTime: timeOf(c.GetLastHeartbeatTime()), LastTransitionTime: timeOf(c.GetLastTransitionTime()), Reason: c.GetReason(), Message: c.GetMessage()})
	}
	for _, a := range st.GetAddresses() {
		out.Status.Addresses = append(out.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.GetType()), Address: a.GetAddress()})
	}
	if e := st.GetDaemonEndpoints().GetReporterEndpoint(); e != nil {
		out.Status.DaemonEndpoints.KubeletEndpoint.Port = e.GetPort()
	}
	if i := st.GetNodeInfo(); i != nil {
		out.Status.NodeInfo = corev1.NodeSystemInfo{MachineID: i.GetMachineId(), SystemUUID: i.GetSystemUuid(), BootID: i.GetBootId(),
			KernelVersion: i.GetKernelVersion(), OSImage: i.GetOsImage(), ContainerRuntimeVersion: i.GetContainerRuntimeVersion(),
			KubeletVersion: i.GetReporterVersion(), OperatingSystem: i.GetOperatingSystem(), Architecture: i.GetArchitecture()}
	}
	uidOf(&out.ObjectMeta, "node")
	return out
}

func objectMeta(m *nodev1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: types.UID(m.GetUid()), Labels: m.GetLabels(), Annotations: m.GetAnnotations(),
		CreationTimestamp: timeOf(m.GetCreationTimestamp()), ResourceVersion: m.GetResourceVersion(), DeletionTimestamp: timePtr(m.GetDeletionTimestamp()),
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds, Generation: m.GetGeneration(), ManagedFields: managedFields(m.GetManagedFields())}
	for _, r := range m.GetOwnerReferences() {
		c := r.GetController()
		out.OwnerReferences = append(out.OwnerReferences, metav1.OwnerReference{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Name: r.GetName(), UID: types.UID(r.GetUid()), Controller: &c})
	}
	return out
}

// managedFields are the stored managers' fields as the Kubernetes API
// serves them (nil when none, so objects nobody applied to carry none).
func managedFields(in []*nodev1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(in) == 0 {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, 0, len(in))
	for _, e := range in {
		me := metav1.ManagedFieldsEntry{Manager: e.GetManager(), Operation: metav1.ManagedFieldsOperationType(e.GetOperation()),
			APIVersion: e.GetApiVersion(), Time: timePtr(e.GetTime()), FieldsType: e.GetFieldsType(), Subresource: e.GetSubresource()}
		if f := e.GetFieldsV1(); f != nil {
			// A set of fields is JSON objects all the way down: the map
			// form loses nothing.
			if raw, err := json.Marshal(f.AsMap()); err == nil {
				me.FieldsV1 = metav1.NewFieldsV1(string(raw))
			}
		}
		out = append(out, me)
	}
	return out
}

// ManagedFields is the Kubernetes API's managedFields as nodepulse
// stores them (nil for none).
func ManagedFields(in []metav1.ManagedFieldsEntry) ([]*nodev1.ManagedFieldsEntry, error) {
	if len(in) == 0 {
		return nil, nil
	}
	var m nodev1.ObjectMeta
	if err := FromKube(metav1.ObjectMeta{ManagedFields: in}, &m); err != nil {
		return nil, err
	}
	return m.ManagedFields, nil
}

// timeOf keeps microseconds, as the generic path does.
func timeOf(t *timestamppb.Timestamp) metav1.Time {
	if t == nil {
		return metav1.Time{}
	}
	return metav1.Time{Time: t.AsTime().UTC().Truncate(1000).Local()}
}

func timePtr(t *timestamppb.Timestamp) *metav1.Time {
	if t == nil {
		return nil
	}
	v := timeOf(t)
	return &v
}

func resources(m map[string]string) corev1.ResourceList {
	if m == nil {
		return nil
	}
	out := make(corev1.ResourceList, len(m))
	for k, v := range m {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[corev1.ResourceName(k)] = q
		}
	}
	return out
}

// fastLease is the stored lease l (nil: none) without reflection: a list
// of 100,000 leases spent most of its time in the generic path. The test
// checks it against genericLease.
func fastLease(l *nodev1.Lease) *coordinationv1.Lease {
	out := &coordinationv1.Lease{}
	if m := l.GetMetadata(); m != nil {
		out.ObjectMeta = objectMeta(m)
	}
	sp := l.GetSpec()
	if h := sp.GetHolderIdentity(); h != "" {
		out.Spec.HolderIdentity = &h
	}
	if d := sp.GetLeaseDurationSeconds(); d != 0 {
		out.Spec.LeaseDurationSeconds = &d
	}
	out.Spec.RenewTime, out.Spec.AcquireTime = microPtr(sp.GetRenewTime()), microPtr(sp.GetAcquireTime())
	return out
}

// genericLease is fastLease through the generic path.
func genericLease(l *nodev1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	if l == nil {
		l = &nodev1.Lease{}
	}
	return out, into(l, out, nil)
}

func microPtr(t *timestamppb.Timestamp) *metav1.MicroTime {
	if t == nil {
		return nil
	}
	return &metav1.MicroTime{Time: t.AsTime().UTC().Truncate(1000).Local()}
}
