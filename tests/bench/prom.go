// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/nodepulse/nodepulse/tests/promtext"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample by
// metric name, with its raw label string.
type Metrics map[string][]Sample

// Sample is one line of the exposition format.
type Sample = promtext.Sample

// ParseMetrics reads the Prometheus text exposition format (comments and
// timestamps ignored).
func ParseMetrics(r io.Reader) (Metrics, error) {
	m, err := promtext.Parse(r)
	return Metrics(m), err
}

// Value is the sum of every sample of name whose labels contain every
// fragment of match (e.g. `method="put"`); NaN when name is absent.
func (m Metrics) Value(name string, match ...string) float64 {
	if _, ok := m[name]; !ok {
		return math.NaN()
	}
	return promtext.Samples(m).Sum(name, match...)
}

// Buckets returns the cumulative buckets of histogram name (summed over
// other labels), sorted by bound with +Inf last.
func (m Metrics) Buckets(name string, match ...string) []PromBucket {
	byLe := map[float64]float64{}
	for _, s := range m[name+"_bucket"] {
		if !promtext.Matches(s.Labels, match...) {
			continue
		}
		le, ok := labelValue(s.Labels, "le")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		byLe[v] += s.Value
	}
	out := make([]PromBucket, 0, len(byLe))
	for le, c := range byLe {
		out = append(out, PromBucket{Le: le, Count: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Le < out[j].Le })
	return out
}

func labelValue(labels, key string) (string, bool) {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.Trim(strings.TrimSpace(v), `"`), true
		}
	}
	return "", false
}

// Scrape fetches and parses url.
func Scrape(ctx context.Context, c *http.Client, url string) (Metrics, error) {
	m, err := promtext.Scrape(ctx, c, url)
	return Metrics(m), err
}
