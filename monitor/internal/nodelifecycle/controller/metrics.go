// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Metric names used by the alert rules in deploy/prometheus; keep in sync.
const (
	MetricNodes              = "nodepulse_monitor_nodes"
	MetricZoneState          = "nodepulse_monitor_zone_state"
	MetricTransitions        = "nodepulse_monitor_ready_transitions_total"
	MetricQueueDepth         = "nodepulse_monitor_taint_queue_depth"
	MetricTaintsApplied      = "nodepulse_monitor_noexecute_taints_applied_total"
	MetricHeartbeatAge       = "nodepulse_monitor_heartbeat_age_seconds"
	MetricStaleHeartbeat     = "nodepulse_monitor_stale_heartbeat_nodes"
	MetricLeader             = "nodepulse_monitor_leader"
	MetricLeaderChanges      = "nodepulse_monitor_leader_changes_total"
	MetricPaused             = "nodepulse_monitor_judgement_paused"
	MetricFencedWrites       = "nodepulse_monitor_fenced_writes_total"
	MetricHealthWrites       = "nodepulse_monitor_health_writes_total"
	MetricPassDuration       = "nodepulse_monitor_health_pass_duration_seconds"
	MetricGracePeriodSeconds = "nodepulse_monitor_grace_period_seconds"
	MetricPodsNotReady       = "nodepulse_monitor_pods_marked_not_ready_total"
	MetricEventsWritten      = "nodepulse_monitor_events_written_total"
	MetricEventsDropped      = "nodepulse_monitor_events_dropped_total"
	MetricSweepJudged        = "nodepulse_monitor_sweep_judged_total"
)

type metrics struct {
	zoneState     *prometheus.GaugeVec
	transitions   *prometheus.CounterVec
	queueDepth    *prometheus.GaugeVec
	taintsApplied *prometheus.CounterVec
	heartbeatAge  prometheus.Histogram
	staleHB       prometheus.Gauge
	leader        prometheus.Gauge
	leaderChanges prometheus.Counter
	paused        prometheus.Gauge
	fenced        prometheus.Counter
	writes        *prometheus.CounterVec
	passDuration  prometheus.Histogram
	grace         prometheus.Gauge
	podsNotReady  prometheus.Counter
	eventsWritten prometheus.Counter
	eventsDropped *prometheus.CounterVec
	sweepJudged   prometheus.Counter
}

func newMetrics(c *Controller) *metrics {
	return &metrics{
		zoneState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricZoneState,
			Help: "1 for the current state of each zone (Initial, Normal, PartialDisruption, FullDisruption), as judged by the leader."}, []string{"zone", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricTransitions,
			Help: "Ready condition transitions seen by the leader's health pass, by old and new status."}, []string{"from", "to"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricQueueDepth,
			Help: "Nodes waiting in each zone's rate-limited NoExecute taint queue."}, []string{"zone"}),
		taintsApplied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricTaintsApplied,
			Help: "not-ready/unreachable NoExecute taints added from the zone queues."}, []string{"zone"}),
		heartbeatAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricHeartbeatAge,
			Help:    "Per node and health pass: time since the monitor last saw the node alive (or granted it a fresh grace period).",
			Buckets: []float64{1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 90, 120, 300, 600}}),
		staleHB: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricStaleHeartbeat,
			Help: "Nodes whose last heartbeat is older than half the grace period (leader only)."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLeader,
			Help: "1 while this monitor replica is the leader of the node lifecycle controller."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricLeaderChanges,
			Help: "Times this replica became leader."}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricPaused,
			Help: "1 while the leader has stopped judging nodes because its own view is stale (etcd watch silent, or every feed stale and no lease advancing)."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricFencedWrites,
			Help: "Writes rejected because this replica was no longer the leader (ErrFenced)."}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricHealthWrites,
			Help: "health/ writes by result (ok, conflict, fenced, error)."}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricPassDuration,
			Help: "Duration of one health pass.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		grace: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricGracePeriodSeconds,
			Help: "The configured --node-monitor-grace-period, for alert thresholds."}),
		podsNotReady: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricPodsNotReady,
			Help: "Pods set to Ready=False because their node stopped being Ready (spec §6.3)."}),
		eventsWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricEventsWritten,
			Help: "Node events (RegisteredNode, NodeNotReady, RemovingNode) written to the store."}),
		eventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEventsDropped,
			Help: "Node events not written, by reason: queue_full (the bounded event queue was full), fenced (leadership lost), write_failed."}, []string{"reason"}),
		sweepJudged: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricSweepJudged,
			Help: "Nodes judged by the deadline sweep between health passes (nodes past their grace period since their last judgement)."}),
	}
}

func (m *metrics) register(reg prometheus.Registerer, nodes prometheus.Collector) error {
	for _, c := range []prometheus.Collector{m.zoneState, m.transitions, m.queueDepth, m.taintsApplied, m.heartbeatAge,
		m.staleHB, m.leader, m.leaderChanges, m.paused, m.fenced, m.writes, m.passDuration, m.grace, m.podsNotReady, m.eventsWritten, m.eventsDropped, m.sweepJudged, nodes} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// nodesCollector reports served nodes by condition and status from the
// cache at scrape time, on every replica (alerts aggregate with max).
type nodesCollector struct {
	c    *Controller
	desc *prometheus.Desc
}

func (n nodesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- n.desc }

func (n nodesCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ cond, status, zone string }
	counts := map[key]int{}
	types := append(slices.Clone(nodemodel.ReporterConditions), nodemodel.NetworkUnavailable)
	// Every scrape walks the fleet: in place, without copying or sorting
	// 100,000 nodes.
	n.c.cache.EachNode(func(nd *nodev1.Node) {
		zone := nodemodel.ZoneName(nodemodel.ZoneKey(nd.GetMetadata().GetLabels()))
		for _, t := range types {
			st := nodemodel.ConditionStatus(nd.GetStatus().GetConditions(), t)
			if st == "" {
				if t != nodemodel.Ready {
					continue
				}
				st = "Missing"
			}
			counts[key{t, st, zone}]++
		}
	})
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(n.desc, prometheus.GaugeValue, float64(v), k.cond, k.status, k.zone)
	}
}
