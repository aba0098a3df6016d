// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package grpcmw adapts go-grpc-middleware v2 to nodepulse: a zap logger for
// the logging interceptor, a recovery handler that logs the panic, and a
// matcher that keeps health checks and reflection out of the logs.
package grpcmw

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ZapLogger adapts lg to the logging interceptor's Logger interface.
func ZapLogger(lg *zap.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		f := make([]zap.Field, 0, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			key, _ := fields[i].(string)
			f = append(f, zap.Any(key, fields[i+1]))
		}
		l := lg.WithOptions(zap.AddCallerSkip(1))
		switch lvl {
		case logging.LevelDebug:
			l.Debug(msg, f...)
		case logging.LevelInfo:
			l.Info(msg, f...)
		case logging.LevelWarn:
			l.Warn(msg, f...)
		case logging.LevelError:
			l.Error(msg, f...)
		default:
			l.Error(msg, append(f, zap.Int("unknownLevel", int(lvl)))...)
		}
	})
}

// LoggingOptions logs finished calls only (not starts) and maps codes to
// levels so refused requests are visible without flooding info logs.
func LoggingOptions() []logging.Option {
	return []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(func(c codes.Code) logging.Level {
			switch c {
			case codes.OK, codes.Canceled:
				return logging.LevelDebug
			case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
				codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.Aborted, codes.ResourceExhausted:
				return logging.LevelWarn
			default:
				return logging.LevelError
			}
		}),
	}
}

// NotHealthOrReflection matches every call except the gRPC health and
// reflection services, which load balancers and grpcurl call constantly.
func NotHealthOrReflection(_ context.Context, c interceptors.CallMeta) bool {
	switch c.Service {
	case "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection":
		return false
	}
	return true
}

// RecoveryHandler turns a handler panic into codes.Internal and logs it with
// the stack, so one bad message cannot take the process down.
func RecoveryHandler(lg *zap.Logger) func(ctx context.Context, p any) error {
	return func(ctx context.Context, p any) error {
		lg.Error("panic in gRPC handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		return status.Error(codes.Internal, fmt.Sprintf("internal error: %v", p))
	}
}
