// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package eviction

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepulse/nodepulse/services/metric"
)

// Metric names.
const (
	MetricScheduled  = "nodepulse_monitor_evictions_scheduled_total"
	MetricCancelled  = "nodepulse_monitor_evictions_cancelled_total"
	MetricExecuted   = "nodepulse_monitor_evictions_executed_total"
	MetricFailed     = "nodepulse_monitor_eviction_failures_total"
	MetricQueueDepth = "nodepulse_monitor_eviction_queue_depth"
	MetricStale      = "nodepulse_monitor_eviction_stale_decisions_total"
)

type metrics struct {
	scheduled, cancelled, failed, stale prometheus.Counter
	executed                            *prometheus.CounterVec
	depth                               prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		scheduled: metric.Counter(MetricScheduled,
			"Pod deletions scheduled (or rescheduled) by the evictor because of NoExecute taints."),
		cancelled: metric.Counter(MetricCancelled,
			"Scheduled pod deletions cancelled (taints gone, or tolerated for ever)."),
		executed: metric.CounterVec(MetricExecuted,
			"Pods deleted by the evictor, by zone of their node.", "zone"),
		failed: metric.Counter(MetricFailed,
			"Evictions that failed every try (retried at the next resync) or were fenced."),
		depth: metric.Gauge(MetricQueueDepth,
			"Pod deletions pending on the leader."),
		stale: metric.Counter(MetricStale,
			"Evictions refused by etcd because the node's records changed after the decision (the monitor's view lagged); decided again on a fresh read."),
	}
}

// register registers the metrics on reg; a nil reg registers nothing.
func (m *metrics) register(reg prometheus.Registerer) error {
	return metric.Register(reg, m.scheduled, m.cancelled, m.executed, m.failed, m.depth, m.stale)
}

func sortSchedules(s []PodSchedule) {
	sort.Slice(s, func(i, j int) bool {
		if !s[i].FireAt.Equal(s[j].FireAt) {
			return s[i].FireAt.Before(s[j].FireAt)
		}
		return s[i].Namespace+"/"+s[i].Name < s[j].Namespace+"/"+s[j].Name
	})
}
