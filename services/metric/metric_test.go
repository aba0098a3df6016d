// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package metric

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildAndRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := Counter("t_total", "a counter")
	cv := CounterVec("t_kind_total", "by kind", "kind")
	g := Gauge("t_gauge", "a gauge")
	gf := GaugeFunc("t_func", "read at scrape", func() float64 { return 7 })
	h := HistogramVec("t_seconds", "latency", []float64{1, 2}, "kind")
	if err := Register(reg, c, cv, g, gf, h); err != nil {
		t.Fatal(err)
	}
	c.Inc()
	cv.WithLabelValues("a").Add(2)
	g.Set(3)
	h.WithLabelValues("a").Observe(1.5)
	want := `
# HELP t_func read at scrape
# TYPE t_func gauge
t_func 7
# HELP t_gauge a gauge
# TYPE t_gauge gauge
t_gauge 3
# HELP t_kind_total by kind
# TYPE t_kind_total counter
t_kind_total{kind="a"} 2
# HELP t_total a counter
# TYPE t_total counter
t_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "t_total", "t_kind_total", "t_gauge", "t_func"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(h); n != 1 {
		t.Fatalf("histogram series %d, want 1", n)
	}
	// The same name again is refused, and a nil registry takes anything.
	if err := Register(reg, Counter("t_total", "again")); err == nil {
		t.Fatal("a name registered twice was accepted")
	}
	if err := Register(nil, Counter("t_total", "again")); err != nil {
		t.Fatal(err)
	}
}
