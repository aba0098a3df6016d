// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package zones

import (
	"maps"
	"testing"
	"unsafe"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
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

func TestClassifyAndRates(t *testing.T) {
	cfg := lifecycle.DefaultConfig()
	for _, tc := range []struct {
		name            string
		ready, notReady int
		want            State
		qps             float64
	}{
		{"all ready", 10, 0, Normal, 0.1},
		{"two down of two is full", 0, 2, FullDisruption, 0.1},
		{"two not ready is never partial", 1, 2, Normal, 0.1},
		{"3 of 5 (0.6) small zone stops", 2, 3, PartialDisruption, 0},
		{"threshold is inclusive: 11 of 20 = 0.55", 9, 11, PartialDisruption, 0},
		{"just below threshold: 10 of 19", 9, 10, Normal, 0.1},
		{"exactly 50 nodes is not large", 20, 30, PartialDisruption, 0},
		{"51 nodes is large: secondary rate", 20, 31, PartialDisruption, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, s := Classify(cfg, statuses(tc.ready, tc.notReady))
			if s != tc.want || n != tc.notReady {
				t.Fatalf("got (%d, %s), want (%d, %s)", n, s, tc.notReady, tc.want)
			}
			if q := QPS(cfg, s, tc.ready+tc.notReady); q != tc.qps {
				t.Errorf("qps %v, want %v", q, tc.qps)
			}
		})
	}
}

func TestDisruptionTransitions(t *testing.T) {
	cfg := lifecycle.DefaultConfig()
	var d Disruption
	res := d.Update(cfg, map[string][]string{"a": statuses(5, 0), "b": statuses(5, 0)})
	if res.EnterMaster || res.ExitMaster || !maps.Equal(res.Limiters, map[string]float64{"a": 0.1, "b": 0.1}) {
		t.Fatalf("initial → normal: %+v", res)
	}
	// Zone a goes partial (small zone: tainting stops), b stays normal.
	res = d.Update(cfg, map[string][]string{"a": statuses(2, 3), "b": statuses(5, 0)})
	if !maps.Equal(res.Limiters, map[string]float64{"a": 0}) || d.States["a"] != PartialDisruption {
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
	if d.States["a"] != PartialDisruption || d.States["b"] != FullDisruption {
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
	res := d.Update(lifecycle.DefaultConfig(), map[string][]string{"": statuses(0, 3)})
	if !res.EnterMaster || res.Limiters[""] != 0 {
		t.Fatalf("a fleet that starts all down must not taint: %+v", res)
	}
}

// KeyReusing hands back the previous key itself when it still holds,
// and a new one when the labels moved the node.
func TestZoneKeyReusing(t *testing.T) {
	labels := map[string]string{nodemodel.LabelRegion: "r", nodemodel.LabelZone: "a"}
	prev := nodemodel.ZoneKey(labels)
	if got := KeyReusing(labels, prev); got != prev || unsafe.StringData(got) != unsafe.StringData(prev) {
		t.Errorf("same labels: got a new string %q", got)
	}
	for _, moved := range []map[string]string{
		{nodemodel.LabelRegion: "r", nodemodel.LabelZone: "b"},
		{nodemodel.LabelRegion: "ra", nodemodel.LabelZone: ""},
		{nodemodel.LabelRegion: "", nodemodel.LabelZone: "ra"},
		{nodemodel.LabelZoneLegacy: "old", nodemodel.LabelZone: "new"},
		{nodemodel.LabelRegionLegacy: "r1", nodemodel.LabelZone: "z"},
		nil,
	} {
		if got, want := KeyReusing(moved, prev), nodemodel.ZoneKey(moved); got != want {
			t.Errorf("KeyReusing(%v, %q) = %q, want %q", moved, prev, got, want)
		}
	}
}
