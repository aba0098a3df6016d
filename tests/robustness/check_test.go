// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// The checker's tests feed it small hand-made histories: each invariant
// must flag the history that breaks it and pass the one that keeps it.

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// st is a status whose content is pressure, with a heartbeat of hb
// seconds (heartbeats do not make statuses differ).
func st(pressure string, hb float64) *nodev1.NodeStatus {
	return &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
		{Type: "Ready", Status: "True", LastHeartbeatTime: timestamppb.New(at(hb)), LastTransitionTime: timestamppb.New(t0)},
		{Type: "MemoryPressure", Status: pressure, LastHeartbeatTime: timestamppb.New(at(hb)), LastTransitionTime: timestamppb.New(t0)},
	}}
}

func baseHistory() *history {
	cfg := DefaultConfig()
	cfg.Bound = 5 * time.Second // the figures below are written for it
	r := newRecorder()
	r.nodes["a-1"] = true
	return &history{cfg: cfg, sends: map[string][]send{}, rec: r, from: at(0), to: at(300), expected: 1,
		renew: 2 * time.Second, groupOf: func(n string) int {
			if strings.HasPrefix(n, "b-") {
				return 1
			}
			return 0
		}}
}

func run(h *history) *Summary {
	s := newSummary(1)
	check(h, s)
	return s
}

func wantViolation(t *testing.T, s *Summary, inv string, want bool) {
	t.Helper()
	if got := s.violationCount[inv] > 0; got != want {
		t.Errorf("%s violated = %v, want %v; violations: %q", inv, got, want, s.Violations)
	}
	if s.Checked[inv] == 0 {
		t.Errorf("%s was never checked", inv)
	}
}

func TestStatusesAckedAndInOrder(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sends        []send
		writes       []*nodev1.NodeStatus
		lost, reorde bool
	}{
		{"kept", []send{{status: st("False", 1), acked: true}, {status: st("True", 2), acked: true}},
			[]*nodev1.NodeStatus{st("False", 1), st("True", 2)}, false, false},
		{"unchanged re-send needs no write", []send{{status: st("False", 1), acked: true}, {status: st("False", 9), acked: true}},
			[]*nodev1.NodeStatus{st("False", 1)}, false, false},
		{"unacked later status may land", []send{{status: st("False", 1), acked: true}, {status: st("True", 2)}},
			[]*nodev1.NodeStatus{st("False", 1), st("True", 2)}, false, false},
		{"acked status lost", []send{{status: st("False", 1), acked: true}, {status: st("True", 2), acked: true}},
			[]*nodev1.NodeStatus{st("False", 1)}, true, false},
		{"older status written after a newer one", []send{{status: st("False", 1), acked: true}, {status: st("True", 2), acked: true}},
			[]*nodev1.NodeStatus{st("False", 1), st("True", 2), st("False", 1)}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := baseHistory()
			h.sends["a-1"] = tc.sends
			for i, w := range tc.writes {
				h.rec.status["a-1"] = append(h.rec.status["a-1"], statusWrite{rev: int64(10 + i), at: at(float64(i)), status: w})
			}
			s := run(h)
			wantViolation(t, s, InvAckedDurable, tc.lost)
			wantViolation(t, s, InvStatusOrder, tc.reorde)
		})
	}
}

func TestDeposedLeaderWrite(t *testing.T) {
	h := baseHistory()
	h.rec.election = []electionEvent{
		{rev: 5, key: "a", createRev: 5, value: "monitor-0.1"},
		{rev: 20, key: "a", createRev: 5, deleted: true}, // its session expired
		{rev: 21, key: "b", createRev: 21, value: "monitor-1.1"},
	}
	h.rec.health = []healthWrite{{rev: 10, at: at(1), node: "a-1", leader: "monitor-0.1"}, {rev: 25, at: at(2), node: "a-1", leader: "monitor-1.1"}}
	wantViolation(t, run(h), InvFencedLeader, false)
	h.rec.health = append(h.rec.health, healthWrite{rev: 30, at: at(3), node: "a-1", leader: "monitor-0.1"})
	wantViolation(t, run(h), InvFencedLeader, true)
}

func TestUnknownOnlyWhenSilent(t *testing.T) {
	h := baseHistory()
	h.rec.nodes["b-1"] = true
	h.expected = 2
	h.sends["a-1"], h.sends["b-1"] = nil, nil
	h.faults = []*fault{{step: step{kind: Partition, target: 1, hold: 20 * time.Second}, name: "fleet-b", start: at(100), end: at(120)}}
	// b-1 (partitioned) marked at grace + 1 s, then healthy again.
	h.rec.health = []healthWrite{{rev: 10, at: at(111), node: "b-1", unknown: true}, {rev: 11, at: at(123), node: "b-1"}}
	s := run(h)
	wantViolation(t, s, InvNoFalseUnknown, false)
	wantViolation(t, s, InvSilentMarked, false)
	wantViolation(t, s, InvNotEarly, false)
	// a-1 was never silenced.
	h.rec.health = append(h.rec.health, healthWrite{rev: 12, at: at(200), node: "a-1", unknown: true}, healthWrite{rev: 13, at: at(204), node: "a-1"})
	wantViolation(t, run(h), InvNoFalseUnknown, true)
}

// A mark decided for one silence but received after the next one began is
// not an early mark of the next (seed 286834254: fleet-b partitioned, all
// 500 nodes marked at its grace, some marks received 3.5 s later, after the
// SIGSTOP that followed the partition began).
func TestLateReceivedMarkOfThePreviousSilenceIsNotEarly(t *testing.T) {
	h := baseHistory()
	h.rec.nodes["b-1"], h.rec.nodes["b-2"] = true, true
	h.expected = 3
	h.sends["a-1"], h.sends["b-1"], h.sends["b-2"] = nil, nil, nil
	h.faults = []*fault{
		{step: step{kind: Partition, target: 1, hold: 12 * time.Second}, name: "fleet-b", start: at(100), end: at(112)},
		{step: step{kind: SigstopFleet, target: 1, hold: 21 * time.Second}, name: "fleet-b", start: at(115), end: at(136)},
	}
	// Decided at the partition's grace (110.5), received at 116: after the
	// SIGSTOP began, before its earliest possible mark (115 + 10 - 4 - 1).
	// b-2 recovered after the partition and is marked for the SIGSTOP.
	h.rec.health = []healthWrite{
		{rev: 10, at: at(111), decided: at(110.5), node: "b-2", unknown: true}, {rev: 11, at: at(113), node: "b-2"},
		{rev: 12, at: at(116), decided: at(110.5), node: "b-1", unknown: true},
		{rev: 13, at: at(125.5), decided: at(125.2), node: "b-2", unknown: true},
		{rev: 14, at: at(140), node: "b-1"}, {rev: 15, at: at(140), node: "b-2"},
	}
	s := run(h)
	wantViolation(t, s, InvNotEarly, false)
	wantViolation(t, s, InvSilentMarked, false)
	wantViolation(t, s, InvNoFalseUnknown, false)
	// The same receipt, decided after the SIGSTOP began: a real early mark.
	h.rec.health[2].decided = at(115.5)
	wantViolation(t, run(h), InvNotEarly, true)
}

func TestSilentNodeMarkedInTime(t *testing.T) {
	h := baseHistory()
	h.rec.nodes["b-1"] = true
	h.expected = 2
	h.sends["a-1"], h.sends["b-1"] = nil, nil
	h.faults = []*fault{{step: step{kind: Partition, target: 1, hold: 25 * time.Second}, name: "fleet-b", start: at(100), end: at(125)}}
	late := []healthWrite{{rev: 10, at: at(118), node: "b-1", unknown: true}, {rev: 11, at: at(127), node: "b-1"}}
	h.rec.health = late
	wantViolation(t, run(h), InvSilentMarked, true)
	early := []healthWrite{{rev: 10, at: at(104), node: "b-1", unknown: true}, {rev: 11, at: at(127), node: "b-1"}}
	h.rec.health = early
	wantViolation(t, run(h), InvNotEarly, true)
	// A monitor failover just before gives every node a fresh grace: late
	// by that much is allowed.
	h.rec.health = late
	h.faults = append(h.faults, &fault{step: step{kind: KillMonitor}, name: "monitor-0", start: at(95), end: at(99)})
	wantViolation(t, run(h), InvSilentMarked, false)
}

func TestEndState(t *testing.T) {
	h := baseHistory()
	h.served = []map[string]string{{"a-1": "True"}, {"a-1": "True"}}
	s := run(h)
	wantViolation(t, s, InvRecovered, false)
	wantViolation(t, s, InvMonitorsAgree, false)
	h.rec.health = []healthWrite{{rev: 10, at: at(310), node: "a-1", unknown: true}}
	h.served[1]["a-1"] = "Unknown"
	s = run(h)
	wantViolation(t, s, InvRecovered, true)
	wantViolation(t, s, InvMonitorsAgree, true) // monitor-0 still serves True
}

func TestPlanDependsOnSeedOnly(t *testing.T) {
	cfg := DefaultConfig()
	a, b := plan(42, 10*time.Minute, cfg), plan(42, 10*time.Minute, cfg)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("plans of one seed differ in length: %d, %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[s.kind] = true
	}
	if len(seen) != len(kinds) {
		t.Errorf("10 minutes drew %d of %d fault kinds", len(seen), len(kinds))
	}
	if c := plan(43, 10*time.Minute, cfg); len(c) == len(a) && c[0] == a[0] && c[1] == a[1] {
		t.Errorf("seeds 42 and 43 gave the same plan")
	}
}

func TestPodEvictions(t *testing.T) {
	h := baseHistory()
	h.rec.nodes["r-0"] = true
	h.expected = 2
	mark := healthWrite{rev: 10, at: at(100), node: "r-0", unknown: true}
	clear := healthWrite{rev: 20, at: at(130), node: "r-0"}
	created := podWrite{rev: 5, at: at(50), key: "ns/p", uid: "u1", node: "r-0"}
	evicted := podWrite{rev: 12, at: at(106), key: "ns/p", uid: "u1", node: "r-0", terminating: true}
	deleted := podWrite{rev: 21, at: at(131), key: "ns/p", uid: "u1", node: "r-0", terminating: true, deleted: true}
	h.rec.health = []healthWrite{mark, clear}
	h.rec.pods = []podWrite{created, evicted, deleted}
	s := run(h)
	wantViolation(t, s, InvPodEvictedOnce, false)
	wantViolation(t, s, InvPodEvictedUnhealthy, false)
	wantViolation(t, s, InvPodNotEvictedEarly, false)

	early := evicted
	early.at = at(102)
	h.rec.pods = []podWrite{created, early, deleted}
	wantViolation(t, run(h), InvPodNotEvictedEarly, true)

	healthy := evicted
	healthy.rev, healthy.at = 25, at(135)
	h.rec.pods = []podWrite{created, healthy}
	wantViolation(t, run(h), InvPodEvictedUnhealthy, true)
	// Recovered but still tainted: the taint is lifted a pass later, and
	// a pod's toleration may run out in between.
	h.rec.health = []healthWrite{mark, {rev: 20, at: at(130), node: "r-0", noExecute: true}, {rev: 30, at: at(140), node: "r-0"}}
	wantViolation(t, run(h), InvPodEvictedUnhealthy, false)
	h.rec.health = []healthWrite{mark, clear}

	undone := podWrite{rev: 13, at: at(107), key: "ns/p", uid: "u1", node: "r-0"}
	again := evicted
	again.rev, again.at = 14, at(108)
	h.rec.pods = []podWrite{created, evicted, undone, again}
	wantViolation(t, run(h), InvPodEvictedOnce, true)
}
