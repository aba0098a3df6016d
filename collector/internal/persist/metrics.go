// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package persist

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	"github.com/nodepulse/nodepulse/services/metric"
)

type metrics struct {
	txns         *prometheus.CounterVec
	writeSeconds *prometheus.HistogramVec
	batchOps     *prometheus.HistogramVec
	queued       prometheus.Gauge
	available    prometheus.Gauge
	ckPending    prometheus.Gauge
	checkpoints  prometheus.Counter
	ckDeferred   prometheus.Counter
	regQueued    prometheus.Gauge
	peers        prometheus.Gauge
	regInFlight  prometheus.Gauge
	regYields    prometheus.Counter
	timeouts     prometheus.Counter
	pingFailures prometheus.Counter
	regRetries   prometheus.Counter
	// statusConflicts: conditional status writes that found status/<name>
	// at another revision than their stream knew.
	statusConflicts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, table *live.Table) (*metrics, error) {
	m := &metrics{
		txns: metric.CounterVec("nodepulse_collector_etcd_txns_total",
			"etcd transactions by kind (status, lease, node) and result (ok, conflict, error).", "kind", "result"),
		writeSeconds: metric.HistogramVec("nodepulse_collector_etcd_write_duration_seconds",
			"Latency of etcd transactions by kind (status, lease, node, register-read).", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "kind"),
		batchOps: metric.HistogramVec("nodepulse_collector_etcd_batch_ops",
			"Operations per etcd transaction by kind: how well group commit and checkpoint batching work.", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}, "kind"),
		queued: metric.Gauge("nodepulse_collector_status_writes_queued",
			"Status writes waiting for the group committer."),
		available: metric.Gauge("nodepulse_collector_etcd_available",
			"1 while etcd answers pings and writes, 0 during an outage."),
		ckPending: metric.Gauge("nodepulse_collector_lease_checkpoints_scheduled",
			"Lease checkpoints scheduled (due now or later)."),
		checkpoints: metric.Counter("nodepulse_collector_lease_checkpoints_total",
			"Leases written to etcd."),
		ckDeferred: metric.Counter("nodepulse_collector_lease_attach_checkpoints_deferred_total",
			"Attachments whose first lease checkpoint waited for the node's regular phase, because the stored lease stays within its declared staleness until then."),
		regQueued: metric.Gauge("nodepulse_collector_registrations_queued",
			"Registrations waiting for a registration worker."),
		peers: metric.Gauge("nodepulse_collector_peers",
			"Other collectors in discovery, not draining (-1 until first listed). With none, registrations are never refused for the wait (--registration.max-wait): a refused reporter would only come back here."),
		regInFlight: metric.Gauge("nodepulse_collector_registration_batches_in_flight",
			"Registration batches being read from or written to etcd (at most --registration.concurrency)."),
		regYields: metric.Counter("nodepulse_collector_registration_yields_total",
			"Times a registration batch waited because the status queue was more than half full (statuses of registered nodes go first)."),
		timeouts: metric.Counter("nodepulse_collector_etcd_timeouts_total",
			"etcd reads and writes that missed their deadline (not counted as an outage: the availability pings decide)."),
		pingFailures: metric.Counter("nodepulse_collector_etcd_ping_failures_total",
			"Failed etcd availability pings (etcd is declared unavailable after --etcd.ping-failures in a row)."),
		regRetries: metric.Counter("nodepulse_collector_registration_read_retries_total",
			"Registration reads tried again after one attempt missed --registration.read-attempt-timeout (a frozen etcd member holds what is sent to it; the next attempt goes to another)."),
		statusConflicts: metric.Counter("nodepulse_collector_status_write_conflicts_total",
			"Status writes not made because the node's stored status had changed since its stream last read or wrote it: a write of the node's previous stream landing late, or another writer. The stream reads what is stored and decides again."),
	}
	unpersisted := metric.GaugeFunc("nodepulse_collector_leases_unpersisted", "Attached nodes whose latest acknowledged renewal is not yet in etcd (acknowledged-but-unpersisted backlog).", func() float64 { return float64(table.Unpersisted()) })
	if err := metric.Register(reg, m.txns, m.writeSeconds, m.batchOps, m.queued, m.available, m.ckPending, m.checkpoints, m.ckDeferred, m.regQueued, m.peers, m.regInFlight, m.regYields, m.timeouts, m.pingFailures, m.regRetries, m.statusConflicts, unpersisted); err != nil {
		return nil, err
	}
	return m, nil
}
