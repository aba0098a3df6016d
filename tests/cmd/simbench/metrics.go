// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/nodepulse/nodepulse/tests/promtext"
)

// metrics is one scrape of a Prometheus text endpoint: the sum of every
// sample of each metric name (labels ignored; the simulator's metrics used
// here have none).
type metrics map[string]float64

var httpClient = &http.Client{Timeout: 5 * time.Second}

func scrape(ctx context.Context, url string) (metrics, error) {
	return sums(promtext.Scrape(ctx, httpClient, url))
}

func parseMetrics(r io.Reader) (metrics, error) {
	return sums(promtext.Parse(r))
}

// sums adds up the samples of each name, in the order they were served.
func sums(s promtext.Samples, err error) (metrics, error) {
	if s == nil {
		return nil, err
	}
	m := metrics{}
	for name, ss := range s {
		for _, x := range ss {
			m[name] += x.Value
		}
	}
	return m, err
}
