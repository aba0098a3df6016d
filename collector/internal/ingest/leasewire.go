// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// The two messages of the hot path, a lease renewal and its ack, are coded
// by hand: at 10,000 renewals a second, protobuf's table-driven coding (a
// Size pass, reflection on the oneof, three allocations per renewal
// decoded) was 9 % of the collector's CPU. Anything else, and any renewal
// using a field this code does not know or a field twice, goes to the
// general codec, so the result is always exactly what proto.Unmarshal and
// proto.Marshal give (leasewire_test.go compares them on random input).

// Field numbers, from collector.proto.
const (
	fieldRequestSeq   = 1 // ReportRequest.seq
	fieldRequestLease = 3 // ReportRequest.lease
	fieldLeaseRenew   = 1 // LeaseRenewal.renew_time
	fieldLeaseSeconds = 2 // LeaseRenewal.lease_duration_seconds
	fieldTSSeconds    = 1 // google.protobuf.Timestamp.seconds
	fieldTSNanos      = 2 // google.protobuf.Timestamp.nanos
	fieldResponseAck  = 1 // ReportResponse.ack
	fieldAckSeq       = 1 // Ack.seq
	fieldAckDurable   = 4 // Ack.durable
	fieldAckCollector = 6 // Ack.collector_id
)

// leaseRequest is a decoded renewal's three messages in one allocation.
type leaseRequest struct {
	oneof collectorv1.ReportRequest_Lease
	lease collectorv1.LeaseRenewal
	ts    timestamppb.Timestamp
}

// scalars reads a message made only of varint fields numbered 1..len(out)
// (except sub) and at most one message field numbered sub (0: none), each
// at most once.
// ok is false for anything else.
func scalars(b []byte, out []uint64, seen []bool, sub protowire.Number) (msg []byte, hasMsg, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, false
		}
		b = b[n:]
		switch {
		case sub > 0 && num == sub && typ == protowire.BytesType && !hasMsg:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false, false
			}
			msg, hasMsg, b = v, true, b[n:]
		case num != sub && num >= 1 && int(num) <= len(out) && typ == protowire.VarintType && !seen[num-1]:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false, false
			}
			out[num-1], seen[num-1], b = v, true, b[n:]
		default:
			return nil, false, false
		}
	}
	return msg, hasMsg, true
}

// recvBuf is a stream's receive buffer: its loop decodes every message
// into the same ReportRequest, and every lease renewal into the same
// leaseRequest, so a renewal costs no allocation for as long as the node
// stays attached (one every 10 s per node: at 100,000 nodes, 1.5 MB/s of
// garbage that set the pace of the collector's GC cycles, and with it the
// assists that stall renewals). Nothing keeps a decoded message past
// handle: a status report hands on only its NodeStatus, which the general
// codec allocates anew each time.
//
// empty is set for an empty message, which the collector's Register ack
// (empty_renewals) lets a reporter send as a lease renewal once it has sent
// one LeaseRenewal on the stream: the loop fills req in (emptyRenewal). An
// empty message is the one gRPC receives without allocating on the
// stream's goroutine (grpc-go makes a slice per message only for a
// non-empty payload), and that goroutine allocating nothing per renewal is
// what keeps renewals from paying for the GC's marking (acksend.go).
type recvBuf struct {
	req   collectorv1.ReportRequest
	lease leaseRequest
	empty bool
}

// emptyRenewal makes req the lease renewal an empty message stands for.
func (rb *recvBuf) emptyRenewal(seq uint64, at time.Time, seconds int32) {
	x := &rb.lease
	x.ts.Seconds, x.ts.Nanos = at.Unix(), int32(at.Nanosecond())
	x.lease.RenewTime = &x.ts
	x.lease.LeaseDurationSeconds = seconds
	x.oneof.Lease = &x.lease
	rb.req.Reset()
	rb.req.Seq = seq
	rb.req.Message = &x.oneof
}

// decodeLease decodes b into m when b is a lease renewal in the fields
// this collector knows, using x for the renewal's messages (nil: new
// ones); false (m and x untouched) for anything else.
func decodeLease(b []byte, m *collectorv1.ReportRequest, x *leaseRequest) bool {
	var req, lease, ts [2]uint64
	var reqSeen, leaseSeen, tsSeen [2]bool
	// ReportRequest: seq (1, varint) and lease (3); 2 must not appear.
	body, hasLease, ok := scalars(b, req[:1], reqSeen[:1], fieldRequestLease)
	if !ok || !hasLease {
		return false
	}
	renew, hasRenew, ok := scalars(body, lease[:], leaseSeen[:], fieldLeaseRenew)
	if !ok {
		return false
	}
	if hasRenew {
		if _, _, ok := scalars(renew, ts[:], tsSeen[:], 0); !ok {
			return false
		}
	}
	if x == nil {
		x = new(leaseRequest)
	}
	// Field by field: a reused x may hold the previous renewal.
	x.lease.RenewTime = nil
	if hasRenew {
		x.ts.Seconds, x.ts.Nanos = int64(ts[fieldTSSeconds-1]), int32(ts[fieldTSNanos-1])
		x.lease.RenewTime = &x.ts
	}
	x.lease.LeaseDurationSeconds = int32(lease[fieldLeaseSeconds-1])
	x.oneof.Lease = &x.lease
	m.Reset()
	m.Seq = req[fieldRequestSeq-1]
	m.Message = &x.oneof
	return true
}

// plainAck returns r's Ack when it carries only seq, durable and a valid
// collector id (a lease ack), so appendAck codes it exactly.
func plainAck(r *collectorv1.ReportResponse) *collectorv1.Ack {
	w, ok := r.GetMessage().(*collectorv1.ReportResponse_Ack)
	if !ok || w.Ack == nil {
		return nil
	}
	a := w.Ack
	if a.Error != nil || a.RetryAfter != nil || a.Node != nil || a.RenewPhase != nil || !utf8.ValidString(a.CollectorId) ||
		len(r.ProtoReflect().GetUnknown()) > 0 || len(a.ProtoReflect().GetUnknown()) > 0 {
		return nil
	}
	return a
}

// appendAck appends ReportResponse{ack: a} for a plain ack, fields in
// number order and defaults omitted, as proto.Marshal writes them.
func appendAck(b []byte, a *collectorv1.Ack) []byte {
	size := 0
	if a.Seq != 0 {
		size += protowire.SizeTag(fieldAckSeq) + protowire.SizeVarint(a.Seq)
	}
	if a.Durable {
		size += protowire.SizeTag(fieldAckDurable) + 1
	}
	if a.CollectorId != "" {
		size += protowire.SizeTag(fieldAckCollector) + protowire.SizeBytes(len(a.CollectorId))
	}
	b = protowire.AppendTag(b, fieldResponseAck, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if a.Seq != 0 {
		b = protowire.AppendTag(b, fieldAckSeq, protowire.VarintType)
		b = protowire.AppendVarint(b, a.Seq)
	}
	if a.Durable {
		b = protowire.AppendTag(b, fieldAckDurable, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if a.CollectorId != "" {
		b = protowire.AppendTag(b, fieldAckCollector, protowire.BytesType)
		b = protowire.AppendString(b, a.CollectorId)
	}
	return b
}
