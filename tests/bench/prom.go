// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample by
// metric name, with its raw label string.
type Metrics map[string][]Sample

// Sample is one line of the exposition format.
type Sample struct {
	Labels string // e.g. `le="0.5",method="put"` (as written by the target)
	Value  float64
}

// ParseMetrics reads the Prometheus text exposition format (comments and
// timestamps ignored).
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		var name, labels, rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("bad metric line %q", line)
			}
			name, labels, rest = line[:i], line[i+1:j], strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				return nil, fmt.Errorf("bad metric line %q", line)
			}
			name, rest = f[0], f[1]
		}
		if f := strings.Fields(rest); len(f) > 0 {
			rest = f[0]
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			return nil, fmt.Errorf("bad value in %q: %w", line, err)
		}
		m[name] = append(m[name], Sample{Labels: labels, Value: v})
	}
	return m, sc.Err()
}

// Value is the sum of every sample of name whose labels contain every
// fragment of match (e.g. `method="put"`); NaN when name is absent.
func (m Metrics) Value(name string, match ...string) float64 {
	ss, ok := m[name]
	if !ok {
		return math.NaN()
	}
	var sum float64
	for _, s := range ss {
		if matches(s.Labels, match) {
			sum += s.Value
		}
	}
	return sum
}

func matches(labels string, match []string) bool {
	for _, f := range match {
		if !strings.Contains(labels, f) {
			return false
		}
	}
	return true
}

// Buckets returns the cumulative buckets of histogram name (summed over
// other labels), sorted by bound with +Inf last.
func (m Metrics) Buckets(name string, match ...string) []PromBucket {
	byLe := map[float64]float64{}
	for _, s := range m[name+"_bucket"] {
		if !matches(s.Labels, match) {
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
