// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package promtext reads what a component serves on /metrics (the
// Prometheus text exposition format) into its samples by metric name, for
// the tools that measure nodepulse from outside: the scale benchmark
// (tests/bench) and simbench. It imports only the standard library on
// purpose: simbench's binary is also the simulator it measures, so what it
// links shows up in the simulator's memory.
package promtext

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Samples is one scrape: every sample by metric name, in the order served.
type Samples map[string][]Sample

// Sample is one line of the exposition format.
type Sample struct {
	Labels string // e.g. `le="0.5",method="put"` (as written by the target)
	Value  float64
}

// Parse reads the Prometheus text exposition format (comments and
// timestamps ignored).
func Parse(r io.Reader) (Samples, error) {
	m := Samples{}
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

// Scrape fetches and parses url.
func Scrape(ctx context.Context, c *http.Client, url string) (Samples, error) {
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
	return Parse(resp.Body)
}

// Sum is the sum of every sample of name whose labels contain every
// fragment of match (e.g. `kind="lease"`); 0 when there is none.
func (s Samples) Sum(name string, match ...string) float64 {
	var sum float64
	for _, x := range s[name] {
		if Matches(x.Labels, match...) {
			sum += x.Value
		}
	}
	return sum
}

// Matches says whether labels (as served) contain every fragment of match.
func Matches(labels string, match ...string) bool {
	for _, f := range match {
		if !strings.Contains(labels, f) {
			return false
		}
	}
	return true
}
