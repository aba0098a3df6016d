// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package convert

import (
	"encoding/json"
	"fmt"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	npappsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	nppolicyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

// NodeLeaseNamespace holds the nodes' leases, as in Kubernetes.
const NodeLeaseNamespace = "kube-node-lease"

// EventNamespace holds the events about nodes (cluster-scoped objects).
const EventNamespace = "default"

// uidOf gives objects stored without a UID a stable one: kind/namespace/name.
func uidOf(md *metav1.ObjectMeta, kind string) {
	if md.UID == "" {
		md.UID = types.UID(kind + "/" + md.Namespace + "/" + md.Name)
	}
}

// Node is n as a core/v1 Node. The reporter stands in for the kubelet: its
// version is the kubelet version, its admin port the kubelet endpoint.
func Node(n *nodev1.Node) (*corev1.Node, error) { return fastNode(n), nil }

// genericNode is Node through the generic path (the reference fastNode is
// tested against).
func genericNode(n *nodev1.Node) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := into(n, out, func(m map[string]any) {
		st := sub(m, "status")
		if info, ok := st["nodeInfo"].(map[string]any); ok {
			info["kubeletVersion"] = info["reporterVersion"]
		}
		if de, ok := st["daemonEndpoints"].(map[string]any); ok {
			st["daemonEndpoints"] = map[string]any{"kubeletEndpoint": de["reporterEndpoint"]}
		}
	})
	if err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	uidOf(&out.ObjectMeta, "node")
	return out, nil
}

// Pod is p as a core/v1 Pod. nodepulse pods have no containers; READY is
// derived from the Ready condition by the table.
func Pod(p *podv1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	if err := into(p, out, nil); err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	uidOf(&out.ObjectMeta, "pod")
	return out, nil
}

// Lease is a node's lease in kube-node-lease, renewTime the newest the
// monitor knows (stored checkpoint or live feed, whichever is later).
func Lease(name string, r *nodev1.GetLeaseResponse) (*coordinationv1.Lease, error) {
	out := fastLease(r.GetLease())
	out.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	out.Name, out.Namespace = name, NodeLeaseNamespace
	if out.Spec.HolderIdentity == nil {
		out.Spec.HolderIdentity = &name
	}
	if rt := r.GetObservedRenewTime(); rt != nil && (out.Spec.RenewTime == nil || rt.AsTime().After(out.Spec.RenewTime.Time)) {
		out.Spec.RenewTime = &metav1.MicroTime{Time: rt.AsTime()}
	}
	if out.CreationTimestamp.IsZero() && out.Spec.AcquireTime != nil {
		out.CreationTimestamp = metav1.Time{Time: out.Spec.AcquireTime.Time}
	}
	if out.ResourceVersion == "" && out.Spec.RenewTime != nil {
		// A live renewal is never stored; its time orders it.
		out.ResourceVersion = "0"
	}
	out.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID("node//" + name)}}
	uidOf(&out.ObjectMeta, "lease")
	return out, nil
}

// Event is e as a core/v1 Event; events about nodes live in "default".
func Event(e *nodev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := into(e, out, func(m map[string]any) {
		if s, ok := m["source"].(string); ok {
			m["source"] = map[string]any{"component": s}
		}
	})
	if err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
	if out.Namespace == "" {
		out.Namespace = EventNamespace
	}
	if out.Count == 0 {
		out.Count = 1
	}
	if out.CreationTimestamp.IsZero() {
		out.CreationTimestamp = out.FirstTimestamp
	}
	uidOf(&out.ObjectMeta, "event")
	return out, nil
}

// PodDisruptionBudget is b as a policy/v1 PodDisruptionBudget.
func PodDisruptionBudget(b *nppolicyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudget, error) {
	out := &policyv1.PodDisruptionBudget{}
	err := into(b, out, func(m map[string]any) {
		spec := sub(m, "spec")
		intOrString(spec, "minAvailable")
		intOrString(spec, "maxUnavailable")
	})
	if err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
	uidOf(&out.ObjectMeta, "pdb")
	return out, nil
}

// Workload is the apps/v1 object of w (a ReplicaSet, StatefulSet or
// DaemonSet).
func Workload(w *npappsv1.Workload) (any, error) {
	switch k := w.GetKind().(type) {
	case *npappsv1.Workload_ReplicaSet:
		out := &appsv1.ReplicaSet{}
		if err := into(k.ReplicaSet, out, nil); err != nil {
			return nil, err
		}
		out.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}
		uidOf(&out.ObjectMeta, "replicaset")
		return out, nil
	case *npappsv1.Workload_StatefulSet:
		out := &appsv1.StatefulSet{}
		if err := into(k.StatefulSet, out, nil); err != nil {
			return nil, err
		}
		out.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
		uidOf(&out.ObjectMeta, "statefulset")
		return out, nil
	case *npappsv1.Workload_DaemonSet:
		out := &appsv1.DaemonSet{}
		if err := into(k.DaemonSet, out, nil); err != nil {
			return nil, err
		}
		out.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
		uidOf(&out.ObjectMeta, "daemonset")
		return out, nil
	}
	return nil, nil
}

// Namespace is a namespace that exists because something lives in it.
func Namespace(name string, created time.Time) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("namespace//" + name), CreationTimestamp: metav1.Time{Time: created}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

// Taint is a Kubernetes taint as nodepulse's.
func Taint(t corev1.Taint) *nodev1.Taint {
	return &nodev1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)}
}

// FromKube reads a k8s.io/api object (or its unstructured map) into its
// nodepulse message: the messages keep Kubernetes' JSON names, so the
// object's JSON is the message's, less the fields nodepulse does not keep.
func FromKube(obj any, m proto.Message) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return fmt.Errorf("%T: %w", obj, err)
	}
	return nil
}

// FromWorkload is an apps/v1 ReplicaSet, StatefulSet or DaemonSet as
// nodepulse's owner of kind k.
func FromWorkload(k npappsv1.WorkloadKind, obj any) (*npappsv1.Workload, error) {
	switch k {
	case npappsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET:
		m := &npappsv1.ReplicaSet{}
		if err := FromKube(obj, m); err != nil {
			return nil, err
		}
		return &npappsv1.Workload{Kind: &npappsv1.Workload_ReplicaSet{ReplicaSet: m}}, nil
	case npappsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET:
		m := &npappsv1.StatefulSet{}
		if err := FromKube(obj, m); err != nil {
			return nil, err
		}
		return &npappsv1.Workload{Kind: &npappsv1.Workload_StatefulSet{StatefulSet: m}}, nil
	case npappsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET:
		m := &npappsv1.DaemonSet{}
		if err := FromKube(obj, m); err != nil {
			return nil, err
		}
		return &npappsv1.Workload{Kind: &npappsv1.Workload_DaemonSet{DaemonSet: m}}, nil
	}
	return nil, fmt.Errorf("unknown workload kind %v", k)
}
