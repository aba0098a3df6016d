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
// streams it asks to move land on a collector at random (as round-robin
// balancing does, when reporters ignore the hint) or where the hint names
// (Hints), and the spread must be within ±20 % of even within 30
// intervals (5 minutes at the default 10 s), never moving more than the
// bound in one interval. Following the hints it takes fewer intervals.
func TestConverges(t *testing.T) {
	random := converge(t, false)
	hinted := converge(t, true)
	t.Logf("within ±20 %% of even after %d intervals landing at random, %d following the hints", random, hinted)
	if hinted >= random {
		t.Fatalf("following the hints took %d intervals, landing at random %d: want fewer", hinted, random)
	}
}

func converge(t *testing.T, followHints bool) int {
	t.Helper()
	cfg := DefaultConfig()
	rng := rand.New(rand.NewPCG(7, 9))
	nodes := []int{15000, 15000, 0}
	now := time.Unix(0, 0)
	for interval := 1; ; interval++ {
		now = now.Add(cfg.Interval)
		loads := make([]Load, len(nodes))
		for i, n := range nodes {
			id := string(rune('a' + i))
			loads[i] = Load{ID: id, Address: id + ":1", Nodes: n, Capacity: 20000, At: now}
		}
		moved := make([]int, len(nodes))
		dest := make([]int, len(nodes))
		for i := range nodes {
			d := Decide(cfg, now, loads[i].ID, loads)
			if bound := int(float64(nodes[i])*cfg.MaxFraction) + 1; d.Move > bound {
				t.Fatalf("interval %d: %s moves %d of %d, above the bound", interval, loads[i].ID, d.Move, nodes[i])
			}
			moved[i] = d.Move
			h := NewHints(cfg, now, loads[i].ID, loads, rng)
			for range d.Move {
				to := rng.IntN(len(nodes))
				if followHints {
					if a := h.Next(); a != "" {
						to = int(a[0] - 'a')
					}
				}
				dest[to]++
			}
		}
		for i := range nodes {
			nodes[i] += dest[i] - moved[i]
		}
		even := true
		for _, n := range nodes {
			if n < 8000 || n > 12000 {
				even = false
			}
		}
		if even {
			t.Logf("hints %v: within ±20 %% of even after %d intervals: %v", followHints, interval, nodes)
			return interval
		}
		if interval == 30 {
			t.Fatalf("hints %v: not within ±20 %% of even after 30 intervals: %v", followHints, nodes)
		}
	}
}

func TestChoose(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(1000, 0)
	fresh := now.Add(-time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	self := Load{ID: "a", Address: "a:1", Nodes: 450, Capacity: 1000, At: now}
	for _, tc := range []struct {
		name  string
		self  Load
		peers []Load
		want  string
	}{
		{"alone", self, nil, ""},
		{"most room", self, []Load{{ID: "b", Address: "b:1", Nodes: 450, Capacity: 1000, At: fresh}, {ID: "c", Address: "c:1", Nodes: 10, Capacity: 1000, At: fresh}}, "c:1"},
		// Room is a fraction of capacity: 500 of 2000 is more room than 100 of 200.
		{"room by capacity", self, []Load{{ID: "b", Address: "b:1", Nodes: 100, Capacity: 200, At: fresh}, {ID: "c", Address: "c:1", Nodes: 500, Capacity: 2000, At: fresh}}, "c:1"},
		{"draining, stale and unaddressed peers are not named", self, []Load{{ID: "b", Address: "b:1", Nodes: 400, Capacity: 1000, At: fresh},
			{ID: "c", Address: "c:1", Capacity: 1000, Draining: true, At: fresh}, {ID: "d", Address: "d:1", Capacity: 1000, At: now.Add(-time.Minute)},
			{ID: "e", Capacity: 1000, At: fresh}}, "b:1"},
		{"no peer with more room", self, []Load{{ID: "b", Address: "b:1", Nodes: 600, Capacity: 1000, At: fresh}}, ""},
		{"draining self names any peer", Load{ID: "a", Address: "a:1", Nodes: 10, Capacity: 1000, Draining: true, At: now},
			[]Load{{ID: "b", Address: "b:1", Nodes: 600, Capacity: 1000, At: fresh}}, "b:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Choose(cfg, now, "a", append([]Load{tc.self}, tc.peers...), rng); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	// Ties are broken at random: over many choices each of three equal
	// peers is named about a third of the time.
	loads := []Load{self, {ID: "b", Address: "b:1", Nodes: 0, Capacity: 1000, At: fresh},
		{ID: "c", Address: "c:1", Nodes: 0, Capacity: 1000, At: fresh}, {ID: "d", Address: "d:1", Nodes: 0, Capacity: 1000, At: fresh}}
	count := map[string]int{}
	for range 3000 {
		count[Choose(cfg, now, "a", loads, rng)]++
	}
	for _, a := range []string{"b:1", "c:1", "d:1"} {
		if count[a] < 850 || count[a] > 1150 {
			t.Fatalf("ties not broken evenly: %v", count)
		}
	}
}

// TestHintsFill: a batch of reporters leaving at once fills the peers with
// the most room in turn, not all onto the one that had the most.
func TestHintsFill(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(1000, 0)
	loads := []Load{{ID: "a", Address: "a:1", Nodes: 300, Capacity: 1000, Draining: true, At: now},
		{ID: "b", Address: "b:1", Nodes: 250, Capacity: 1000, At: now}, {ID: "c", Address: "c:1", Nodes: 150, Capacity: 1000, At: now}}
	h := NewHints(cfg, now, "a", loads, rand.New(rand.NewPCG(3, 4)))
	got := map[string]int{}
	for range 300 {
		got[h.Next()]++
	}
	// 150 + 100 to c reach b's 250, then 50 each: b 300, c 300.
	if got["b:1"] != 100 || got["c:1"] != 200 {
		t.Fatalf("drain of 300 named %v, want b:1 100, c:1 200", got)
	}
	if loads[1].Nodes != 250 {
		t.Fatal("NewHints changed the caller's loads")
	}
}

func TestPausedAfterEtcdTrouble(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		available bool
		trouble   time.Time
		want      bool
	}{
		{"healthy, never failed", true, time.Time{}, false},
		{"etcd unavailable", false, time.Time{}, true},
		{"a registration failed a moment ago", true, now.Add(-time.Second), true},
		{"failed just under three intervals ago", true, now.Add(-3*cfg.Interval + time.Millisecond), true},
		{"failed three intervals ago", true, now.Add(-3 * cfg.Interval), false},
	} {
		if got := Paused(cfg, now, tc.available, tc.trouble); got != tc.want {
			t.Errorf("%s: Paused = %v, want %v", tc.name, got, tc.want)
		}
	}
}
