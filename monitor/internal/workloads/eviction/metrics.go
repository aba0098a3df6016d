package eviction

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	MetricScheduled  = "nodepulse_monitor_evictions_scheduled_total"
	MetricCancelled  = "nodepulse_monitor_evictions_cancelled_total"
	MetricExecuted   = "nodepulse_monitor_evictions_executed_total"
	MetricFailed     = "nodepulse_monitor_eviction_failures_total"
	MetricQueueDepth = "nodepulse_monitor_eviction_queue_depth"
)

type metrics struct {
	scheduled, cancelled, failed prometheus.Counter
	executed                     *prometheus.CounterVec
	depth                        prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		scheduled: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricScheduled,
			Help: "Pod deletions scheduled (or rescheduled) by the evictor because of NoExecute taints."}),
		cancelled: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricCancelled,
			Help: "Scheduled pod deletions cancelled (taints gone, or tolerated for ever)."}),
		executed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricExecuted,
			Help: "Pods deleted by the evictor, by zone of their node."}, []string{"zone"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricFailed,
			Help: "Evictions that failed every try (retried at the next resync) or were fenced."}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricQueueDepth,
			Help: "Pod deletions pending on the leader."}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.scheduled, m.cancelled, m.executed, m.failed, m.depth} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func sortSchedules(s []PodSchedule) {
	sort.Slice(s, func(i, j int) bool {
		if !s[i].FireAt.Equal(s[j].FireAt) {
			return s[i].FireAt.Before(s[j].FireAt)
		}
		return s[i].Namespace+"/"+s[i].Name < s[j].Namespace+"/"+s[j].Name
	})
}
