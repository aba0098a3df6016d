// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// The simulator receives 10,000 lease acks a second at 100,000 nodes, and
// protobuf's general decoder gave each a new ReportResponse, oneof wrapper,
// Ack and collector id: 4 allocations, 200 bytes and ~640 ns per ack
// (BenchmarkAckDecode), 9 % of the simulator's CPU in the steady stage and
// a fifth of its ~1 KB of garbage per renewal. The simulator runs without
// GC until its memory limit, and the collection there is a stall of
// seconds the benchmark sees as bunched renewals (docs/adr/0020-hand-coded-lease-messages.md,
// docs/adr/0019-multiplexed-fleet-simulator.md). The benchmark measures the collector, not its load
// generator's decoder, so a plain ack (seq, durable, collector id: what the
// collector sends for every renewal) is decoded by hand into the stream's
// own receive buffer: no allocation, ~60 ns. Anything else, and any ack
// with a field this code does not know or invalid UTF-8, goes to the
// general codec, so the result is always what proto.Unmarshal gives
// (ackwire_test.go compares them on random input).

// Field numbers, from collector.proto.
const (
	fieldResponseAck = 1 // ReportResponse.ack
	fieldAckSeq      = 1 // Ack.seq
	fieldAckDurable  = 4 // Ack.durable
	fieldAckIdentity = 6 // Ack.collector_id
)

// ackCodec is the simulator's gRPC codec: the standard protobuf codec,
// except for plain acks received into a respBuf.
type ackCodec struct{ base encoding.CodecV2 }

func newAckCodec() ackCodec { return ackCodec{base: encoding.GetCodecV2(grpcproto.Name)} }

func (c ackCodec) Name() string { return c.base.Name() }

func (c ackCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c ackCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if rb, ok := v.(*respBuf); ok {
		if len(data) == 1 && rb.decodeAck(data[0].ReadOnlyData()) {
			return nil
		}
		v = &rb.resp
	}
	return c.base.Unmarshal(data, v)
}

// respBuf is a stream's receive buffer: every response is decoded into
// resp, and every plain ack into ack, which it keeps for the stream's life.
// Nothing that received a response may keep resp past the next receive;
// what the general codec decodes (a node, a command) is allocated anew
// each time, as proto.Unmarshal does after resetting resp.
type respBuf struct {
	resp  collectorv1.ReportResponse
	oneof collectorv1.ReportResponse_Ack
	ack   collectorv1.Ack
}

// decodeAck decodes b into rb when b is a plain ack; false (rb untouched)
// for anything else.
func (rb *respBuf) decodeAck(b []byte) bool {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != fieldResponseAck || typ != protowire.BytesType {
		return false
	}
	body, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return false // malformed, or a second field
	}
	var seq uint64
	var durable bool
	var id []byte
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return false
		}
		body = body[n:]
		// A field that comes again replaces its value, as in
		// proto.Unmarshal (the last one wins).
		switch {
		case num == fieldAckSeq && typ == protowire.VarintType:
			seq, n = protowire.ConsumeVarint(body)
		case num == fieldAckDurable && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(body)
			durable = protowire.DecodeBool(v)
		case num == fieldAckIdentity && typ == protowire.BytesType:
			id, n = protowire.ConsumeBytes(body)
		default:
			return false
		}
		if n < 0 {
			return false
		}
		body = body[n:]
	}
	if !utf8.Valid(id) {
		return false // proto.Unmarshal refuses it: let it say why
	}
	a := &rb.ack
	prev := a.CollectorId
	a.Reset() // no field of an earlier ack may stay
	a.Seq, a.Durable = seq, durable
	// The id is the same on every ack from one collector: keep the string
	// rather than allocate it again (the comparison allocates nothing).
	if a.CollectorId = prev; prev != string(id) {
		a.CollectorId = string(id)
	}
	rb.oneof.Ack = a
	rb.resp.Reset()
	rb.resp.Message = &rb.oneof
	return true
}
