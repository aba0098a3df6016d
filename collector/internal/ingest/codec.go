// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"sync"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// Codec is the collector server's gRPC codec: the standard protobuf codec,
// except that large messages are decoded on a short-lived goroutine
// (onFreshStack). (The one large message the collector sends on a Report
// stream, the Register ack carrying the whole node, is encoded by
// register, which runs on a short-lived goroutine itself.)
//
// Why: a Report stream's goroutine lives as long as its node stays
// connected, parked in Recv, and a goroutine's stack never shrinks below
// what it once needed unless it later uses under a quarter of it. Protobuf
// code for messages with maps (a status report's capacity, a node's labels)
// goes through reflection with large frames; run on the stream's goroutine
// it doubled every stream's stack to 16 KB for good, the largest part of
// the collector's memory per node. Lease renewals and their acks, the
// messages of the hot path, are small and stay inline, coded by hand
// (leasewire.go).
func Codec() encoding.CodecV2 {
	return offStackCodec{base: encoding.GetCodecV2(grpcproto.Name)}
}

// offStackBytes: messages at least this large are decoded off the stream's
// stack (a lease renewal is ~30 bytes, a status report several hundred).
const offStackBytes = 256

type offStackCodec struct{ base encoding.CodecV2 }

func (c offStackCodec) Name() string { return c.base.Name() }

func (c offStackCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if rb, ok := v.(*recvBuf); ok && data.Len() == 0 {
		rb.empty = true // a renewal (see recvBuf); the loop fills it in
		return nil
	}
	if data.Len() < offStackBytes && len(data) == 1 {
		switch m := v.(type) {
		case *recvBuf: // a Report stream's loop
			if decodeLease(data[0].ReadOnlyData(), &m.req, &m.lease) {
				return nil
			}
		case *collectorv1.ReportRequest:
			if decodeLease(data[0].ReadOnlyData(), m, nil) {
				return nil
			}
		}
	}
	if rb, ok := v.(*recvBuf); ok {
		v = &rb.req
	}
	if data.Len() < offStackBytes {
		return c.base.Unmarshal(data, v)
	}
	var err error
	onFreshStack(func() { err = c.base.Unmarshal(data, v) })
	return err
}

func (c offStackCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*collectorv1.ReportResponse); ok {
		if a := plainAck(r); a != nil {
			bp := ackBufs.Get(0)
			*bp = appendAck(*bp, a)
			return mem.BufferSlice{mem.NewBuffer(bp, ackBufs)}, nil
		}
	}
	return c.base.Marshal(v)
}

// onFreshStack runs f on a short-lived goroutine and waits for it, so the
// stack f grows is freed when it returns instead of staying with the
// caller (see Codec).
func onFreshStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// ackBufs recycles the buffers lease acks are coded into: gRPC frees a
// message's buffer once it is written, and NewBuffer hands a buffer of at
// least ackBufSize back here. They are far larger than an ack (~45 bytes)
// because gRPC pools only buffers whose capacity reaches its pooling
// threshold (mem.IsBelowBufferPoolingThreshold): a smaller one is boxed
// anew for every message (~6 % of the collector's garbage at 10,000
// renewals a second).
var ackBufs mem.BufferPool = &ackPool{}

// ackBufSize is past gRPC's pooling threshold (1 KiB in grpc-go 1.83);
// TestAckEncodeIsPooled fails if a gRPC upgrade raises it.
const ackBufSize = 2 << 10

type ackPool struct{ p sync.Pool }

// Get returns a buffer of the given length and a capacity of at least
// ackBufSize.
func (a *ackPool) Get(length int) *[]byte {
	if bp, ok := a.p.Get().(*[]byte); ok {
		if length <= cap(*bp) {
			*bp = (*bp)[:length]
			return bp
		}
		a.p.Put(bp)
	}
	b := make([]byte, length, max(length, ackBufSize))
	return &b
}

func (a *ackPool) Put(bp *[]byte) {
	if cap(*bp) >= ackBufSize {
		a.p.Put(bp)
	}
}
