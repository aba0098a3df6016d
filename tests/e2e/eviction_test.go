// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// TestEvictionOnLostNode runs the local stack as processes plus a second
// reporter for a "victim" node, stores a Deployment-owned pod (default
// tolerations shortened to 6 s by the monitor's flags) and a DaemonSet pod
// on the victim, then SIGKILLs the victim's reporter. Expected, as in
// Kubernetes: the node turns Unknown, its pods Ready=False, it is tainted
// unreachable:NoExecute, the Deployment pod is evicted (Terminating, kept)
// no earlier than 6 s after the taint (and well within the spec bounds after
// it), the DaemonSet pod stays.
func TestEvictionOnLostNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const (
		grace      = 4 * time.Second
		toleration = 6 * time.Second
	)
	s := startLocalStack(t, "keep", "--grace-period="+grace.String(),
		fmt.Sprintf("--monitor-args=--node-monitor-period=500ms,--default-not-ready-toleration-seconds=%d,--default-unreachable-toleration-seconds=%d",
			int(toleration.Seconds()), int(toleration.Seconds())),
		"--reporter-args=--node-lease-duration-seconds=2")
	keeper, victim := s.node, s.name("victim")
	// The victim's reporter: our own process, so we can kill it outright
	// (SIGKILL: no Leaving message, the stream just dies).
	rep := s.addReporter(victim, "--node-lease-duration-seconds=2")
	nodes, pods, call, getNode, readyIs := s.nodes, s.pods, s.call, s.getNode, s.readyIs
	waitFor(t, time.Minute, "both nodes Ready", func() (bool, string) {
		ok1, s1 := readyIs(keeper, nodemodel.True)()
		ok2, s2 := readyIs(victim, nodemodel.True)()
		return ok1 && ok2, keeper + " " + s1 + ", " + victim + " " + s2
	})

	mkPod := func(name, kind string) *podv1.Pod {
		return &podv1.Pod{
			Metadata: &nodev1.ObjectMeta{Namespace: "e2e", Name: name, Labels: map[string]string{"app": name},
				OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "apps/v1", Kind: kind, Name: name + "-owner", Controller: true}}},
			Spec:   &podv1.PodSpec{NodeName: victim},
			Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}},
		}
	}
	for _, p := range []*podv1.Pod{mkPod("web", "ReplicaSet"), mkPod("agent", "DaemonSet")} {
		c, cl := call()
		r, err := pods.CreatePod(c, &podv1.CreatePodRequest{Pod: p})
		cl()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("created %s/%s with tolerations %v", r.GetPod().GetMetadata().GetNamespace(), r.GetPod().GetMetadata().GetName(), r.GetPod().GetSpec().GetTolerations())
	}
	// Follow the victim's pods from now on, so the web pod's state with
	// DisruptionTarget is seen at its eviction. Eviction is graceful (spec
	// §12.3): the pod turns Terminating (MODIFIED with a deletion timestamp)
	// and, its reporter being dead, stays; a removal (DELETED) counts too.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch, err := pods.WatchPods(wctx, &podv1.WatchPodsRequest{NodeName: victim})
	if err != nil {
		t.Fatal(err)
	}
	type deletion struct {
		pod *podv1.Pod
		at  time.Time
	}
	deleted := make(chan deletion, 4)
	go func() {
		terminating := map[string]bool{}
		for {
			ev, err := watch.Recv()
			if err != nil {
				return
			}
			name := ev.GetPod().GetMetadata().GetName()
			switch {
			case ev.GetType() == "DELETED" && !terminating[name]:
				deleted <- deletion{ev.GetPod(), time.Now()}
			case ev.GetType() == "MODIFIED" && ev.GetPod().GetMetadata().GetDeletionTimestamp() != nil && !terminating[name]:
				terminating[name] = true
				deleted <- deletion{ev.GetPod(), time.Now()}
			}
		}
	}()

	killed := time.Now()
	if err := syscall.Kill(rep.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, grace+time.Minute, "victim Unknown", readyIs(victim, nodemodel.Unknown))
	t.Logf("victim Unknown %s after its reporter was killed (grace %s)", time.Since(killed).Round(time.Millisecond), grace)
	if ok, state := readyIs(keeper, nodemodel.True)(); !ok {
		t.Errorf("the healthy node changed: %s", state)
	}
	waitFor(t, 30*time.Second, "the victim's pods Ready=False", func() (bool, string) {
		c, cl := call()
		defer cl()
		r, err := pods.ListPods(c, &podv1.ListPodsRequest{NodeName: victim})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		allFalse := len(r.GetPods()) == 2
		for _, p := range r.GetPods() {
			st := ""
			for _, c := range p.GetStatus().GetConditions() {
				if c.GetType() == "Ready" {
					st = c.GetStatus()
				}
			}
			states = append(states, p.GetMetadata().GetName()+"="+st)
			allFalse = allFalse && st == nodemodel.False
		}
		return allFalse, strings.Join(states, " ")
	})

	var taint *nodev1.Taint
	waitFor(t, time.Minute, "unreachable:NoExecute on the victim", func() (bool, string) {
		n, err := getNode(victim)
		if err != nil {
			return false, err.Error()
		}
		for _, tt := range n.GetSpec().GetTaints() {
			if tt.GetKey() == nodemodel.TaintUnreachable && tt.GetEffect() == nodemodel.NoExecute {
				taint = tt
				return true, ""
			}
		}
		return false, fmt.Sprintf("taints %v", n.GetSpec().GetTaints())
	})
	tainted := taint.GetTimeAdded().AsTime()
	t.Logf("unreachable:NoExecute added %s after the kill", tainted.Sub(killed).Round(time.Millisecond))
	{
		c, cl := call()
		ex, err := pods.ExplainPod(c, &podv1.ExplainPodRequest{Namespace: "e2e", Name: "web"})
		cl()
		if err == nil {
			t.Logf("explain pod e2e/web: %s", ex.GetSummary())
		}
	}

	// The web pod goes: not before the toleration has run from the taint,
	// and within generous slack on a loaded machine.
	select {
	case d := <-deleted:
		if d.pod.GetMetadata().GetName() != "web" {
			t.Fatalf("%s deleted; only web may go", d.pod.GetMetadata().GetName())
		}
		var dt *podv1.PodCondition
		for _, c := range d.pod.GetStatus().GetConditions() {
			if c.GetType() == "DisruptionTarget" {
				dt = c
			}
		}
		if dt.GetStatus() != nodemodel.True || dt.GetReason() != "DeletionByTaintManager" || dt.GetMessage() != "Taint manager: deleting due to NoExecute taint" {
			t.Errorf("last state of the deleted pod lacks DisruptionTarget: %v", d.pod.GetStatus())
		}
		fired := dt.GetLastTransitionTime().AsTime()
		if fired.Before(tainted.Add(toleration)) {
			t.Errorf("evicted early: marked at %s, only %s after the taint (toleration %s)", fired, fired.Sub(tainted), toleration)
		}
		if late := d.at.Sub(tainted); late > toleration+30*time.Second {
			t.Errorf("evicted late: %s after the taint (toleration %s)", late, toleration)
		}
		if g := d.pod.GetMetadata().GetDeletionGracePeriodSeconds(); d.pod.GetMetadata().GetDeletionTimestamp() == nil || g != 30 {
			t.Errorf("web not Terminating with its 30 s grace: %v", d.pod.GetMetadata())
		}
		t.Logf("web evicted (Terminating) %s after the taint (toleration %s; marked %s after it)", d.at.Sub(tainted).Round(time.Millisecond), toleration, fired.Sub(tainted).Round(time.Millisecond))
	case <-time.After(toleration + time.Minute):
		t.Fatal("the Deployment pod was not evicted")
	}

	// The DaemonSet pod stays: it tolerates the taint for ever, so nothing
	// is scheduled for it (the leader says so), and it still exists.
	c, cl := call()
	ex, err := pods.ExplainPod(c, &podv1.ExplainPodRequest{Namespace: "e2e", Name: "agent"})
	cl()
	if err != nil {
		t.Fatalf("DaemonSet pod: %v", err)
	}
	if ex.GetDeletionTime() != nil || !strings.Contains(ex.GetSummary(), "for ever") {
		t.Errorf("DaemonSet pod: %s (deletion %v)", ex.GetSummary(), ex.GetDeletionTime())
	}
	c, cl = call()
	nex, err := nodes.ExplainNode(c, &nodev1.ExplainNodeRequest{Name: victim})
	cl()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("explain node %s: %s\n  %s", victim, nex.GetSummary(), strings.Join(nex.GetDetails(), "\n  "))
	c, cl = call()
	evs, err := nodes.ListEvents(c, &nodev1.ListEventsRequest{Kind: "Pod", Namespace: "e2e", Name: "web"})
	cl()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.GetEvents() {
		found = found || (e.GetReason() == "TaintManagerEviction" && e.GetMessage() == "Marking for deletion Pod e2e/web")
	}
	if !found {
		t.Errorf("no TaintManagerEviction event for e2e/web: %v", evs.GetEvents())
	}
	select {
	case d := <-deleted:
		t.Errorf("%s deleted too", d.pod.GetMetadata().GetName())
	default:
	}
}
