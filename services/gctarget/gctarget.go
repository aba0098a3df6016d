// Package gctarget applies a process's Go GC target (GOGC) from its
// --runtime.gc-percent flag. The services that hold something per node
// (streams, cached objects) choose their own default, because a collection
// cycle over 100,000 of them delays everything else the process does while
// it runs (docs/benchmarks.md), and how often that happens is the trade
// against memory.
package gctarget

import (
	"os"
	"runtime/debug"

	"go.uber.org/zap"
)

// Apply sets the GC target to percent unless the GOGC environment variable
// is set (an operator's explicit choice wins, as in every Go program) or
// percent is not positive (Go's default stays). It returns the target it
// set, or 0 when it set none.
func Apply(lg *zap.Logger, percent int) int {
	return apply(lg, percent, os.Getenv("GOGC"), debug.SetGCPercent)
}

func apply(lg *zap.Logger, percent int, env string, set func(int) int) int {
	if env != "" {
		lg.Info("GC target from the GOGC environment variable", zap.String("GOGC", env))
		return 0
	}
	if percent <= 0 {
		return 0
	}
	set(percent)
	lg.Debug("GC target set", zap.Int("percent", percent))
	return percent
}
