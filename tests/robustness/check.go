// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/tests/fleetsim"
)

// send is a status a simulated node sent, in the order it sent them.
type send struct {
	key    msgKey
	status *nodev1.NodeStatus
	acked  bool
	at     time.Time // when it was recorded, just before it was sent
}

type msgKey struct {
	inc int64
	gen uint32
	seq uint64
}

// readRecord reads a fleet's record file: per node, its statuses in the
// order sent, each marked when a durable ack came back.
func readRecord(path string, into map[string][]send) (acks int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	type ackKey struct {
		node string
		k    msgKey
	}
	acked := map[ackKey]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l fleetsim.RecordLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a line cut by SIGKILL
		}
		k := msgKey{l.Inc, l.Gen, l.Seq}
		switch l.Kind {
		case "status":
			b, err := base64.StdEncoding.DecodeString(l.Status)
			if err != nil {
				continue
			}
			st := &nodev1.NodeStatus{}
			if proto.Unmarshal(b, st) != nil {
				continue
			}
			into[l.Node] = append(into[l.Node], send{key: k, status: st, at: time.UnixMilli(l.Time)})
		case "ack":
			acked[ackKey{l.Node, k}] = true
		}
	}
	for node, ss := range into {
		for i := range ss {
			if acked[ackKey{node, ss[i].key}] {
				ss[i].acked = true
				acks++
			}
		}
	}
	return acks, sc.Err()
}

// Summary is the checker's verdict.
type Summary struct {
	Seed           uint64
	Faults         map[string]int
	FaultErrors    int
	AckedStatuses  int
	StatusWrites   int
	HealthWrites   int
	Unknowns       int // transitions to Unknown in etcd
	MonitorEvents  int // Ready transitions served by the monitors' watches
	PodsCreated    int
	Evictions      int
	EtcdWrites     int
	EtcdRevision   int64
	WatchRestarts  int
	Checked        map[string]int
	Violations     []string
	violationCount map[string]int
}

func (s *Summary) check(inv string) { s.Checked[inv]++ }

func (s *Summary) violate(inv, format string, args ...any) {
	s.violationCount[inv]++
	// Keep the report readable: the first 20 of each invariant.
	if s.violationCount[inv] <= 20 {
		s.Violations = append(s.Violations, inv+": "+fmt.Sprintf(format, args...))
	}
}

// Invariants, by name.
const (
	InvAckedDurable        = "acked-status-durable"
	InvStatusOrder         = "status-history-in-send-order"
	InvNoFalseUnknown      = "no-unknown-while-renewing"
	InvSilentMarked        = "silent-node-unknown-in-time"
	InvNotEarly            = "not-unknown-early"
	InvFencedLeader        = "no-write-by-deposed-leader"
	InvRecovered           = "every-node-healthy-after-faults"
	InvMonitorsAgree       = "monitors-serve-what-etcd-holds"
	InvPodEvictedOnce      = "pod-evicted-at-most-once"
	InvPodEvictedUnhealthy = "pod-evicted-only-from-unhealthy-node"
	InvPodNotEvictedEarly  = "pod-not-evicted-before-toleration"
	invRecorderComplete    = "recorder-complete"
)

var invariants = []string{InvAckedDurable, InvStatusOrder, InvNoFalseUnknown, InvSilentMarked, InvNotEarly,
	InvFencedLeader, InvPodEvictedOnce, InvPodEvictedUnhealthy, InvPodNotEvictedEarly, InvRecovered, InvMonitorsAgree,
	invRecorderComplete}

// history is everything the checker reads.
type history struct {
	cfg    Config
	sends  map[string][]send
	rec    *recorder
	faults []*fault
	// from: faults start (the fleet was all healthy); to: the last fault
	// was undone.
	from, to    time.Time
	groupOf     func(node string) int
	renew       time.Duration
	served      []map[string]string // each monitor's final list
	expected    int                 // nodes in the cluster
	podsCreated int
}

func newSummary(seed uint64) *Summary {
	return &Summary{Seed: seed, Faults: map[string]int{}, Checked: map[string]int{}, violationCount: map[string]int{}}
}

// check runs every invariant over h.
func check(h *history, s *Summary) {
	for _, f := range h.faults {
		s.Faults[f.kind]++
		if f.err != nil {
			s.FaultErrors++
		}
	}
	for _, ss := range h.sends {
		for _, x := range ss {
			if x.acked {
				s.AckedStatuses++
			}
		}
	}
	checkStatuses(h, s)
	checkHealth(h, s)
	checkLeaders(h, s)
	checkPods(h, s)
	checkEnd(h, s)
}

// same reports whether a stored status is the one sent (heartbeat times
// aside, as the collector itself compares: spec §4.2).
func same(a, b *nodev1.NodeStatus) bool { return !nodemodel.StatusChanged(a, b) }

// checkStatuses: every status etcd stored for a node is one the node sent,
// in the order it sent them (a subsequence, greedily matched earliest
// first, which finds one whenever one exists), and what etcd holds at the
// end is the last durable-acked status or one sent after it.
func checkStatuses(h *history, s *Summary) {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	names := make([]string, 0, len(h.sends))
	for n := range h.sends {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, node := range names {
		ss := h.sends[node]
		writes := h.rec.status[node]
		s.StatusWrites += len(writes)
		p := 0
		for _, w := range writes {
			s.check(InvStatusOrder)
			j := p
			for j < len(ss) && !same(ss[j].status, w.status) {
				j++
			}
			if j == len(ss) {
				s.violate(InvStatusOrder, "%s: the status written at revision %d is not one the node sent after the one written before it (send #%d)", node, w.rev, p)
				continue
			}
			p = j
		}
		last := -1
		for i, x := range ss {
			if x.acked {
				last = i
			}
		}
		if last < 0 {
			continue
		}
		s.check(InvAckedDurable)
		if len(writes) == 0 {
			s.violate(InvAckedDurable, "%s: %d statuses acked as durable, none ever written to etcd", node, last+1)
			continue
		}
		final := writes[len(writes)-1].status
		ok := false
		for i := last; i < len(ss) && !ok; i++ {
			ok = same(ss[i].status, final)
		}
		if !ok {
			s.violate(InvAckedDurable, "%s: etcd holds (revision %d) none of the statuses from the last durable-acked one (send #%d of %d) on", node, writes[len(writes)-1].rev, last, len(ss))
		}
	}
}

// window is a stretch of time during which a node may go Unknown.
type window struct{ from, to time.Time }

// checkHealth walks the Unknown marks (health/ writes) in revision order.
func checkHealth(h *history, s *Summary) {
	h.rec.mu.Lock()
	health := append([]healthWrite(nil), h.rec.health...)
	s.MonitorEvents = len(h.rec.transits)
	s.EtcdWrites, s.EtcdRevision, s.WatchRestarts = h.rec.writes, h.rec.lastRev, h.rec.watchErrs
	h.rec.mu.Unlock()
	s.HealthWrites = len(health)
	g, b := h.cfg.Grace, h.cfg.Bound
	// Excused stretches per group: the group was silenced (its Unknowns
	// are expected), or a collector was frozen (its nodes' renewals reach
	// no live process: not a "reachable collector").
	groups := 2 + h.cfg.Reporters
	excused := make([][]window, groups)
	silencedEnd := make([][]time.Time, groups) // per window: when its fault ended
	for _, f := range h.faults {
		for grp := range groups {
			if f.silences(grp) {
				silencedEnd[grp] = append(silencedEnd[grp], f.end)
				// Marked from grace after the silence began; a mark
				// written just as the silence ends is seen up to the
				// bound later, and a restarted fleet needs a few seconds
				// to register again.
				excused[grp] = append(excused[grp], window{f.start, f.end.Add(b + 5*time.Second)})
			}
			if f.kind == SigstopCollector {
				silencedEnd[grp] = append(silencedEnd[grp], f.end)
				excused[grp] = append(excused[grp], window{f.start, f.end.Add(g + b)})
			}
		}
	}
	// A node that lost its stream registers again when the silence ends,
	// and sends its status right after its Register is answered: until
	// then it is not renewing. A restarted fleet of thousands on a starved
	// machine takes more than the bound to get every node through the
	// collectors' registration queue.
	reregistered := func(node string, after time.Time) time.Time {
		for _, x := range h.sends[node] {
			if x.at.After(after) {
				return x.at
			}
		}
		return time.Time{}
	}
	unknown := map[string]bool{}
	unknownAt := map[string]time.Time{}
	for _, w := range health {
		if w.unknown == unknown[w.node] {
			continue
		}
		unknown[w.node] = w.unknown
		if !w.unknown {
			continue
		}
		unknownAt[w.node] = w.at
		s.Unknowns++
		if w.at.Before(h.from) || w.at.After(h.to.Add(g+b)) {
			continue // the warm-up, or after the faults (InvRecovered judges that)
		}
		s.check(InvNoFalseUnknown)
		grp := h.groupOf(w.node)
		ok := false
		for i, x := range excused[grp] {
			to := x.to
			if r := reregistered(w.node, silencedEnd[grp][i]); !r.IsZero() && r.Add(b).After(to) && r.Sub(silencedEnd[grp][i]) < time.Minute {
				to = r.Add(b)
			}
			if !w.at.Before(x.from) && !w.at.After(to) {
				ok = true
				break
			}
		}
		if !ok {
			s.violate(InvNoFalseUnknown, "%s marked Unknown at %s (revision %d, +%s into the faults) while its fleet renewed through reachable collectors; %s",
				w.node, w.at.Format("15:04:05.000"), w.rev, w.at.Sub(h.from).Round(time.Millisecond), h.faultsAround(w.at))
		}
	}
	// Every node of a group silenced for longer than grace + bound is
	// marked within grace + bound of the silence (later only by a leader
	// change or a lost collector just before, which give every node a
	// fresh grace period: spec §6.2), and never before its last renewal
	// could have expired.
	for _, f := range h.faults {
		for grp := range groups {
			if !f.silences(grp) || f.err != nil {
				continue
			}
			deadline := f.start.Add(g + b)
			for _, o := range h.faults {
				if o.global() && o.end.Before(deadline) && o.end.After(f.start.Add(-g-10*time.Second)) {
					// A new leader or a vanished collector restarts the
					// grace: the election TTL or session TTL (6 s) after
					// the fault ended, at most.
					if d := o.end.Add(6*time.Second + g + b); d.After(deadline) {
						deadline = d
					}
				}
			}
			if f.end.Before(deadline) {
				continue // too short to require a mark
			}
			// The last renewal that could have reached a collector left
			// at most a renewal interval before the silence, or two when
			// the simulator's scheduler ran late on a starved machine.
			earliest := f.start.Add(g - 2*h.renew - time.Second)
			missed, early := 0, 0
			var example string
			for _, node := range h.nodesOf(grp) {
				s.check(InvSilentMarked)
				// A node that (re)registered just before the silence may
				// have been heard only then: its grace counts from there.
				nodeDeadline := deadline
				for _, x := range h.sends[node] {
					if x.at.Before(f.start) && x.at.Add(g+b).After(nodeDeadline) {
						nodeDeadline = x.at.Add(g + b)
					}
				}
				at, ok := firstUnknownIn(health, node, f.start, nodeDeadline)
				if !ok {
					missed++
					if example == "" {
						example = node
					}
					continue
				}
				if at.Equal(f.start) {
					continue // already Unknown when the silence began
				}
				s.check(InvNotEarly)
				if at.Before(earliest) {
					early++
				}
			}
			if missed > 0 {
				s.violate(InvSilentMarked, "%s at %s (held %s): %d nodes of %s not marked Unknown by %s after it began (e.g. %s)",
					f.kind, f.start.Format("15:04:05.000"), f.hold, missed, f.name, deadline.Sub(f.start).Round(time.Millisecond), example)
			}
			if early > 0 {
				s.violate(InvNotEarly, "%s at %s: %d nodes marked Unknown before grace after their last possible renewal", f.kind, f.start.Format("15:04:05.000"), early)
			}
		}
	}
}

// firstUnknownIn is when node was first marked Unknown within [from, to],
// or from if it already was Unknown then. A mark the leader decided before
// from belongs to what came before, however late it was received: on a
// starved machine the marks of one pass reach etcd and the recorder over
// seconds (seed 286834254: 500 marks decided within 0.15 s of a partition's
// grace, 246 of them committed one per revision, some received after the
// next silence began), and counting one as a mark of the new silence made
// it look early.
func firstUnknownIn(health []healthWrite, node string, from, to time.Time) (time.Time, bool) {
	state := false
	for _, w := range health {
		if w.node != node {
			continue
		}
		if w.at.Before(from) || (w.unknown && !w.decided.IsZero() && w.decided.Before(from)) {
			state = w.unknown
			continue
		}
		if state {
			return from, true
		}
		if w.at.After(to) {
			return time.Time{}, false
		}
		if w.unknown {
			return w.at, true
		}
	}
	return from, state
}

func (h *history) nodesOf(grp int) []string {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	var out []string
	for n := range h.rec.nodes {
		if h.groupOf(n) == grp {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// faultsAround names the faults within a grace period of t (for a
// violation's context).
func (h *history) faultsAround(t time.Time) string {
	var parts []string
	for _, f := range h.faults {
		if f.start.Before(t.Add(time.Second)) && f.end.After(t.Add(-h.cfg.Grace-10*time.Second)) {
			parts = append(parts, fmt.Sprintf("%s %s %s..%s", f.kind, f.name, f.start.Format("15:04:05.0"), f.end.Format("15:04:05.0")))
		}
	}
	if len(parts) == 0 {
		return "no fault near it"
	}
	return "faults near it: " + strings.Join(parts, "; ")
}

// checkLeaders: every health write carries the identity of the monitor
// that led at its revision (the election key with the lowest create
// revision still present). A write by a deposed leader would carry the
// old identity: the fence of ADR 0004 must have refused it.
func checkLeaders(h *history, s *Summary) {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	ev := h.rec.election
	type cand struct {
		createRev int64
		value     string
	}
	live := map[string]cand{}
	i := 0
	for _, w := range h.rec.health {
		for i < len(ev) && ev[i].rev < w.rev {
			e := ev[i]
			if e.deleted {
				delete(live, e.key)
			} else {
				live[e.key] = cand{e.createRev, e.value}
			}
			i++
		}
		s.check(InvFencedLeader)
		var leader cand
		for _, c := range live {
			if leader.createRev == 0 || c.createRev < leader.createRev {
				leader = c
			}
		}
		if leader.value != w.leader {
			s.violate(InvFencedLeader, "health/%s written at revision %d by %q while %q led", w.node, w.rev, w.leader, leader.value)
		}
	}
}

// checkEnd: after the faults and a settling time every node is served
// healthy by both monitors, as etcd holds it.
func checkEnd(h *history, s *Summary) {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	unknown := map[string]bool{}
	for _, w := range h.rec.health {
		unknown[w.node] = w.unknown
	}
	s.check(invRecorderComplete)
	if len(h.rec.nodes) != h.expected {
		s.violate(invRecorderComplete, "etcd recorded %d nodes, the fleet has %d", len(h.rec.nodes), h.expected)
	}
	if h.rec.decodeErrs > 0 {
		s.violate(invRecorderComplete, "%d values under the prefix did not decode", h.rec.decodeErrs)
	}
	bad := 0
	var example string
	for n := range h.rec.nodes {
		s.check(InvRecovered)
		if unknown[n] {
			bad++
			example = n
		}
	}
	if bad > 0 {
		s.violate(InvRecovered, "%d nodes still Unknown in etcd after the faults ended and the fleet settled (e.g. %s)", bad, example)
	}
	for i, m := range h.served {
		disagree := 0
		for n := range h.rec.nodes {
			s.check(InvMonitorsAgree)
			if (m[n] == nodemodel.Unknown) != unknown[n] {
				disagree++
				example = n
			}
		}
		if len(m) != len(h.rec.nodes) {
			s.violate(InvMonitorsAgree, "monitor-%d serves %d nodes, etcd holds %d", i, len(m), len(h.rec.nodes))
		}
		if disagree > 0 {
			s.violate(InvMonitorsAgree, "monitor-%d serves %d nodes' Ready otherwise than etcd's health records say (e.g. %s)", i, disagree, example)
		}
	}
}

// Print writes the summary.
func (s *Summary) Print(w *os.File) {
	fmt.Fprintf(w, "\n== robustness summary (seed %d)\n", s.Seed)
	fmt.Fprintf(w, "faults injected:")
	total := 0
	for _, k := range kinds {
		fmt.Fprintf(w, " %s=%d", k, s.Faults[k])
		total += s.Faults[k]
	}
	fmt.Fprintf(w, " (total %d, %d failed to apply)\n", total, s.FaultErrors)
	fmt.Fprintf(w, "recorded: %d durable-acked statuses, %d status writes, %d health writes, %d transitions to Unknown, %d Ready transitions served by the monitors\n",
		s.AckedStatuses, s.StatusWrites, s.HealthWrites, s.Unknowns, s.MonitorEvents)
	fmt.Fprintf(w, "pods: %d created on the reporter nodes, %d evicted\n", s.PodsCreated, s.Evictions)
	fmt.Fprintf(w, "etcd watch: %d writes to revision %d, %d watch restarts\n", s.EtcdWrites, s.EtcdRevision, s.WatchRestarts)
	fmt.Fprintf(w, "invariants checked:\n")
	for _, inv := range invariants {
		fmt.Fprintf(w, "  %-32s %8d checks, %d violations\n", inv, s.Checked[inv], s.violationCount[inv])
	}
	n := 0
	for _, c := range s.violationCount {
		n += c
	}
	fmt.Fprintf(w, "violations: %d\n", n)
	for _, v := range s.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
}

// Failed reports whether any invariant was violated.
// A fault that could not be applied (a process that would not restart)
// fails the run too: the schedule it checked is not the seed's.
func (s *Summary) Failed() bool { return len(s.Violations) > 0 || s.FaultErrors > 0 }
