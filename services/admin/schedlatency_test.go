// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package admin

import (
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestRebucket(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 0, 0.0004, 0.0006, 0.003, 0.02, 2, math.Inf(1)},
		Counts:  []uint64{0, 5, 0, 2, 3, 4, 1},
	}
	count, sum, cum := rebucket(h, []float64{0.0005, 0.001, 0.005, 0.01, 0.1})
	if count != 15 {
		t.Errorf("count = %d, want 15 (every bucket, the overflow too)", count)
	}
	// [0, 0.4 ms) ≤ 0.5 ms; [0.6, 3 ms) ≤ 5 ms; [3, 20 ms) ≤ 100 ms;
	// [20 ms, 2 s) and [2 s, +Inf) beyond the last bound.
	want := map[float64]uint64{0.0005: 5, 0.001: 5, 0.005: 7, 0.01: 7, 0.1: 10}
	for b, n := range want {
		if cum[b] != n {
			t.Errorf("cumulative count at %v = %d, want %d (all: %v)", b, cum[b], n, cum)
		}
	}
	wantSum := 5*0.0002 + 2*0.0018 + 3*0.0115 + 4*1.01 + 1*2.0
	if math.Abs(sum-wantSum) > 1e-9 {
		t.Errorf("sum = %v, want %v (midpoints; the open bucket at its lower bound)", sum, wantSum)
	}
}

// TestSchedLatencyExported: the histogram is on every registry, with its
// own buckets, and counts the goroutines this test makes wait.
func TestSchedLatencyExported(t *testing.T) {
	reg := NewRegistry()
	before := schedCount(t, reg)
	// More runnable goroutines than Ps: some of them wait.
	done := make(chan struct{})
	for range 4 * runtime.GOMAXPROCS(0) {
		go func() {
			for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
				runtime.Gosched()
			}
			done <- struct{}{}
		}()
	}
	for range 4 * runtime.GOMAXPROCS(0) {
		<-done
	}
	if after := schedCount(t, reg); after <= before {
		t.Errorf("scheduling latency count %d → %d: the goroutines' waits were not counted", before, after)
	}
	h := schedHistogram(t, reg)
	var bounds []float64
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if !slices.Equal(bounds, SchedLatencyBuckets) {
		t.Errorf("bucket bounds %v, want %v", bounds, SchedLatencyBuckets)
	}
	if !slices.Contains(bounds, 0.01) {
		t.Errorf("no 10 ms bound in %v: the scale benchmark's share of waits over 10 ms reads it", bounds)
	}
}

func schedCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	return schedHistogram(t, reg).GetSampleCount()
}

func schedHistogram(t *testing.T, reg *prometheus.Registry) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == SchedLatencyName {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatal(SchedLatencyName + " not gathered")
	return nil
}
