// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// The collector's codec is the protobuf codec, whichever goroutine does
// the work: small and large messages, both directions.
func TestCodecMatchesProtoCodec(t *testing.T) {
	base := encoding.GetCodecV2(grpcproto.Name)
	c := Codec()
	if c.Name() != base.Name() {
		t.Fatalf("name %q, want %q", c.Name(), base.Name())
	}
	node := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z1"}}}
	status := &nodev1.NodeStatus{Capacity: map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"},
		NodeInfo: &nodev1.NodeSystemInfo{KernelVersion: strings.Repeat("k", 300)}}
	msgs := []proto.Message{
		&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 1, Node: node}}},
		&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 2}}},
		&collectorv1.ReportRequest{Seq: 3, Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: status}}},
		&collectorv1.ReportRequest{Seq: 4, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{LeaseDurationSeconds: 40}}},
	}
	for _, m := range msgs {
		got, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := base.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		gb, wb := got.Materialize(), want.Materialize()
		// Map entries are encoded in random order (protobuf's default,
		// non-deterministic marshalling), so bytes may differ while the
		// encodings are equivalent: same length, same message back.
		if len(gb) != len(wb) {
			t.Fatalf("%T: encoded in %d bytes, the protobuf codec in %d", m, len(gb), len(wb))
		}
		fromBase := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(wb, fromBase); err != nil || !proto.Equal(fromBase, m) {
			t.Fatalf("%T: the protobuf codec's bytes do not decode to the message (%v)", m, err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(gb)}, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, m) {
			t.Fatalf("%T: round trip gave %v", m, back)
		}
		got.Free()
		want.Free()
	}
	// A decode error is returned, not lost on the other goroutine.
	bad := mem.BufferSlice{mem.SliceBuffer(append([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, make([]byte, offStackBytes)...))}
	if err := c.Unmarshal(bad, &collectorv1.ReportRequest{}); err == nil {
		t.Fatal("a malformed large message decoded without error")
	}
}
