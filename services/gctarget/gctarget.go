// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package gctarget applies a process's Go GC settings from its
// --runtime.* flags. The services that hold something per node (streams,
// cached objects) choose their own defaults, because a collection cycle
// over 100,000 of them delays everything else the process does while it
// runs (docs/benchmarks.md), and how often that happens is the trade
// against memory.
package gctarget

import (
	"errors"
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

// ErrOffWithoutLimit: a negative target (GC off) was asked for with no
// memory limit in force, so the heap would grow without bound.
var ErrOffWithoutLimit = errors.New("GC target is negative (GC off) but there is no memory limit")

// ApplyWithLimit is SetMemoryLimit then Apply, for a process that may run
// with GC off: it refuses a negative percent that would be applied (GOGC
// unset) without a limit in force, before setting the target.
func ApplyWithLimit(lg *zap.Logger, percent int, limitMiB int64) (int, error) {
	return applyWithLimit(lg, percent, limitMiB, os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"), debug.SetGCPercent, debug.SetMemoryLimit)
}

func applyWithLimit(lg *zap.Logger, percent int, limitMiB int64, gogc, gomemlimit string, setGC func(int) int, setLimit func(int64) int64) (int, error) {
	limited := setMemoryLimit(lg, limitMiB, gomemlimit, setLimit)
	if percent < 0 && !limited && gogc == "" {
		return 0, ErrOffWithoutLimit
	}
	return apply(lg, percent, gogc, setGC), nil
}
