package lifecycle

import (
	"maps"
	"testing"
	"time"
	"unsafe"

	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func statuses(ready, notReady int) []string {
	var s []string
	for range ready {
		s = append(s, nodemodel.True)
	}
	for i := range notReady {
		if i%2 == 0 {
			s = append(s, nodemodel.Unknown)
		} else {
			s = append(s, "") // missing Ready counts as not ready
		}
	}
	return s
}

func TestZoneKey(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{nodemodel.LabelZone: "a", nodemodel.LabelRegion: "r"}, "r\x00a"},
		{map[string]string{nodemodel.LabelZoneLegacy: "old", nodemodel.LabelZone: "new"}, "\x00old"},
		{map[string]string{nodemodel.LabelRegionLegacy: "r1", nodemodel.LabelZone: "z"}, "r1\x00z"},
	} {
		if got := ZoneKey(tc.labels); got != tc.want {
			t.Errorf("ZoneKey(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
	if ZoneName("r\x00a") != "r/a" || ZoneName("\x00a") != "a" {
		t.Error("ZoneName")
	}
}

func TestComputeZoneStateAndRates(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name            string
		ready, notReady int
		want            ZoneState
		qps             float64
	}{
		{"all ready", 10, 0, ZoneNormal, 0.1},
		{"two down of two is full", 0, 2, ZoneFullDisruption, 0.1},
		{"two not ready is never partial", 1, 2, ZoneNormal, 0.1},
		{"3 of 5 (0.6) small zone stops", 2, 3, ZonePartialDisruption, 0},
		{"threshold is inclusive: 11 of 20 = 0.55", 9, 11, ZonePartialDisruption, 0},
		{"just below threshold: 10 of 19", 9, 10, ZoneNormal, 0.1},
		{"exactly 50 nodes is not large", 20, 30, ZonePartialDisruption, 0},
		{"51 nodes is large: secondary rate", 20, 31, ZonePartialDisruption, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, s := cfg.ComputeZoneState(statuses(tc.ready, tc.notReady))
			if s != tc.want || n != tc.notReady {
				t.Fatalf("got (%d, %s), want (%d, %s)", n, s, tc.notReady, tc.want)
			}
			if q := cfg.ZoneQPS(s, tc.ready+tc.notReady); q != tc.qps {
				t.Errorf("qps %v, want %v", q, tc.qps)
			}
		})
	}
}

func TestDisruptionTransitions(t *testing.T) {
	cfg := DefaultConfig()
	var d Disruption
	res := d.Update(cfg, map[string][]string{"a": statuses(5, 0), "b": statuses(5, 0)})
	if res.EnterMaster || res.ExitMaster || !maps.Equal(res.Limiters, map[string]float64{"a": 0.1, "b": 0.1}) {
		t.Fatalf("initial → normal: %+v", res)
	}
	// Zone a goes partial (small zone: tainting stops), b stays normal.
	res = d.Update(cfg, map[string][]string{"a": statuses(2, 3), "b": statuses(5, 0)})
	if !maps.Equal(res.Limiters, map[string]float64{"a": 0}) || d.States["a"] != ZonePartialDisruption {
		t.Fatalf("partial: %+v", res)
	}
	// Unchanged states change nothing.
	if res = d.Update(cfg, map[string][]string{"a": statuses(2, 3), "b": statuses(5, 0)}); len(res.Limiters) != 0 {
		t.Fatalf("no-op pass changed limiters: %+v", res)
	}
	// a fully down while b is healthy: a taints at the normal rate.
	res = d.Update(cfg, map[string][]string{"a": statuses(0, 5), "b": statuses(5, 0)})
	if res.EnterMaster || res.Limiters["a"] != 0.1 {
		t.Fatalf("full with healthy neighbour: %+v", res)
	}
	// Every zone down: master disruption, everything stops.
	res = d.Update(cfg, map[string][]string{"a": statuses(0, 5), "b": statuses(0, 5)})
	if !res.EnterMaster || !maps.Equal(res.Limiters, map[string]float64{"a": 0, "b": 0}) {
		t.Fatalf("all down: %+v", res)
	}
	if res = d.Update(cfg, map[string][]string{"a": statuses(0, 5), "b": statuses(0, 5)}); res.EnterMaster || len(res.Limiters) != 0 {
		t.Fatalf("staying in master disruption: %+v", res)
	}
	// One node back: exit, probes reset, per-zone limits applied.
	res = d.Update(cfg, map[string][]string{"a": statuses(1, 4), "b": statuses(0, 5)})
	if !res.ExitMaster || !maps.Equal(res.Limiters, map[string]float64{"a": 0, "b": 0.1}) {
		t.Fatalf("exit: %+v", res)
	}
	if d.States["a"] != ZonePartialDisruption || d.States["b"] != ZoneFullDisruption {
		t.Fatalf("states after exit: %v", d.States)
	}
	// A zone that disappears is forgotten.
	d.Update(cfg, map[string][]string{"a": statuses(5, 0)})
	if _, ok := d.States["b"]; ok {
		t.Error("vanished zone kept")
	}
}

func TestMasterDisruptionFromStart(t *testing.T) {
	var d Disruption
	res := d.Update(DefaultConfig(), map[string][]string{"": statuses(0, 3)})
	if !res.EnterMaster || res.Limiters[""] != 0 {
		t.Fatalf("a fleet that starts all down must not taint: %+v", res)
	}
}

func TestQueueRateAndRemember(t *testing.T) {
	q := NewRateLimitedQueue(0.1, t0)
	for _, n := range []string{"a", "b", "c"} {
		q.Add(n, "", t0)
	}
	var done []string
	try := func(now time.Time) {
		q.Try(now, func(it QueueItem) (bool, time.Duration) { done = append(done, it.Name); return true, 0 })
	}
	try(t0)
	if len(done) != 1 {
		t.Fatalf("burst 1: processed %v", done)
	}
	try(t0.Add(9 * time.Second))
	if len(done) != 1 {
		t.Fatalf("before 10s: %v", done)
	}
	try(t0.Add(10 * time.Second))
	try(t0.Add(20 * time.Second))
	if len(done) != 3 || q.Len() != 0 {
		t.Fatalf("one per 10s: %v", done)
	}
	// Processed nodes are remembered: adding again is a no-op until removed.
	if q.Add("a", "", t0.Add(time.Minute)) {
		t.Error("re-add of a remembered node succeeded")
	}
	q.Remove("a")
	if !q.Add("a", "", t0.Add(time.Minute)) {
		t.Error("add after remove failed")
	}
}

func TestQueueRetryAndZeroRate(t *testing.T) {
	q := NewRateLimitedQueue(10, t0)
	q.Add("a", "", t0)
	calls := 0
	q.Try(t0, func(QueueItem) (bool, time.Duration) { calls++; return false, 50 * time.Millisecond })
	if calls != 1 || q.Len() != 1 {
		t.Fatalf("calls %d len %d", calls, q.Len())
	}
	q.Try(t0.Add(40*time.Millisecond), func(QueueItem) (bool, time.Duration) { calls++; return true, 0 })
	if calls != 1 {
		t.Fatal("retried before its wait")
	}
	q.Try(t0.Add(time.Second), func(QueueItem) (bool, time.Duration) { calls++; return true, 0 })
	if calls != 2 || q.Len() != 0 {
		t.Fatalf("retry: calls %d", calls)
	}
	q.SwapLimiter(0, t0.Add(2*time.Second))
	q.Add("b", "", t0.Add(2*time.Second))
	q.Try(t0.Add(time.Hour), func(QueueItem) (bool, time.Duration) { calls++; return true, 0 })
	if calls != 2 || q.NextToken(t0) != -1 {
		t.Fatal("QPS 0 must never process")
	}
}

func TestSwapLimiterCarriesDebt(t *testing.T) {
	q := NewRateLimitedQueue(0.1, t0)
	q.Add("a", "", t0)
	q.Add("b", "", t0)
	n := 0
	q.Try(t0, func(QueueItem) (bool, time.Duration) { n++; return true, 0 })
	// The bucket is empty; a new rate must not hand out a fresh token.
	q.SwapLimiter(0.5, t0)
	q.Try(t0, func(QueueItem) (bool, time.Duration) { n++; return true, 0 })
	if n != 1 {
		t.Fatalf("swap gave a free token: %d", n)
	}
	q.Try(t0.Add(2*time.Second), func(QueueItem) (bool, time.Duration) { n++; return true, 0 })
	if n != 2 {
		t.Fatalf("new rate not applied: %d", n)
	}
}

// ZoneKeyReusing hands back the previous key itself when it still holds,
// and a new one when the labels moved the node.
func TestZoneKeyReusing(t *testing.T) {
	labels := map[string]string{nodemodel.LabelRegion: "r", nodemodel.LabelZone: "a"}
	prev := ZoneKey(labels)
	if got := ZoneKeyReusing(labels, prev); got != prev || unsafe.StringData(got) != unsafe.StringData(prev) {
		t.Errorf("same labels: got a new string %q", got)
	}
	for _, moved := range []map[string]string{
		{nodemodel.LabelRegion: "r", nodemodel.LabelZone: "b"},
		{nodemodel.LabelRegion: "ra", nodemodel.LabelZone: ""},
		{nodemodel.LabelRegion: "", nodemodel.LabelZone: "ra"},
		nil,
	} {
		if got, want := ZoneKeyReusing(moved, prev), ZoneKey(moved); got != want {
			t.Errorf("ZoneKeyReusing(%v, %q) = %q, want %q", moved, prev, got, want)
		}
	}
}
