// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package balance

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(1000, 0)
	fresh := now.Add(-time.Second)
	for _, tc := range []struct {
		name  string
		loads []Load
		want  Decision
	}{
		{"alone", []Load{{ID: "a", Nodes: 900, Capacity: 1000, At: now}}, Decision{}},
		{"even", []Load{{ID: "a", Nodes: 300, Capacity: 1000}, {ID: "b", Nodes: 300, Capacity: 1000, At: fresh}, {ID: "c", Nodes: 300, Capacity: 1000, At: fresh}},
			Decision{Share: 300}},
		{"within tolerance", []Load{{ID: "a", Nodes: 320, Capacity: 1000}, {ID: "b", Nodes: 290, Capacity: 1000, At: fresh}, {ID: "c", Nodes: 290, Capacity: 1000, At: fresh}},
			Decision{Share: 300}},
		// A restarted peer holds nobody: shed, but at most 5 % of 450.
		{"peer restarted", []Load{{ID: "a", Nodes: 450, Capacity: 1000}, {ID: "b", Nodes: 450, Capacity: 1000, At: fresh}, {ID: "c", Capacity: 1000, At: fresh}},
			Decision{Share: 300, Move: 23}},
		// Close to the share the excess bounds the move, not the fraction.
		{"small excess", []Load{{ID: "a", Nodes: 340, Capacity: 1000}, {ID: "b", Nodes: 280, Capacity: 1000, At: fresh}, {ID: "c", Nodes: 280, Capacity: 1000, At: fresh}},
			Decision{Share: 300, Move: 17}},
		// A peer with twice the capacity has twice the share.
		{"capacity", []Load{{ID: "a", Nodes: 600, Capacity: 1000}, {ID: "b", Nodes: 300, Capacity: 2000, At: fresh}},
			Decision{Share: 300, Move: 30}},
		// Draining and stale peers do not count: a collector that died
		// stays listed until its session expires.
		{"draining and stale", []Load{{ID: "a", Nodes: 450, Capacity: 1000}, {ID: "b", Nodes: 450, Capacity: 1000, At: fresh},
			{ID: "c", Nodes: 0, Capacity: 1000, Draining: true, At: fresh}, {ID: "d", Nodes: 900, Capacity: 1000, At: now.Add(-time.Minute)}},
			Decision{Share: 450}},
		{"self draining", []Load{{ID: "a", Nodes: 900, Capacity: 1000, Draining: true}, {ID: "b", Capacity: 1000, At: fresh}}, Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.loads[0].At = now
			if got := Decide(cfg, now, "a", tc.loads); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestConverges plays intervals of three collectors after one restarted
// empty: every collector decides on the loads of the last interval, the
// streams it asks to move pick a collector at random (as round-robin
// balancing does), and the spread must be within ±20 % of even within 30
// intervals (5 minutes at the default 10 s), never moving more than the
// bound in one interval.
func TestConverges(t *testing.T) {
	cfg := DefaultConfig()
	rng := rand.New(rand.NewPCG(7, 9))
	nodes := []int{15000, 15000, 0}
	now := time.Unix(0, 0)
	for interval := 1; ; interval++ {
		now = now.Add(cfg.Interval)
		loads := make([]Load, len(nodes))
		for i, n := range nodes {
			loads[i] = Load{ID: string(rune('a' + i)), Nodes: n, Capacity: 20000, At: now}
		}
		moved := make([]int, len(nodes))
		for i := range nodes {
			d := Decide(cfg, now, loads[i].ID, loads)
			if bound := int(float64(nodes[i])*cfg.MaxFraction) + 1; d.Move > bound {
				t.Fatalf("interval %d: %s moves %d of %d, above the bound", interval, loads[i].ID, d.Move, nodes[i])
			}
			moved[i] = d.Move
		}
		for i, m := range moved {
			nodes[i] -= m
			for range m {
				nodes[rng.IntN(len(nodes))]++
			}
		}
		even := true
		for _, n := range nodes {
			if n < 8000 || n > 12000 {
				even = false
			}
		}
		if even {
			t.Logf("within ±20 %% of even after %d intervals: %v", interval, nodes)
			return
		}
		if interval == 30 {
			t.Fatalf("not within ±20 %% of even after 30 intervals: %v", nodes)
		}
	}
}
