// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

func randomLease(r *rand.Rand) *collectorv1.ReportRequest {
	pick := func(vals ...int64) int64 { return vals[r.IntN(len(vals))] }
	l := &collectorv1.LeaseRenewal{LeaseDurationSeconds: int32(pick(0, 40, -1, math.MaxInt32, math.MinInt32, r.Int64N(1000)))}
	if r.IntN(5) > 0 {
		l.RenewTime = &timestamppb.Timestamp{Seconds: pick(0, -1, 1_800_000_000, math.MaxInt64, math.MinInt64, r.Int64()),
			Nanos: int32(pick(0, 999_999_999, -5, math.MaxInt32, r.Int64N(1e9)))}
	}
	return &collectorv1.ReportRequest{Seq: uint64(pick(0, 1, math.MaxInt64, -1, r.Int64())), Message: &collectorv1.ReportRequest_Lease{Lease: l}}
}

// Every renewal proto.Marshal writes decodes by hand to the same message.
func TestDecodeLeaseMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		want := randomLease(r)
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := new(collectorv1.ReportRequest)
		if !decodeLease(b, got, nil) {
			t.Fatalf("%v: not decoded by hand", want)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("decoded %v, want %v", got, want)
		}
	}
}

// On any input, the hand decoder either declines or agrees with
// proto.Unmarshal: mutated renewals (bytes changed, cut, fields repeated or
// added, other message kinds) and random bytes.
func TestDecodeLeaseNeverDisagrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	others := []*collectorv1.ReportRequest{
		{Seq: 2, Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{NodeName: "n1"}}},
		{Seq: 3, Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: &nodev1.NodeStatus{}}}},
		{Seq: 4, Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "bye"}}},
		{Seq: 5},
	}
	for _, m := range others {
		b, _ := proto.Marshal(m)
		if decodeLease(b, new(collectorv1.ReportRequest), nil) {
			t.Fatalf("%v decoded as a lease renewal", m)
		}
	}
	declined, accepted := 0, 0
	for i := range 200_000 {
		var b []byte
		if i%10 == 0 {
			b = make([]byte, r.IntN(40))
			for k := range b {
				b[k] = byte(r.UintN(256))
			}
		} else {
			b, _ = proto.Marshal(randomLease(r))
			switch r.IntN(6) {
			case 0: // change a byte
				if len(b) > 0 {
					b[r.IntN(len(b))] = byte(r.UintN(256))
				}
			case 1: // cut
				b = b[:r.IntN(len(b)+1)]
			case 2: // repeat a field
				b = append(b, b...)
			case 3: // an unknown field
				b = protowire.AppendVarint(protowire.AppendTag(b, protowire.Number(6+r.IntN(20)), protowire.VarintType), r.Uint64())
			case 4: // seq again
				b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), r.Uint64())
			}
		}
		want := new(collectorv1.ReportRequest)
		wantErr := proto.Unmarshal(b, want)
		got := new(collectorv1.ReportRequest)
		if !decodeLease(b, got, nil) {
			declined++
			continue
		}
		accepted++
		if wantErr != nil || !proto.Equal(got, want) {
			t.Fatalf("%x: decoded by hand to %v; proto.Unmarshal gives %v (%v)", b, got, want, wantErr)
		}
	}
	if accepted == 0 || declined == 0 {
		t.Fatalf("accepted %d, declined %d: the mutations do not exercise both paths", accepted, declined)
	}
}

// A plain ack is coded by hand to proto.Marshal's exact bytes; any other
// response is left to the general codec.
func TestAppendAckMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ids := []string{"", "c-1", "collector-7f9c2d", string(bytes.Repeat([]byte("x"), 200))}
	for range 20_000 {
		a := &collectorv1.Ack{Seq: []uint64{0, 1, 127, 128, math.MaxUint64, r.Uint64()}[r.IntN(6)], Durable: r.IntN(2) == 0, CollectorId: ids[r.IntN(len(ids))]}
		m := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if plainAck(m) != a {
			t.Fatalf("%v: not a plain ack", m)
		}
		if got := appendAck(nil, a); !bytes.Equal(got, want) {
			t.Fatalf("%v: coded %x, want %x", m, got, want)
		}
	}
	for _, a := range []*collectorv1.Ack{
		{Seq: 1, Error: &collectorv1.Error{Code: 8}},
		{Seq: 1, RetryAfter: durationpb.New(1)},
		{Seq: 1, Node: &nodev1.Node{}},
		{Seq: 1, CollectorId: "\xff"},
	} {
		if plainAck(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}) != nil {
			t.Errorf("%v taken for a plain ack", a)
		}
	}
	if plainAck(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{}}}) != nil {
		t.Error("a command taken for a plain ack")
	}
}

// Through the codec gRPC calls: a renewal split over two buffers and a
// large message still decode (the general path).
func TestCodecDecodesEveryShape(t *testing.T) {
	c := Codec()
	want := &collectorv1.ReportRequest{Seq: 9, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
		RenewTime: timestamppb.New(timestamppb.Now().AsTime()), LeaseDurationSeconds: 40}}}
	b, _ := proto.Marshal(want)
	big := &collectorv1.ReportRequest{Seq: 10, Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: string(bytes.Repeat([]byte("r"), 1000))}}}
	bb, _ := proto.Marshal(big)
	for _, tc := range []struct {
		data mem.BufferSlice
		want proto.Message
	}{
		{mem.BufferSlice{mem.SliceBuffer(b)}, want},
		{mem.BufferSlice{mem.SliceBuffer(b[:3]), mem.SliceBuffer(b[3:])}, want},
		{mem.BufferSlice{mem.SliceBuffer(bb)}, big},
	} {
		got := new(collectorv1.ReportRequest)
		if err := c.Unmarshal(tc.data, got); err != nil || !proto.Equal(got, tc.want) {
			t.Fatalf("decoded %v (%v), want %v", got, err, tc.want)
		}
	}
	ack := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 9, CollectorId: "c"}}}
	out, err := c.Marshal(ack)
	if err != nil {
		t.Fatal(err)
	}
	back := new(collectorv1.ReportResponse)
	if err := proto.Unmarshal(out.Materialize(), back); err != nil || !proto.Equal(back, ack) {
		t.Fatalf("ack coded to %v (%v)", back, err)
	}
}

// The hot path's coding, by hand and by the general codec:
//
//	cd collector && go test -run '^$' -bench LeaseCoding -benchmem ./internal/ingest/
func BenchmarkLeaseCoding(b *testing.B) {
	req, _ := proto.Marshal(&collectorv1.ReportRequest{Seq: 12345, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
		RenewTime: timestamppb.Now(), LeaseDurationSeconds: 40}}})
	ack := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 12345, CollectorId: "collector-0"}}}
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"hand", Codec()}, {"proto", encoding.GetCodecV2(grpcproto.Name)}} {
		b.Run(c.name, func(b *testing.B) {
			data := mem.BufferSlice{mem.SliceBuffer(req)}
			for b.Loop() {
				if err := c.codec.Unmarshal(data, new(collectorv1.ReportRequest)); err != nil {
					b.Fatal(err)
				}
				out, err := c.codec.Marshal(ack)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
			}
		})
	}
}

// A stream's receive buffer, reused for every message: each decode gives
// what proto.Unmarshal gives into a fresh message, whatever came before
// (a renewal with a renew time, one without, another kind of message).
func TestCodecReusedBufferMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	codec := Codec()
	var rb recvBuf
	for i := range 20_000 {
		var m *collectorv1.ReportRequest
		switch r.IntN(4) {
		case 0:
			m = &collectorv1.ReportRequest{Seq: uint64(i), Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: &nodev1.NodeStatus{}}}}
		case 1:
			m = &collectorv1.ReportRequest{Seq: uint64(i), Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "bye"}}}
		default:
			m = randomLease(r)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &rb); err != nil {
			t.Fatal(err)
		}
		want := new(collectorv1.ReportRequest)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&rb.req, want) {
			t.Fatalf("message %d: decoded %v, want %v", i, &rb.req, want)
		}
	}
}

// A renewal decoded into a stream's receive buffer allocates nothing.
func TestRenewalDecodeAllocatesNothing(t *testing.T) {
	b, err := proto.Marshal(&collectorv1.ReportRequest{Seq: 7, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
		RenewTime: timestamppb.Now(), LeaseDurationSeconds: 40}}})
	if err != nil {
		t.Fatal(err)
	}
	codec, data, rb := Codec(), mem.BufferSlice{mem.SliceBuffer(b)}, new(recvBuf)
	if n := testing.AllocsPerRun(100, func() {
		if err := codec.Unmarshal(data, rb); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per renewal decoded", n)
	}
}

// A lease ack is coded into a recycled buffer: gRPC frees it after the
// write, and only the one-element BufferSlice is allocated per ack.
func TestAckEncodeIsPooled(t *testing.T) {
	codec := Codec()
	r := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: 12345, CollectorId: "collector-7f3a9c1e"}}}
	want, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	enc := func() {
		bs, err := codec.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bs.Materialize(), want) {
			t.Fatalf("coded %x, want %x", bs.Materialize(), want)
		}
		if _, boxed := bs[0].(mem.SliceBuffer); boxed {
			t.Fatal("the ack buffer is below gRPC's pooling threshold: raise ackBufSize")
		}
		bs.Free()
	}
	enc()
	if n := testing.AllocsPerRun(100, func() {
		bs, _ := codec.Marshal(r)
		bs.Free()
	}); n > 1 {
		t.Fatalf("%v allocations per ack coded, want at most 1", n)
	}
}

// FuzzDecodeLease: on any input the hand decoder of renewals declines or
// agrees with proto.Unmarshal (TestDecodeLeaseNeverDisagrees with the
// fuzzer's inputs). The seed corpus in testdata/fuzz/FuzzDecodeLease holds
// a renewal, an empty message, a renewal with a field repeated, one with
// an unknown field, a cut one and a Register.
func FuzzDecodeLease(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		want := new(collectorv1.ReportRequest)
		wantErr := proto.Unmarshal(b, want)
		got := new(collectorv1.ReportRequest)
		if !decodeLease(b, got, nil) {
			return
		}
		if wantErr != nil || !proto.Equal(got, want) {
			t.Fatalf("%x: decoded by hand to %v; proto.Unmarshal gives %v (%v)", b, got, want, wantErr)
		}
	})
}
