// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// Percentile returns the p-th percentile (0..100) of xs by the
// nearest-rank method; xs need not be sorted and is not modified. NaN for
// an empty slice.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Summary of a sample: count, min, median, p99 and max.
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// Summarize computes a Summary (zero for an empty sample).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Summary{N: len(s), Min: s[0], Median: percentileSorted(s, 50), P99: percentileSorted(s, 99), Max: s[len(s)-1]}
}

// Flatness describes how even a load is over fixed bins (renewals per
// 100 ms): mean, standard deviation, the extremes, the largest relative
// deviation from the mean and the share of bins within ±20% of it.
type Flatness struct {
	Bins         int     `json:"bins"`
	BinSeconds   float64 `json:"binSeconds"`
	Mean         float64 `json:"mean"`
	StdDev       float64 `json:"stdDev"`
	Min          float64 `json:"min"`
	Max          float64 `json:"max"`
	MaxDeviation float64 `json:"maxDeviation"` // max |bin-mean|/mean
	Within20     float64 `json:"within20"`     // share of bins within ±20% of the mean
}

// FlatnessOf bins counts.
func FlatnessOf(bins []float64, binSeconds float64) Flatness {
	f := Flatness{Bins: len(bins), BinSeconds: binSeconds}
	if len(bins) == 0 {
		return f
	}
	f.Min, f.Max = math.Inf(1), math.Inf(-1)
	var sum float64
	for _, b := range bins {
		sum += b
		f.Min, f.Max = min(f.Min, b), max(f.Max, b)
	}
	f.Mean = sum / float64(len(bins))
	var ss float64
	within := 0
	for _, b := range bins {
		ss += (b - f.Mean) * (b - f.Mean)
		if f.Mean > 0 {
			d := math.Abs(b-f.Mean) / f.Mean
			f.MaxDeviation = max(f.MaxDeviation, d)
			if d <= 0.2 {
				within++
			}
		}
	}
	f.StdDev = math.Sqrt(ss / float64(len(bins)))
	f.Within20 = float64(within) / float64(len(bins))
	return f
}

// Histogram is a lock-free latency histogram with log-spaced buckets (5%
// apart, 10 µs to ~20 min), precise enough for p99 and cheap enough to
// record 100,000 observations per second. The baseline writer uses it; its
// snapshots travel as JSON and are subtracted per stage.
type Histogram struct {
	counts [histBuckets]atomic.Uint64
	maxNs  atomic.Int64
}

const (
	histMin     = 10e-6 // seconds: upper bound of bucket 0
	histGrowth  = 1.05
	histBuckets = 400
)

var logGrowth = math.Log(histGrowth)

// BucketUpper is the upper bound (seconds) of bucket i.
func BucketUpper(i int) float64 { return histMin * math.Pow(histGrowth, float64(i)) }

func bucketOf(sec float64) int {
	if sec <= histMin {
		return 0
	}
	i := int(math.Ceil(math.Log(sec/histMin) / logGrowth))
	// Guard against rounding just below a bucket boundary.
	if i > 0 && sec <= BucketUpper(i-1) {
		i--
	}
	return min(i, histBuckets-1)
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	h.counts[bucketOf(d.Seconds())].Add(1)
	for {
		m := h.maxNs.Load()
		if int64(d) <= m || h.maxNs.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// HistSnapshot is a cumulative copy of a Histogram: sparse bucket counts
// and the largest value seen so far.
type HistSnapshot struct {
	Counts map[int]uint64 `json:"counts"`
	MaxSec float64        `json:"maxSec"`
}

// Snapshot copies the histogram.
func (h *Histogram) Snapshot() HistSnapshot {
	s := HistSnapshot{Counts: map[int]uint64{}, MaxSec: time.Duration(h.maxNs.Load()).Seconds()}
	for i := range h.counts {
		if c := h.counts[i].Load(); c > 0 {
			s.Counts[i] = c
		}
	}
	return s
}

// Sub returns the observations of s that are not in earlier.
func (s HistSnapshot) Sub(earlier HistSnapshot) HistSnapshot {
	out := HistSnapshot{Counts: map[int]uint64{}, MaxSec: s.MaxSec}
	for i, c := range s.Counts {
		if d := c - earlier.Counts[i]; d > 0 && c >= earlier.Counts[i] {
			out.Counts[i] = d
		}
	}
	return out
}

// Total number of observations.
func (s HistSnapshot) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Quantile q (0..1): the upper bound of the bucket holding the q-th
// observation (at most 5% above the true value). NaN when empty.
func (s HistSnapshot) Quantile(q float64) float64 {
	total := s.Total()
	if total == 0 {
		return math.NaN()
	}
	keys := make([]int, 0, len(s.Counts))
	for k := range s.Counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	rank := uint64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var cum uint64
	for _, k := range keys {
		cum += s.Counts[k]
		if cum >= rank {
			return BucketUpper(k)
		}
	}
	return BucketUpper(keys[len(keys)-1])
}

// MaxBucket is the upper bound of the highest non-empty bucket: the
// largest observation of a delta, to 5%.
func (s HistSnapshot) MaxBucket() float64 {
	hi := -1
	for k := range s.Counts {
		hi = max(hi, k)
	}
	if hi < 0 {
		return math.NaN()
	}
	return BucketUpper(hi)
}

// PromBucket is one cumulative bucket of a Prometheus histogram.
type PromBucket struct {
	Le    float64
	Count float64
}

// PromQuantile estimates quantile q (0..1) of a Prometheus histogram from
// its cumulative buckets (sorted by le, +Inf last) the way PromQL's
// histogram_quantile does: linear interpolation inside the bucket that
// holds the rank. With the simulator's factor-2 buckets the result is
// within a factor of two of the truth; Report says so.
func PromQuantile(q float64, buckets []PromBucket) float64 {
	if len(buckets) == 0 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].Count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	prevLe, prevCount := 0.0, 0.0
	for _, b := range buckets {
		if b.Count >= rank {
			if math.IsInf(b.Le, 1) {
				return prevLe // above the last finite bound: report that bound
			}
			if b.Count == prevCount {
				return b.Le
			}
			return prevLe + (b.Le-prevLe)*(rank-prevCount)/(b.Count-prevCount)
		}
		prevLe, prevCount = b.Le, b.Count
	}
	return prevLe
}

// PromMaxBound is the upper bound of the highest bucket that gained
// observations: the largest value is at most this (+Inf when it fell in
// the overflow bucket).
func PromMaxBound(buckets []PromBucket) float64 {
	prev := 0.0
	hi := math.NaN()
	for _, b := range buckets {
		if b.Count > prev {
			hi = b.Le
		}
		prev = b.Count
	}
	return hi
}

// SubBuckets subtracts two cumulative bucket lists of the same histogram.
func SubBuckets(later, earlier []PromBucket) []PromBucket {
	out := make([]PromBucket, len(later))
	for i, b := range later {
		out[i] = b
		for _, e := range earlier {
			if e.Le == b.Le {
				out[i].Count = b.Count - e.Count
				break
			}
		}
	}
	return out
}
