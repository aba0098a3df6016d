// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// stoppedClock dates every entry at the same instant, so the sampler's
// one-second window cannot roll over in the middle of the test.
type stoppedClock struct{ t time.Time }

func (c stoppedClock) Now() time.Time                         { return c.t }
func (c stoppedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// In a storm the per-node lines are thinned per message, and a rare line in
// the same second is still written.
func TestNodeLinesAreSampledInStorms(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	lg := zap.New(sampleNodeLines(core), zap.WithClock(stoppedClock{time.Unix(1_700_000_000, 0)}))
	for range 1000 {
		lg.With(zap.String("node", "n")).Info("node attached")
	}
	lg.Warn("registrations refused")
	// The first 100, then every 100th: the 200th, 300th ... 1,000th.
	if got, want := logs.FilterMessage("node attached").Len(), nodeLinesPerSecond+(1000-nodeLinesPerSecond)/nodeLinesThereafter; got != want {
		t.Fatalf("%d of 1,000 attach lines written, want %d", got, want)
	}
	if logs.FilterMessage("registrations refused").Len() != 1 {
		t.Fatal("a rare line in the same second was dropped")
	}
}
