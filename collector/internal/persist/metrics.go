package persist

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/collector/internal/live"
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
}

func newMetrics(reg prometheus.Registerer, table *live.Table) (*metrics, error) {
	m := &metrics{
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodepulse_collector_etcd_txns_total",
			Help: "etcd transactions by kind (status, lease, node) and result (ok, conflict, error).",
		}, []string{"kind", "result"}),
		writeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodepulse_collector_etcd_write_duration_seconds",
			Help:    "Latency of etcd transactions by kind (status, lease, node, register-read).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"kind"}),
		batchOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodepulse_collector_etcd_batch_ops",
			Help:    "Operations per etcd transaction by kind: how well group commit and checkpoint batching work.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}, []string{"kind"}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_collector_status_writes_queued",
			Help: "Status writes waiting for the group committer.",
		}),
		available: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_collector_etcd_available",
			Help: "1 while etcd answers pings and writes, 0 during an outage.",
		}),
		ckPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_collector_lease_checkpoints_scheduled",
			Help: "Lease checkpoints scheduled (due now or later).",
		}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_collector_lease_checkpoints_total",
			Help: "Leases written to etcd.",
		}),
		ckDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_collector_lease_attach_checkpoints_deferred_total",
			Help: "Attachments whose first lease checkpoint waited for the node's regular phase, because the stored lease stays within its declared staleness until then.",
		}),
		regQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_collector_registrations_queued",
			Help: "Registrations waiting for a registration worker.",
		}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_collector_peers",
			Help: "Other collectors in discovery, not draining (-1 until first listed). With none, registrations are never refused for the wait (--registration.max-wait): a refused reporter would only come back here.",
		}),
		regInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodepulse_collector_registration_batches_in_flight",
			Help: "Registration batches being read from or written to etcd (at most --registration.concurrency).",
		}),
		regYields: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_collector_registration_yields_total",
			Help: "Times a registration batch waited because the status queue was more than half full (statuses of registered nodes go first).",
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_collector_etcd_timeouts_total",
			Help: "etcd reads and writes that missed their deadline (not counted as an outage: the availability pings decide).",
		}),
		pingFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodepulse_collector_etcd_ping_failures_total",
			Help: "Failed etcd availability pings (etcd is declared unavailable after --etcd.ping-failures in a row).",
		}),
	}
	unpersisted := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "nodepulse_collector_leases_unpersisted",
		Help: "Attached nodes whose latest acknowledged renewal is not yet in etcd (acknowledged-but-unpersisted backlog).",
	}, func() float64 { return float64(table.Unpersisted()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{m.txns, m.writeSeconds, m.batchOps, m.queued, m.available, m.ckPending, m.checkpoints, m.ckDeferred, m.regQueued, m.peers, m.regInFlight, m.regYields, m.timeouts, m.pingFailures, unpersisted} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
