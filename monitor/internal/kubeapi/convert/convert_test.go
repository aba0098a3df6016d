// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package convert

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	nppolicyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

func TestNode(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	grace := int64(30)
	n, err := Node(&nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, CreationTimestamp: timestamppb.New(at), DeletionGracePeriodSeconds: &grace},
		Spec:     &nodev1.NodeSpec{Unschedulable: true, Taints: []*nodev1.Taint{{Key: "k", Effect: "NoExecute", TimeAdded: timestamppb.New(at)}}},
		Status: &nodev1.NodeStatus{Capacity: map[string]string{"cpu": "2"}, NodeInfo: &nodev1.NodeSystemInfo{ReporterVersion: "v1", MachineId: "m"},
			DaemonEndpoints: &nodev1.NodeDaemonEndpoints{ReporterEndpoint: &nodev1.DaemonEndpoint{Port: 9192}},
			Conditions:      []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastTransitionTime: timestamppb.New(at)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.Kind != "Node" || n.APIVersion != "v1" || n.UID == "" || !n.CreationTimestamp.Time.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("meta %+v", n.ObjectMeta)
	}
	if *n.DeletionGracePeriodSeconds != 30 || !n.Spec.Unschedulable || n.Spec.Taints[0].TimeAdded == nil || n.Spec.Taints[0].Effect != corev1.TaintEffectNoExecute {
		t.Fatalf("spec %+v", n.Spec)
	}
	cpu := n.Status.Capacity[corev1.ResourceCPU]
	if n.Status.NodeInfo.KubeletVersion != "v1" || n.Status.NodeInfo.MachineID != "m" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 9192 || cpu.String() != "2" {
		t.Fatalf("status %+v", n.Status)
	}
}

func TestLeaseAndBudget(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	l, err := Lease("n", &nodev1.GetLeaseResponse{Lease: &nodev1.Lease{Spec: &nodev1.LeaseSpec{LeaseDurationSeconds: 40, RenewTime: timestamppb.New(at)}},
		ObservedRenewTime: timestamppb.New(at.Add(5 * time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	if l.Namespace != NodeLeaseNamespace || *l.Spec.HolderIdentity != "n" || !l.Spec.RenewTime.Time.Equal(at.Add(5*time.Second)) || *l.Spec.LeaseDurationSeconds != 40 {
		t.Fatalf("lease %+v", l)
	}
	b, err := PodDisruptionBudget(&nppolicyv1.PodDisruptionBudget{Metadata: &nodev1.ObjectMeta{Name: "b", Namespace: "ns"},
		Spec: &nppolicyv1.PodDisruptionBudgetSpec{MaxUnavailable: &nppolicyv1.IntOrString{Value: &nppolicyv1.IntOrString_StrValue{StrValue: "50%"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.MaxUnavailable == nil || *b.Spec.MaxUnavailable != intstr.FromString("50%") || b.Spec.MinAvailable != nil {
		t.Fatalf("budget %+v", b.Spec)
	}
}

// TestFastNodeMatchesGeneric: the hand-written node conversion gives what
// the generic one gives.
func TestFastNodeMatchesGeneric(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC))
	grace := int64(30)
	n := &nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: "n", Uid: "u", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}, CreationTimestamp: at,
			ResourceVersion: "7", DeletionTimestamp: at, DeletionGracePeriodSeconds: &grace, Generation: 2,
			OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "v1", Kind: "X", Name: "x", Uid: "ux", Controller: true}},
			ManagedFields: []*nodev1.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Apply", ApiVersion: "v1", Time: at, FieldsType: "FieldsV1",
				FieldsV1: mustStruct(t, map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:a": map[string]any{}}}})}, {Manager: "bare"}}},
		Spec: &nodev1.NodeSpec{Unschedulable: true, ProviderId: "p", Taints: []*nodev1.Taint{{Key: "k", Value: "v", Effect: "NoExecute", TimeAdded: at}, {Key: "k2", Effect: "NoSchedule"}}},
		Status: &nodev1.NodeStatus{Capacity: map[string]string{"cpu": "2", "memory": "24683584Ki"}, Allocatable: map[string]string{"pods": "110"},
			Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastHeartbeatTime: at, LastTransitionTime: at, Reason: "r", Message: "m"}},
			Addresses:  []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "n"}},
			NodeInfo: &nodev1.NodeSystemInfo{MachineId: "m", SystemUuid: "s", BootId: "b", KernelVersion: "k", OsImage: "o", ContainerRuntimeVersion: "c",
				ReporterVersion: "v", OperatingSystem: "linux", Architecture: "amd64"},
			DaemonEndpoints: &nodev1.NodeDaemonEndpoints{ReporterEndpoint: &nodev1.DaemonEndpoint{Port: 9192}}},
	}
	for _, in := range []*nodev1.Node{n, {Metadata: &nodev1.ObjectMeta{Name: "bare"}}} {
		slow, err := genericNode(in)
		if err != nil {
			t.Fatal(err)
		}
		fast := fastNode(in)
		if !equality.Semantic.DeepEqual(slow, fast) {
			t.Fatalf("fast conversion differs:\nfast %+v\nslow %+v", fast, slow)
		}
	}
}

// TestFastLeaseMatchesGeneric: the hand-written lease conversion gives
// what the generic one gives.
func TestFastLeaseMatchesGeneric(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC))
	for _, in := range []*nodev1.Lease{
		nil, {},
		{Metadata: &nodev1.ObjectMeta{Name: "n", ResourceVersion: "9", CreationTimestamp: at, Labels: map[string]string{"a": "b"}},
			Spec:        &nodev1.LeaseSpec{HolderIdentity: "n", LeaseDurationSeconds: 40, RenewTime: at, AcquireTime: at},
			Persistence: &nodev1.LeasePersistence{Collector: "c", PersistTime: at}},
	} {
		slow, err := genericLease(in)
		if err != nil {
			t.Fatal(err)
		}
		if fast := fastLease(in); !equality.Semantic.DeepEqual(slow, fast) {
			t.Fatalf("fast conversion differs:\nfast %+v\nslow %+v", fast, slow)
		}
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
