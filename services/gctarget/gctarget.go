// Package gctarget applies a process's Go GC settings from its
// --runtime.* flags. The services that hold something per node (streams,
// cached objects) choose their own defaults, because a collection cycle
// over 100,000 of them delays everything else the process does while it
// runs (docs/benchmarks.md), and how often that happens is the trade
// against memory.
package gctarget

import (
	"os"
	"runtime/debug"

	"go.uber.org/zap"
)

// Apply sets the GC target to percent unless the GOGC environment variable
// is set (an operator's explicit choice wins, as in every Go program).
// Zero keeps Go's default; a negative percent turns the proportional
// target off, so the process collects only near its memory limit (and
// skips the collection Go otherwise forces every two minutes): callers
// allow that only with a limit (SetMemoryLimit or GOMEMLIMIT). It returns
// the target it set, or 0 when it set none.
func Apply(lg *zap.Logger, percent int) int {
	return apply(lg, percent, os.Getenv("GOGC"), debug.SetGCPercent)
}

func apply(lg *zap.Logger, percent int, env string, set func(int) int) int {
	if env != "" {
		lg.Info("GC target from the GOGC environment variable", zap.String("GOGC", env))
		return 0
	}
	switch {
	case percent == 0:
		return 0
	case percent < 0:
		percent = -1
	}
	set(percent)
	lg.Debug("GC target set", zap.Int("percent", percent))
	return percent
}

// SetMemoryLimit sets the soft memory limit to mib MiB unless the
// GOMEMLIMIT environment variable is set or mib is not positive. It
// reports whether a limit is in force afterwards (its own or GOMEMLIMIT's).
func SetMemoryLimit(lg *zap.Logger, mib int64) bool {
	return setMemoryLimit(lg, mib, os.Getenv("GOMEMLIMIT"), debug.SetMemoryLimit)
}

func setMemoryLimit(lg *zap.Logger, mib int64, env string, set func(int64) int64) bool {
	if env != "" {
		lg.Info("memory limit from the GOMEMLIMIT environment variable", zap.String("GOMEMLIMIT", env))
		return true
	}
	if mib <= 0 {
		return false
	}
	set(mib << 20)
	lg.Debug("memory limit set", zap.Int64("mib", mib))
	return true
}
