// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package admin

import (
	"math"
	"runtime/metrics"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// schedLatencyMetric is the Go runtime's distribution of the time
// goroutines spend runnable before they run: how long work that is ready
// waits for a CPU, inside the process (all its Ps busy) or outside it (the
// kernel or the hypervisor not running its threads).
const schedLatencyMetric = "/sched/latencies:seconds"

// SchedLatencyName is the exported histogram; the scale benchmark reads it
// from every process.
const SchedLatencyName = "nodepulse_go_sched_latency_seconds"

// SchedLatencyBuckets are the upper bounds, in seconds, of the exported
// histogram. 10 ms must stay one of them: the benchmark reports the share
// of waits over it. client_golang's Go collector re-buckets runtime time
// histograms to powers of ten (1 ms, 10 ms, 100 ms), too coarse to tell a
// 3 ms tail from a 9 ms one, which is the difference between meeting a
// 10 ms latency goal and not.
var SchedLatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1,
}

// schedLatency exports /sched/latencies:seconds as
// nodepulse_go_sched_latency_seconds.
type schedLatency struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	s    []metrics.Sample
}

func newSchedLatency() *schedLatency {
	return &schedLatency{
		desc: prometheus.NewDesc(SchedLatencyName,
			"Time goroutines waited runnable before running (Go runtime/metrics "+schedLatencyMetric+"), in finer buckets than go_sched_latencies_seconds; the sum is estimated from bucket midpoints. A tail here is latency that no code path of the process explains: every Go thread busy, or the kernel not running them.",
			nil, nil),
		s: []metrics.Sample{{Name: schedLatencyMetric}},
	}
}

func (c *schedLatency) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *schedLatency) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	metrics.Read(c.s)
	v := c.s[0].Value
	c.mu.Unlock()
	if v.Kind() != metrics.KindFloat64Histogram {
		return // not in this runtime
	}
	count, sum, cum := rebucket(v.Float64Histogram(), SchedLatencyBuckets)
	ch <- prometheus.MustNewConstHistogram(c.desc, count, sum, cum)
}

// rebucket sums a runtime histogram into cumulative counts at bounds. A
// runtime bucket [lo, hi) counts towards every bound ≥ hi: never below its
// true value, and the runtime's buckets are narrow (a few per power of
// two), so a bound is off by at most one of them. Buckets beyond the last
// bound count only in the total.
func rebucket(h *metrics.Float64Histogram, bounds []float64) (count uint64, sum float64, cum map[float64]uint64) {
	per := make([]uint64, len(bounds))
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		count += n
		switch {
		case math.IsInf(hi, 1):
			sum += float64(n) * lo
		case !math.IsInf(lo, -1):
			sum += float64(n) * (lo + hi) / 2
		}
		for j, b := range bounds {
			if hi <= b {
				per[j] += n
				break
			}
		}
	}
	cum = make(map[float64]uint64, len(bounds))
	var acc uint64
	for j, b := range bounds {
		acc += per[j]
		cum[b] = acc
	}
	return count, sum, cum
}
