// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package heartbeat

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/services/metric"
)

// Metrics of the heartbeat client.
type Metrics struct {
	LeaseRenewals prometheus.Counter
	StatusReports *prometheus.CounterVec
	AckLatency    *prometheus.HistogramVec
	AckErrors     *prometheus.CounterVec
	Reconnects    prometheus.Counter
	Connected     prometheus.Gauge
	Hints         *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
// A name registered twice panics: two of these on one registry is a wiring
// bug, not a condition to run with.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LeaseRenewals: metric.Counter("nodepulse_reporter_lease_renewals_sent_total",
			"Lease renewals sent to a collector."),
		StatusReports: metric.CounterVec("nodepulse_reporter_status_reports_sent_total",
			"Full status reports sent, by why: connect, changed, periodic, requested, startup.", "reason"),
		AckLatency: metric.HistogramVec("nodepulse_reporter_ack_latency_seconds",
			"Time from sending a request to receiving its ack, by kind.",
			prometheus.ExponentialBuckets(0.0005, 2, 16), "kind"),
		AckErrors: metric.CounterVec("nodepulse_reporter_ack_errors_total",
			"Requests the collector refused, by kind and gRPC code.", "kind", "code"),
		Reconnects: metric.Counter("nodepulse_reporter_reconnects_total",
			"Report streams that ended unexpectedly and were reopened."),
		Hints: metric.CounterVec("nodepulse_reporter_collector_hints_total",
			"Streams opened after a Reconnect that named a collector, by result: followed (opened there), unknown (not an address of the connection, or not serving; opened round-robin).", "result"),
		Connected: metric.Gauge("nodepulse_reporter_stream_connected",
			"1 while a registered report stream is open."),
	}
	if err := metric.Register(reg, m.LeaseRenewals, m.StatusReports, m.AckLatency, m.AckErrors, m.Reconnects, m.Connected, m.Hints); err != nil {
		panic(err)
	}
	return m
}
