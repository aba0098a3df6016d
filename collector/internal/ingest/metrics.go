// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/metric"
)

type metrics struct {
	streams    prometheus.Gauge
	pending    prometheus.Gauge
	messages   *prometheus.CounterVec
	validation *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	detached   *prometheus.CounterVec
	waiting    prometheus.Counter
	queued     prometheus.Counter
	// Rebalancing (rebalance.go).
	movesRequested, movesAccepted, hints prometheus.Counter
	// clockSkew: how far reporters' clocks are from this collector's.
	clockSkew prometheus.Observer

	// Children resolved once: the per-message path does no label lookup.
	leaseOK, statusOK, statusUnchanged, statusBusy, statusUnavailable, leavingOK prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		streams: metric.Gauge("nodepulse_collector_streams_open", "Open Report streams."),
		pending: metric.Gauge("nodepulse_collector_streams_unregistered",
			"Open Report streams whose Register is not stored yet (counted per peer against --limits.unregistered-streams-per-identity / -per-address)."),
		messages: metric.CounterVec("nodepulse_collector_messages_total",
			"Report messages by kind (register, lease, status, leaving) and result (ok, unchanged, invalid, rate_limited, unavailable, busy, permission_denied, failed_precondition).", "kind", "result"),
		validation: metric.CounterVec("nodepulse_collector_validation_failures_total",
			"Refused fields, by field path with map keys and indices replaced by *.", "field"),
		rejected: metric.CounterVec("nodepulse_collector_streams_rejected_total",
			"Report streams refused before registration, by reason (draining, max_streams, unregistered_per_peer: its peer holds --limits.unregistered-streams-per-identity or -per-address streams that have not registered; registration_queue_full, register_timeout).", "reason"),
		detached: metric.CounterVec("nodepulse_collector_streams_detached_total",
			"Registered Report streams that ended, by gRPC code of what ended them (OK: the reporter closed its side; Canceled: the reporter or its connection went away; Aborted: superseded by a newer stream; ResourceExhausted: an ack to it could not be sent for 10 s, its reporter does not read).", "code"),
		waiting: metric.Counter("nodepulse_collector_waiting_total",
			"WAITING feed events: a node's reporter (authorized for it) sent its Register, or was refused before it for capacity, so the monitors hear it is alive while it is not attached."),
		queued: metric.Counter("nodepulse_collector_registers_told_queued_total",
			"Registers that were told they wait in the registration queue (Command.register_queued) because the expected wait was --registration.queued-after or more."),
		movesRequested: metric.Counter("nodepulse_collector_balance_moves_requested_total",
			"Reporters this collector asked to reconnect to another collector because it held more than its share of the fleet (Reconnect, spec §20)."),
		hints: metric.Counter("nodepulse_collector_balance_hints_total",
			"Reconnect commands (rebalancing, drain, etcd unavailable) and refused streams that named a collector to go to: the one with the most room in discovery (spec §20.3)."),
		movesAccepted: metric.Counter("nodepulse_collector_balance_moves_accepted_total",
			"Reporters asked to move for balance whose stream then ended from their side (they reconnected elsewhere, or back here)."),
	}
	skew := metric.HistogramVec("nodepulse_collector_clock_skew_seconds",
		"How far each stored status report's heartbeat (the node's clock when it sent the report) is from this collector's clock when the report arrived, either way: the fleet's clock skew. Measured, never refused; the monitor shows each node's as nodepulse_node_clock_skew_seconds.",
		[]float64{0.1, 1, 10, 60, 600, 3600, 86400, 31536000})
	m.clockSkew = skew.WithLabelValues()
	m.leaseOK = m.messages.WithLabelValues("lease", "ok")
	m.statusOK = m.messages.WithLabelValues("status", "ok")
	m.statusUnchanged = m.messages.WithLabelValues("status", "unchanged")
	m.statusBusy = m.messages.WithLabelValues("status", "busy")
	m.statusUnavailable = m.messages.WithLabelValues("status", "unavailable")
	m.leavingOK = m.messages.WithLabelValues("leaving", "ok")
	if err := metric.Register(reg, m.streams, m.pending, m.messages, m.validation, m.rejected, m.detached, m.waiting, m.queued, m.movesRequested, m.movesAccepted, m.hints, skew); err != nil {
		return nil, err
	}
	return m, nil
}

func zapNode(n string) zap.Field   { return zap.String("node", n) }
func zapReason(r string) zap.Field { return zap.String("reason", r) }
