// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bytes"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// TestLeaseProtoIsTheAPIServersStorageEncoding checks that the baseline's
// Lease is what kube-apiserver would store: the protobuf envelope's magic,
// decodable by apimachinery's protobuf serializer into the same Lease.
func TestLeaseProtoIsTheAPIServersStorageEncoding(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 2, 3, 456789000, time.UTC)
	b := leaseProto("node-000001.zone-a.example.com", 1, now)
	if !bytes.HasPrefix(b, []byte("k8s\x00")) {
		t.Fatalf("no k8s\\x00 envelope: % x", b[:8])
	}
	sch := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := protobuf.NewSerializer(sch, sch).Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || gvk.Kind != "Lease" || gvk.GroupVersion().String() != "coordination.k8s.io/v1" {
		t.Fatalf("decoded %T %v", obj, gvk)
	}
	if l.Name != "node-000001.zone-a.example.com" || *l.Spec.HolderIdentity != l.Name || !l.Spec.RenewTime.Time.Equal(now.Truncate(time.Microsecond)) ||
		len(l.ManagedFields) != 1 || len(l.OwnerReferences) != 1 {
		t.Fatalf("decoded lease differs: %+v", l)
	}
	t.Logf("%d bytes", len(b))
}
