// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/services/metric"
)

// Metrics of the simulator.
type Metrics struct {
	nodes           prometheus.Gauge
	connected       prometheus.Gauge
	registrations   prometheus.Counter
	registerLatency prometheus.Histogram
	queued          prometheus.Counter
	renewals        prometheus.Counter
	statuses        prometheus.Counter
	ackLatency      prometheus.Histogram
	ackErrors       prometheus.Counter
	streamErrors    prometheus.Counter
	connStates      *prometheus.GaugeVec
	connLost        prometheus.Counter
	hints           *prometheus.CounterVec
}

// NewMetrics creates the metrics, registered on reg when not nil. A name
// registered twice panics: two simulators on one registry is a wiring bug.
// The histograms and the gauge vector are built by hand because package
// metric has no plain histogram or gauge vector.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		nodes:         metric.Gauge("nodepulse_sim_nodes", "Virtual nodes in the simulation."),
		connected:     metric.Gauge("nodepulse_sim_streams_connected", "Virtual nodes with a registered, open report stream."),
		registrations: metric.Counter("nodepulse_sim_registrations_total", "Register messages acknowledged."),
		registerLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nodepulse_sim_register_latency_seconds",
			Help: "Stream open + Register until its ack.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		queued: metric.Counter("nodepulse_sim_register_queued_total",
			"RegisterQueued commands received while a Register waited for its ack (each extends the wait)."),
		renewals: metric.Counter("nodepulse_sim_lease_renewals_sent_total", "Lease renewals sent."),
		statuses: metric.Counter("nodepulse_sim_status_reports_sent_total", "Status reports sent."),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nodepulse_sim_lease_ack_latency_seconds",
			Help: "Lease renewal send until its ack.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		ackErrors: metric.Counter("nodepulse_sim_ack_errors_total", "Acks that refused a request."),
		streamErrors: metric.Counter("nodepulse_sim_stream_errors_total",
			"Streams that failed to open or register, or broke (excluding deliberate stops)."),
		connStates: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodepulse_sim_connections",
			Help: "gRPC connections to collectors by connectivity state."}, []string{"state"}),
		connLost: metric.Counter("nodepulse_sim_connections_lost_total",
			"Times a READY connection left READY (server gone, keepalive timeout, GOAWAY)."),
		hints: metric.CounterVec("nodepulse_sim_collector_hints_total",
			"Streams opened after a Reconnect that named a collector, by result: followed, unknown (opened round-robin), ignored (--ignore-hints).", "result"),
	}
	if err := metric.Register(reg, m.nodes, m.connected, m.registrations, m.registerLatency, m.queued, m.renewals, m.statuses,
		m.ackLatency, m.ackErrors, m.streamErrors, m.connStates, m.connLost, m.hints); err != nil {
		panic(err)
	}
	return m
}
