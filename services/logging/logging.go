// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package logging builds the zap logger every nodepulse binary uses and
// routes grpc-go's own logging through it.
package logging

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zapgrpc"
	"google.golang.org/grpc/grpclog"
)

// Config selects level and encoding.
type Config struct {
	Level  string
	Format string
}

// RegisterFlags adds log.level and log.format.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Level, "log.level", "info", "minimum log level: debug, info, warn, error")
	fs.StringVar(&c.Format, "log.format", "json", "log encoding: json (structured, for machines) or console (for people)")
}

// New returns a logger writing to stderr, named after the component.
func New(c Config, component string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level %q: %w", c.Level, err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch c.Format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("log.format %q: want json or console", c.Format)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lvl)
	lg := zap.New(core, zap.AddCaller()).Named(component)
	return lg, nil
}

// RedirectGRPC sends grpc-go's internal logs to lg at warn level and above;
// its info logs are connection chatter that drowns useful lines. Call once per
// process, before any gRPC use.
func RedirectGRPC(lg *zap.Logger) {
	grpclog.SetLoggerV2(zapgrpc.NewLogger(lg.Named("grpc").WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))))
}
