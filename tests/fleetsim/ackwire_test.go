// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

func randomAck(r *rand.Rand) *collectorv1.ReportResponse {
	ids := []string{"", "collector-0", "c-7f3a", "ünïcode"}
	a := &collectorv1.Ack{Seq: []uint64{0, 1, math.MaxUint64, r.Uint64()}[r.IntN(4)], Durable: r.IntN(2) == 0, CollectorId: ids[r.IntN(len(ids))]}
	return &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}
}

// others are responses that are not plain acks.
var others = []*collectorv1.ReportResponse{
	{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 1, Error: &collectorv1.Error{Code: 3, Field: "lease.renew_time", Message: "in the future"}}}},
	{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 2, RetryAfter: durationpb.New(5e9)}}},
	{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 1, Node: &nodev1.Node{}, RenewPhase: proto.Float64(0.25), EmptyRenewals: true}}},
	{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{Command: &collectorv1.Command_ReportStatus{ReportStatus: &collectorv1.ReportStatus{Reason: "asked"}}}}},
	{},
}

func unmarshal(t *testing.T, c ackCodec, b []byte, v any) error {
	t.Helper()
	return c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, v)
}

// Every plain ack proto.Marshal writes is decoded by hand, to the same
// message, into a buffer reused from one response to the next — including
// after responses the general codec decoded into it.
func TestAckCodecMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := newAckCodec()
	rb := new(respBuf)
	for i := range 20_000 {
		want := randomAck(r)
		if i%7 == 0 {
			want = others[r.IntN(len(others))]
		}
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		byHand := rb.decodeAck(b)
		if plain := i%7 != 0; byHand != plain {
			t.Fatalf("%v: decoded by hand %v, want %v", want, byHand, plain)
		}
		if err := unmarshal(t, c, b, rb); err != nil {
			t.Fatalf("%v: %v", want, err)
		}
		if !proto.Equal(&rb.resp, want) {
			t.Fatalf("decoded %v, want %v", &rb.resp, want)
		}
	}
}

// On any input the codec gives what proto.Unmarshal gives: mutated acks
// (bytes changed, cut, fields repeated or added) and random bytes, whether
// the hand decoder takes them or declines.
func TestAckCodecNeverDisagrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	c := newAckCodec()
	rb := new(respBuf)
	declined, accepted := 0, 0
	for i := range 200_000 {
		var b []byte
		if i%10 == 0 {
			b = make([]byte, r.IntN(40))
			for k := range b {
				b[k] = byte(r.UintN(256))
			}
		} else {
			b, _ = proto.Marshal(randomAck(r))
			switch r.IntN(6) {
			case 0: // change a byte
				if len(b) > 0 {
					b[r.IntN(len(b))] = byte(r.UintN(256))
				}
			case 1: // cut
				b = b[:r.IntN(len(b)+1)]
			case 2: // the ack twice (proto merges them)
				b = append(b, b...)
			case 3: // an unknown field in the response
				b = protowire.AppendVarint(protowire.AppendTag(b, protowire.Number(3+r.IntN(20)), protowire.VarintType), r.Uint64())
			case 4: // a field of the ack again, inside it
				b = protowire.AppendTag(nil, fieldResponseAck, protowire.BytesType)
				inner := protowire.AppendVarint(protowire.AppendTag(nil, fieldAckSeq, protowire.VarintType), r.Uint64())
				inner = protowire.AppendVarint(protowire.AppendTag(inner, fieldAckSeq, protowire.VarintType), r.Uint64())
				b = protowire.AppendBytes(b, inner)
			}
		}
		want := new(collectorv1.ReportResponse)
		wantErr := proto.Unmarshal(b, want)
		if probe := new(respBuf); probe.decodeAck(b) {
			accepted++
		} else {
			declined++
		}
		err := unmarshal(t, c, b, rb)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%x: codec error %v, proto.Unmarshal's %v", b, err, wantErr)
		}
		if err == nil && !proto.Equal(&rb.resp, want) {
			t.Fatalf("%x: decoded to %v; proto.Unmarshal gives %v", b, &rb.resp, want)
		}
		if err != nil { // a failed decode leaves the buffer undefined
			rb = new(respBuf)
		}
	}
	if accepted == 0 || declined == 0 {
		t.Fatalf("accepted %d, declined %d: the mutations do not exercise both paths", accepted, declined)
	}
}

// The point of the hand decoder: a plain ack from the same collector as
// the last one costs no allocation.
func TestPlainAckDecodeAllocatesNothing(t *testing.T) {
	c := newAckCodec()
	rb := new(respBuf)
	b, _ := proto.Marshal(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 9, CollectorId: "collector-0"}}})
	data := mem.BufferSlice{mem.SliceBuffer(b)}
	if err := c.Unmarshal(data, rb); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.Unmarshal(data, rb) }); n != 0 {
		t.Fatalf("%v allocations per ack", n)
	}
}

// BenchmarkAckDecode: a lease ack through protobuf's general decoder, as
// the simulator received them before, and by hand into a reused buffer.
func BenchmarkAckDecode(b *testing.B) {
	msg, _ := proto.Marshal(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 123456, CollectorId: "collector-0"}}})
	data := mem.BufferSlice{mem.SliceBuffer(msg)}
	c := newAckCodec()
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Unmarshal(data, new(collectorv1.ReportResponse)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		rb := new(respBuf)
		for b.Loop() {
			if err := c.Unmarshal(data, rb); err != nil {
				b.Fatal(err)
			}
		}
	})
}
