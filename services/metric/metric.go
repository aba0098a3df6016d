// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package metric builds and registers the Prometheus metrics of nodepulse's
// components: one call a metric instead of an options literal each, and one
// registration of them all on a registry that may be nil (a component built
// by a test that reads no metrics registers nothing, and building it twice
// does not clash).
package metric

import "github.com/prometheus/client_golang/prometheus"

// Counter returns an unregistered counter.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec returns an unregistered counter with the given labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge returns an unregistered gauge.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeFunc returns an unregistered gauge whose value is read from f at
// each scrape.
func GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// HistogramVec returns an unregistered histogram with the given buckets and
// labels.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Register registers every collector on reg, stopping at the first error
// (a name registered twice); a nil reg registers nothing.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
