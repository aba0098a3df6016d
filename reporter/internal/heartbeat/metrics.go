// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package heartbeat

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the heartbeat client.
type Metrics struct {
	LeaseRenewals prometheus.Counter
	StatusReports *prometheus.CounterVec
	AckLatency    *prometheus.HistogramVec
	AckErrors     *prometheus.CounterVec
	Reconnects    prometheus.Counter
	Connected     prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LeaseRenewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_reporter_lease_renewals_sent_total",
			Help: "Lease renewals sent to a collector.",
		}),
		StatusReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodepulse_reporter_status_reports_sent_total",
			Help: "Full status reports sent, by why: connect, changed, periodic, requested, startup.",
		}, []string{"reason"}),
		AckLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodepulse_reporter_ack_latency_seconds",
			Help:    "Time from sending a request to receiving its ack, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"kind"}),
		AckErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodepulse_reporter_ack_errors_total",
			Help: "Requests the collector refused, by kind and gRPC code.",
		}, []string{"kind", "code"}),
		Reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_reporter_reconnects_total",
			Help: "Report streams that ended unexpectedly and were reopened.",
		}),
		Connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_reporter_stream_connected",
			Help: "1 while a registered report stream is open.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.LeaseRenewals, m.StatusReports, m.AckLatency, m.AckErrors, m.Reconnects, m.Connected)
	}
	return m
}
