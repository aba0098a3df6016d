// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// rawCodec sends []byte as it is: bytes no protobuf decoder accepts.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// A field tag with wire type 7, which does not exist.
var garbage = []byte{0xff, 0xff, 0xff, 0xff}

// Bytes that are not a protobuf message are the client's fault, for good:
// InvalidArgument (not grpc-go's Internal, which invites retries), for a
// unary request and for a stream message, over a real connection.
func TestUndecodableMessagesAreInvalidArgument(t *testing.T) {
	s, err := New(testConfig(), zap.NewNop(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterService(streamDesc(func(ss grpc.ServerStream) error {
		for {
			if err := ss.RecvMsg(new(emptypb.Empty)); err != nil {
				return err
			}
		}
	}), struct{}{})
	cc := serve(t, s, &testDesc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	check := func(what string, err error) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "could not be decoded") {
			t.Fatalf("%s: %v, want InvalidArgument saying the message could not be decoded", what, err)
		}
	}
	var out []byte
	check("unary", cc.Invoke(ctx, "/test.Svc/Logged", garbage, &out, grpc.ForceCodec(rawCodec{})))
	// A valid message still reaches the handler (which fails Unavailable).
	if err := cc.Invoke(ctx, "/test.Svc/Logged", &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("valid unary request: %v", err)
	}
	for _, method := range []string{"/test.Streams/Long", "/test.Streams/Short"} {
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(garbage); err != nil {
			t.Fatal(err)
		}
		check(method, st.RecvMsg(&out))
	}
}
