// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// TestPodFates follows the pods of a "victim" node through the ends spec
// §12 and §13 give them, with the victim's reporter as a process the test
// freezes, resumes and kills:
//
//  1. SIGSTOP: the node turns Unknown, both pods Ready=False and still
//     Running; "web" (tolerating the node's NoExecute taints for 3 s) turns
//     Terminating, "db" (the default 300 s) stays Ready=False and not
//     terminating.
//  2. SIGCONT: within a report interval the reporter, as the node's kubelet,
//     finishes web's deletion (gone, last state Failed) and writes db
//     Ready=True again, with the transition time it had cached.
//  3. DeleteNode while the reporter runs: the node is served again with a new
//     uid, and the reporter's log says it registered again.
//  4. SIGKILL, then DeleteNode: pod GC removes db once the quarantine is
//     over, not before, with DisruptionTarget DeletionByPodGC and its event.
func TestPodFates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const (
		grace      = 4 * time.Second
		toleration = 3 * time.Second // web's own, for unreachable and not-ready
		report     = 3 * time.Second // the victim's status report frequency
		gcPeriod   = time.Second
		quarantine = 5 * time.Second
	)
	s := startLocalStack(t, "keep", "--grace-period="+grace.String(),
		fmt.Sprintf("--monitor-args=--node-monitor-period=500ms,--pod-gc-period=%s,--pod-gc-quarantine=%s", gcPeriod, quarantine),
		"--reporter-args=--node-lease-duration-seconds=2")
	victim := s.name("victim")
	rep := s.addReporter(victim, "--node-lease-duration-seconds=2",
		"--node-status-update-frequency=1s", "--node-status-report-frequency="+report.String())
	waitFor(t, time.Minute, "the victim Ready", s.readyIs(victim, nodemodel.True))

	// Ready since a minute ago, so a restored transition time (the
	// reporter's cache, spec §13.2) is told apart from "now".
	readySince := time.Now().Add(-time.Minute).Truncate(time.Second)
	secs := int64(toleration.Seconds())
	mkPod := func(name string, tolerations ...*nodev1.Toleration) *podv1.Pod {
		return &podv1.Pod{
			Metadata: &nodev1.ObjectMeta{Namespace: "e2e", Name: name,
				OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-rs", Controller: true}}},
			Spec: &podv1.PodSpec{NodeName: victim, Tolerations: tolerations},
			Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{
				Type: nodemodel.Ready, Status: nodemodel.True, LastTransitionTime: nodemodel.Timestamp(readySince)}}},
		}
	}
	trail := followPods(t, s, victim)
	for _, p := range []*podv1.Pod{
		mkPod("web",
			&nodev1.Toleration{Key: nodemodel.TaintUnreachable, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: &secs},
			&nodev1.Toleration{Key: nodemodel.TaintNotReady, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: &secs}),
		mkPod("db"), // the monitor's default tolerations: 300 s
	} {
		c, cancel := s.call()
		_, err := s.pods.CreatePod(c, &podv1.CreatePodRequest{Pod: p})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	// 1. The reporter freezes: its stream stays open, nothing more comes.
	frozen := time.Now()
	if err := syscall.Kill(rep.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, grace+30*time.Second, "the victim Unknown", s.readyIs(victim, nodemodel.Unknown))
	t.Logf("victim Unknown %s after SIGSTOP", time.Since(frozen).Round(time.Millisecond))
	waitFor(t, toleration+30*time.Second, "web Terminating, db Ready=False and Running", func() (bool, string) {
		web, db := s.pod("web"), s.pod("db")
		return isTerminating(web) && podReady(db) == nodemodel.False && db.GetStatus().GetPhase() == "Running" && !isTerminating(db),
			"web: " + podState(web) + "; db: " + podState(db)
	})
	// web went through not-ready (still Running) before it turned
	// Terminating: the watch saw every step, in order.
	steps := trail.steps("web")
	notReady, term := -1, -1
	for i, p := range steps {
		if notReady < 0 && podReady(p) == nodemodel.False && p.GetStatus().GetPhase() == "Running" && !isTerminating(p) {
			notReady = i
		}
		if term < 0 && isTerminating(p) {
			term = i
		}
	}
	if notReady < 0 || term < notReady {
		t.Errorf("web was not Ready=False and Running before it turned Terminating: %s", trail.describe("web"))
	}
	if term >= 0 && podCondition(steps[term], "DisruptionTarget").GetReason() != "DeletionByTaintManager" {
		t.Errorf("Terminating web lacks DisruptionTarget DeletionByTaintManager: %v", steps[term].GetStatus())
	}
	c, cancel := s.call()
	ex, err := s.pods.ExplainPod(c, &podv1.ExplainPodRequest{Namespace: "e2e", Name: "db"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("explain pod e2e/db while the reporter is frozen: %s", ex.GetSummary())

	// 2. The reporter resumes and acts as the node's kubelet at once.
	resumed := time.Now()
	if err := syscall.Kill(rep.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var webGone, dbReady time.Duration
	waitFor(t, report+30*time.Second, "web gone and db Ready=True", func() (bool, string) {
		web, db := s.pod("web"), s.pod("db")
		if web == nil && trail.last("web").typ == "DELETED" && webGone == 0 {
			webGone = time.Since(resumed)
		}
		if podReady(db) == nodemodel.True && dbReady == 0 {
			dbReady = time.Since(resumed)
		}
		return webGone > 0 && dbReady > 0, "web: " + podState(web) + "; db: " + podState(db)
	})
	t.Logf("after SIGCONT: web gone in %s, db Ready=True in %s (report interval %s)", webGone.Round(time.Millisecond), dbReady.Round(time.Millisecond), report)
	if webGone > report || dbReady > report {
		t.Errorf("the reporter took longer than a report interval (%s): web gone in %s, db Ready in %s", report, webGone, dbReady)
	}
	// Ended by its reporter: Failed, Ready=False PodCompleted, the
	// evictor's DisruptionTarget kept (spec §13.2), then removed.
	if last := trail.last("web"); last.typ != "DELETED" || last.pod.GetStatus().GetPhase() != "Failed" ||
		podCondition(last.pod, nodemodel.Ready).GetReason() != "PodCompleted" ||
		podCondition(last.pod, "DisruptionTarget").GetReason() != "DeletionByTaintManager" {
		t.Errorf("web was not ended by its reporter (Failed, Ready=False PodCompleted, DisruptionTarget kept, then removed): %s", trail.describe("web"))
	}
	db := s.pod("db")
	if got := podCondition(db, nodemodel.Ready).GetLastTransitionTime().AsTime(); !got.Equal(readySince) {
		t.Errorf("db Ready=True since %s, want the cached %s", got, readySince)
	}
	if isTerminating(db) || db.GetStatus().GetPhase() != "Running" {
		t.Errorf("db after the reporter resumed: %s", podState(db))
	}
	waitFor(t, 30*time.Second, "the victim Ready again", s.readyIs(victim, nodemodel.True))

	// 3. The node object is deleted while its reporter runs: it registers
	// again at once (spec §13.5), a new object with a new uid.
	old, err := s.getNode(victim)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	s.deleteNode(victim)
	waitFor(t, 30*time.Second, "the victim registered again", func() (bool, string) {
		n, err := s.getNode(victim)
		if err != nil {
			return false, err.Error()
		}
		return n.GetMetadata().GetUid() != old.GetMetadata().GetUid(), "uid " + n.GetMetadata().GetUid()
	})
	t.Logf("victim registered again %s after DeleteNode", time.Since(deleted).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "the reporter's log saying it registered again", func() (bool, string) {
		b, err := os.ReadFile(rep.Log)
		return strings.Contains(string(b), "node object was deleted; registering again"), fmt.Sprint(err)
	})
	waitFor(t, 30*time.Second, "the registered-again victim Ready", s.readyIs(victim, nodemodel.True))

	// 4. The reporter dies, then its node is deleted: pod GC removes db once
	// the quarantine is over. A quarantine left over from step 3 (the node
	// came back, which saves its pods) would remove it too early.
	rep.Kill()
	gcFrom := time.Now()
	s.deleteNode(victim)
	waitFor(t, quarantine+2*gcPeriod+30*time.Second, "db removed by pod GC", func() (bool, string) {
		db := s.pod("db")
		return db == nil && trail.last("db").typ == "DELETED", podState(db)
	})
	last := trail.last("db")
	t.Logf("db removed %s after DeleteNode (quarantine %s, pod GC every %s)", last.at.Sub(gcFrom).Round(time.Millisecond), quarantine, gcPeriod)
	dt := podCondition(last.pod, "DisruptionTarget")
	if last.typ != "DELETED" || last.pod.GetStatus().GetPhase() != "Failed" || dt.GetReason() != "DeletionByPodGC" ||
		dt.GetMessage() != "PodGC: node no longer exists" {
		t.Errorf("db not ended by pod GC: %s", trail.describe("db"))
	}
	// The condition is written at the pass that removes the pod; its
	// timestamp has whole seconds at worst.
	if marked := dt.GetLastTransitionTime().AsTime(); marked.Before(gcFrom.Add(quarantine).Truncate(time.Second)) {
		t.Errorf("db removed %s after its node was deleted, before the %s quarantine", marked.Sub(gcFrom), quarantine)
	}
	// Pod GC records its event after the delete it reports (best effort,
	// a second write), and the monitor serves events from its cache: the
	// pod's DELETED can be seen before the event is.
	waitFor(t, 10*time.Second, "a DeletionByPodGC event for e2e/db", func() (bool, string) {
		c, cancel := s.call()
		defer cancel()
		evs, err := s.nodes.ListEvents(c, &nodev1.ListEventsRequest{Kind: "Pod", Namespace: "e2e", Name: "db"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.GetEvents() {
			if e.GetReason() == "DeletionByPodGC" {
				return true, ""
			}
		}
		return false, fmt.Sprint(evs.GetEvents())
	})
}

// pod is namespace e2e's pod name as the monitor serves it; nil once it is
// gone (the test fails on any other error).
func (s *localStack) pod(name string) *podv1.Pod {
	s.t.Helper()
	c, cancel := s.call()
	defer cancel()
	r, err := s.pods.GetPod(c, &podv1.GetPodRequest{Namespace: "e2e", Name: name})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		s.t.Fatalf("get pod e2e/%s: %v", name, err)
	}
	return r.GetPod()
}

func (s *localStack) deleteNode(name string) {
	s.t.Helper()
	c, cancel := s.call()
	defer cancel()
	if _, err := s.nodes.DeleteNode(c, &nodev1.DeleteNodeRequest{Name: name}); err != nil {
		s.t.Fatalf("delete node %s: %v", name, err)
	}
}

func podCondition(p *podv1.Pod, typ string) *podv1.PodCondition {
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

func podReady(p *podv1.Pod) string { return podCondition(p, nodemodel.Ready).GetStatus() }

func isTerminating(p *podv1.Pod) bool { return p.GetMetadata().GetDeletionTimestamp() != nil }

func podState(p *podv1.Pod) string {
	if p == nil {
		return "gone"
	}
	return fmt.Sprintf("phase=%s Ready=%s terminating=%v", p.GetStatus().GetPhase(), podReady(p), isTerminating(p))
}

// podTrail is what a WatchPods stream delivered, per pod name, in order.
type podTrail struct {
	mu     sync.Mutex
	events map[string][]podEvent
}

type podEvent struct {
	typ string
	pod *podv1.Pod
	at  time.Time // when the test received it
}

// followPods watches the pods bound to node until the test ends.
func followPods(t *testing.T, s *localStack, node string) *podTrail {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := s.pods.WatchPods(ctx, &podv1.WatchPodsRequest{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	tr := &podTrail{events: map[string][]podEvent{}}
	go func() {
		for {
			ev, err := w.Recv()
			if err != nil {
				return
			}
			name := ev.GetPod().GetMetadata().GetName()
			tr.mu.Lock()
			tr.events[name] = append(tr.events[name], podEvent{ev.GetType(), ev.GetPod(), time.Now()})
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *podTrail) of(name string) []podEvent {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]podEvent(nil), tr.events[name]...)
}

// steps are the pod's states as delivered.
func (tr *podTrail) steps(name string) []*podv1.Pod {
	var out []*podv1.Pod
	for _, e := range tr.of(name) {
		out = append(out, e.pod)
	}
	return out
}

func (tr *podTrail) last(name string) podEvent {
	evs := tr.of(name)
	if len(evs) == 0 {
		return podEvent{}
	}
	return evs[len(evs)-1]
}

func (tr *podTrail) describe(name string) string {
	var b strings.Builder
	for _, e := range tr.of(name) {
		fmt.Fprintf(&b, "\n  %s %s %s conditions=%v", e.at.Format("15:04:05.000"), e.typ, podState(e.pod), e.pod.GetStatus().GetConditions())
	}
	return b.String()
}
