// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import "github.com/prometheus/client_golang/prometheus"

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
}

// NewMetrics creates the metrics, registered on reg when not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodepulse_sim_nodes", Help: "Virtual nodes in the simulation."}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodepulse_sim_streams_connected",
			Help: "Virtual nodes with a registered, open report stream."}),
		registrations: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_registrations_total",
			Help: "Register messages acknowledged."}),
		registerLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nodepulse_sim_register_latency_seconds",
			Help: "Stream open + Register until its ack.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_register_queued_total",
			Help: "RegisterQueued commands received while a Register waited for its ack (each extends the wait)."}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_lease_renewals_sent_total",
			Help: "Lease renewals sent."}),
		statuses: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_status_reports_sent_total",
			Help: "Status reports sent."}),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nodepulse_sim_lease_ack_latency_seconds",
			Help: "Lease renewal send until its ack.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		ackErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_ack_errors_total",
			Help: "Acks that refused a request."}),
		streamErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_stream_errors_total",
			Help: "Streams that failed to open or register, or broke (excluding deliberate stops)."}),
		connStates: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodepulse_sim_connections",
			Help: "gRPC connections to collectors by connectivity state."}, []string{"state"}),
		connLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodepulse_sim_connections_lost_total",
			Help: "Times a READY connection left READY (server gone, keepalive timeout, GOAWAY)."}),
	}
	if reg != nil {
		reg.MustRegister(m.nodes, m.connected, m.registrations, m.registerLatency, m.queued, m.renewals, m.statuses,
			m.ackLatency, m.ackErrors, m.streamErrors, m.connStates, m.connLost)
	}
	return m
}
