// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// RegisterService registers a service whose undecodable requests are
// answered InvalidArgument (stream messages are, whatever the service). grpc-go answers a message its codec cannot
// unmarshal with Internal whatever the codec's error says (server.go and
// rpc_util.go wrap it with %v), and for a stream writes that status itself
// before the handler sees the error. Internal tells a client that a retry
// may help; bytes that do not decode never will. Services must register
// here (grpcserver.Server, not its embedded *grpc.Server) for unary calls.
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	s.Server.RegisterService(invalidArgumentOnDecode(sd), impl)
}

// decodeBox carries a message to the codec and its decode error back: the
// codec stores the error instead of returning it, so grpc-go never turns
// it into Internal, and the handler wrappers answer InvalidArgument.
type decodeBox struct {
	m   any
	err error
}

// boxCodec is the server's proto codec: it decodes a *decodeBox's message
// and keeps the error in the box, and decodes anything else as the proto
// codec does.
type boxCodec struct{ encoding.CodecV2 }

func (c boxCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if b, ok := v.(*decodeBox); ok {
		b.err = c.CodecV2.Unmarshal(data, b.m)
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// serverCodec is the option installing boxCodec around c (nil: the proto
// codec). Every server of this package has it: decodeStream passes boxes.
func serverCodec(c encoding.CodecV2) grpc.ServerOption {
	if c == nil {
		c = encoding.GetCodecV2(proto.Name)
	}
	return grpc.ForceServerCodecV2(boxCodec{c})
}

func undecodable(err error) error {
	return status.Errorf(codes.InvalidArgument, "the message could not be decoded as protobuf: %v", err)
}

// invalidArgumentOnDecode returns a copy of sd whose unary handlers decode
// through a decodeBox. Streams get theirs from the stream interceptors
// (decodeStream), which already have a frame on the stream's stack.
func invalidArgumentOnDecode(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *sd
	out.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error {
				b := decodeBox{m: v}
				if err := dec(&b); err != nil {
					return err
				}
				if b.err != nil {
					return undecodable(b.err)
				}
				return nil
			}, icpt)
		}
		out.Methods[i] = m
	}
	return &out
}

// decodeStream receives every message through its box: one call more per
// message, and one frame more on the stream's stack while it waits.
type decodeStream struct {
	grpc.ServerStream
	box decodeBox
}

func (s *decodeStream) RecvMsg(m any) error {
	s.box = decodeBox{m: m}
	if err := s.ServerStream.RecvMsg(&s.box); err != nil {
		return err
	}
	if err := s.box.err; err != nil {
		s.box = decodeBox{}
		return undecodable(err)
	}
	s.box.m = nil
	return nil
}
