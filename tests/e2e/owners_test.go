// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// ownersStack is a localstack with two more reporters (three nodes), and
// clients of the monitor's WorkloadService and DisruptionBudgetService.
type ownersStack struct {
	*localStack
	nodes3    []string       // the stack's own node, then the two added
	pid       map[string]int // node → its reporter's pid
	workloads appsv1.WorkloadServiceClient
	budgets   policyv1.DisruptionBudgetServiceClient
}

// startOwnersStack runs the stack with short timers: a node is Unknown 4 s
// after its reporter stops, pods tolerate that 3 s by default (the monitor's
// --default-*-toleration-seconds), pod GC runs every second with a 5 s
// quarantine, and the owners sync at least every second.
func startOwnersStack(t *testing.T, prefix string, monitorArgs ...string) *ownersStack {
	t.Helper()
	extra := ""
	for _, a := range monitorArgs {
		extra += "," + a
	}
	// Three nodes with 2 s leases and status checks every second, and the
	// pods' status writes, exceed the collector's default 2 messages/s.
	s := startLocalStack(t, prefix, "--grace-period=4s", "--collector-args=--limits.messages-per-second=50",
		"--monitor-args=--node-monitor-period=500ms,--pod-gc-period=1s,--pod-gc-quarantine=5s,"+
			"--default-not-ready-toleration-seconds=3,--default-unreachable-toleration-seconds=3,--owners.resync-period=1s"+extra,
		"--reporter-args=--node-lease-duration-seconds=2")
	o := &ownersStack{localStack: s, nodes3: []string{s.node}, pid: map[string]int{s.node: s.pids["reporter"]}}
	for i := 1; i <= 2; i++ {
		n := s.name(fmt.Sprintf("%s%d", prefix, i))
		rep := s.addReporter(n, fmt.Sprintf("--admin.listen-address=127.0.0.1:%d", freePorts(t, 0)), "--node-lease-duration-seconds=2", "--node-status-update-frequency=1s", "--node-status-report-frequency=3s")
		o.nodes3 = append(o.nodes3, n)
		o.pid[n] = rep.Pid()
	}
	for _, n := range o.nodes3 {
		waitFor(t, time.Minute, n+" Ready", s.readyIs(n, nodemodel.True))
	}
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", s.base+1), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	o.workloads, o.budgets = appsv1.NewWorkloadServiceClient(cc), policyv1.NewDisruptionBudgetServiceClient(cc)
	return o
}

func template(app string) (*nodev1.LabelSelector, *podv1.PodTemplateSpec) {
	l := map[string]string{"app": app}
	return &nodev1.LabelSelector{MatchLabels: l}, &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: l}, Spec: &podv1.PodSpec{}}
}

func (o *ownersStack) create(w *appsv1.Workload) {
	o.t.Helper()
	c, cancel := o.call()
	defer cancel()
	if _, err := o.workloads.CreateWorkload(c, &appsv1.CreateWorkloadRequest{Workload: w}); err != nil {
		o.t.Fatalf("create workload: %v", err)
	}
}

func (o *ownersStack) replicaSet(name string, n int32) {
	sel, tpl := template(name)
	o.create(&appsv1.Workload{Kind: &appsv1.Workload_ReplicaSet{ReplicaSet: &appsv1.ReplicaSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "e2e", Name: name}, Spec: &appsv1.ReplicaSetSpec{Replicas: &n, Selector: sel, Template: tpl}}}})
}

func (o *ownersStack) statefulSet(name string, n int32) {
	sel, tpl := template(name)
	o.create(&appsv1.Workload{Kind: &appsv1.Workload_StatefulSet{StatefulSet: &appsv1.StatefulSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "e2e", Name: name}, Spec: &appsv1.StatefulSetSpec{Replicas: &n, Selector: sel, Template: tpl, ServiceName: name}}}})
}

func (o *ownersStack) daemonSet(name string) {
	sel, tpl := template(name)
	o.create(&appsv1.Workload{Kind: &appsv1.Workload_DaemonSet{DaemonSet: &appsv1.DaemonSet{
		Metadata: &nodev1.ObjectMeta{Namespace: "e2e", Name: name}, Spec: &appsv1.DaemonSetSpec{Selector: sel, Template: tpl}}}})
}

func (o *ownersStack) budget(name, app string, minAvailable int32) {
	o.t.Helper()
	c, cancel := o.call()
	defer cancel()
	_, err := o.budgets.CreatePodDisruptionBudget(c, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: &policyv1.PodDisruptionBudget{
		Metadata: &nodev1.ObjectMeta{Namespace: "e2e", Name: name},
		Spec: &policyv1.PodDisruptionBudgetSpec{Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			MinAvailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: minAvailable}}}}})
	if err != nil {
		o.t.Fatalf("create budget %s: %v", name, err)
	}
}

// allowed is the budget's disruptionsAllowed as the monitor serves it.
func (o *ownersStack) allowed(name string) (int32, error) {
	c, cancel := o.call()
	defer cancel()
	r, err := o.budgets.GetPodDisruptionBudget(c, &policyv1.GetPodDisruptionBudgetRequest{Namespace: "e2e", Name: name})
	return r.GetPodDisruptionBudget().GetStatus().GetDisruptionsAllowed(), err
}

// appPods are the pods labelled app=app, by name.
func (o *ownersStack) appPods(app string) map[string]*podv1.Pod {
	o.t.Helper()
	c, cancel := o.call()
	defer cancel()
	r, err := o.pods.ListPods(c, &podv1.ListPodsRequest{Namespace: "e2e", LabelSelector: "app=" + app})
	if err != nil {
		o.t.Fatalf("list pods app=%s: %v", app, err)
	}
	out := map[string]*podv1.Pod{}
	for _, p := range r.GetPods() {
		out[p.GetMetadata().GetName()] = p
	}
	return out
}

func live(p *podv1.Pod) bool {
	return p != nil && !isTerminating(p) && p.GetStatus().GetPhase() == "Running" && podReady(p) == nodemodel.True
}

func nodeOf(p *podv1.Pod) string { return p.GetSpec().GetNodeName() }

func describePods(ps map[string]*podv1.Pod) string {
	var out []string
	for n, p := range ps {
		out = append(out, fmt.Sprintf("%s@%s(%s)", n, nodeOf(p), podState(p)))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// liveOn counts app's live pods per node.
func liveOn(ps map[string]*podv1.Pod) map[string]int {
	m := map[string]int{}
	for _, p := range ps {
		if live(p) {
			m[nodeOf(p)]++
		}
	}
	return m
}

// waitLive waits until app has n live pods (and no other), on distinct
// nodes when distinct is set.
func (o *ownersStack) waitLive(app string, n int, distinct bool) map[string]*podv1.Pod {
	o.t.Helper()
	var ps map[string]*podv1.Pod
	waitFor(o.t, time.Minute, fmt.Sprintf("%d live %s pods", n, app), func() (bool, string) {
		ps = o.appPods(app)
		count := 0
		for _, p := range ps {
			if live(p) {
				count++
			}
		}
		return count == n && len(ps) == n && (!distinct || len(liveOn(ps)) == n), describePods(ps)
	})
	return ps
}

// TestOwnersNodeLoss follows the owners' pods through the loss of a node
// (spec §12, §16, workload-fates upstream): three nodes; a ReplicaSet of 3,
// a StatefulSet of 2 and a DaemonSet, every pod started by its node's
// reporter (Pending → Running, Ready). The reporter of a node holding a web
// (RS) pod and a db (STS) pod is stopped:
//
//  1. both are evicted after the 3 s default tolerations; the RS replaces
//     web on another node while the old pod is still Terminating, the STS
//     does not replace db while db is Terminating (at most one pod per
//     identity), and the DaemonSet's pod stays (it tolerates the node's
//     NoExecute taints for ever);
//  2. DeleteNode: after the 5 s quarantine pod GC removes the node's pods,
//     and the STS recreates db with the same name on another node;
//  3. SIGCONT: the node registers again, and the DaemonSet creates a new
//     pod on it (pod GC removed the old one with its node, as upstream's
//     PodGC removes a DaemonSet's orphaned pods), started and Ready.
func TestOwnersNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	o := startOwnersStack(t, "own")
	o.replicaSet("web", 3)
	o.statefulSet("db", 2)
	o.daemonSet("agent")
	web := o.waitLive("web", 3, false)
	db := o.waitLive("db", 2, false)
	agents := o.waitLive("agent", 3, true)
	for _, n := range []string{"db-0", "db-1"} {
		if db[n] == nil {
			t.Fatalf("StatefulSet pods are not db-0 and db-1: %s", describePods(db))
		}
	}

	// The victim: a node holding a web pod and a db pod.
	webOn, dbOn := liveOn(web), liveOn(db)
	victim := ""
	for _, n := range o.nodes3 {
		if webOn[n] > 0 && dbOn[n] > 0 {
			victim = n
			break
		}
	}
	if victim == "" {
		t.Fatalf("no node holds both a web and a db pod: web %s; db %s", describePods(web), describePods(db))
	}
	var oldWeb, oldDB, oldAgent *podv1.Pod
	for _, p := range web {
		if nodeOf(p) == victim && oldWeb == nil {
			oldWeb = p
		}
	}
	for _, n := range []string{"db-0", "db-1"} {
		if nodeOf(db[n]) == victim && oldDB == nil {
			oldDB = db[n]
		}
	}
	for _, p := range agents {
		if nodeOf(p) == victim {
			oldAgent = p
		}
	}
	dbName := oldDB.GetMetadata().GetName()
	t.Logf("victim %s: web %s, db %s, agent %s", victim, oldWeb.GetMetadata().GetName(), dbName, oldAgent.GetMetadata().GetName())

	// 1. The victim's reporter stops.
	if err := syscall.Kill(o.pid[victim], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = syscall.Kill(o.pid[victim], syscall.SIGCONT)
		}
	})
	waitFor(t, 30*time.Second, "web replaced elsewhere while the old web pod is Terminating", func() (bool, string) {
		ps := o.appPods("web")
		old := ps[oldWeb.GetMetadata().GetName()]
		repl := 0
		for n, p := range ps {
			if n != oldWeb.GetMetadata().GetName() && nodeOf(p) != victim && live(p) {
				repl++
			}
		}
		return isTerminating(old) && repl == 3, describePods(ps)
	})
	// The StatefulSet waits for its Terminating pod: db keeps its uid, node
	// and deletion for a few owner syncs more, and the DaemonSet's pod is
	// not evicted.
	checkUntil := time.Now().Add(3 * time.Second)
	for time.Now().Before(checkUntil) {
		p := o.pod(dbName)
		if p.GetMetadata().GetUid() != oldDB.GetMetadata().GetUid() || !isTerminating(p) || nodeOf(p) != victim {
			t.Fatalf("%s replaced (or not evicted) while the old one is Terminating on the stopped node: %s@%s uid %s",
				dbName, podState(p), nodeOf(p), p.GetMetadata().GetUid())
		}
		a := o.pod(oldAgent.GetMetadata().GetName())
		if a == nil || isTerminating(a) {
			t.Fatalf("the DaemonSet's pod on the stopped node was evicted: %s", podState(a))
		}
		time.Sleep(300 * time.Millisecond)
	}

	// 2. The node object is deleted, its reporter still stopped: pod GC
	// removes its pods after the quarantine, and db comes back by name.
	deleted := time.Now()
	o.deleteNode(victim)
	waitFor(t, 45*time.Second, dbName+" recreated on another node", func() (bool, string) {
		p := o.pod(dbName)
		return p != nil && p.GetMetadata().GetUid() != oldDB.GetMetadata().GetUid() && nodeOf(p) != victim && live(p),
			fmt.Sprintf("%s@%s uid %s", podState(p), nodeOf(p), p.GetMetadata().GetUid())
	})
	t.Logf("%s recreated elsewhere %s after DeleteNode (quarantine 5s)", dbName, time.Since(deleted).Round(time.Millisecond))
	if p := o.pod(oldWeb.GetMetadata().GetName()); p != nil {
		t.Errorf("the old web pod outlived its node's deletion and the quarantine: %s", podState(p))
	}

	// 3. The reporter resumes: its node was deleted, so it registers again,
	// and the DaemonSet gives the new node object a new pod.
	if err := syscall.Kill(o.pid[victim], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	waitFor(t, 30*time.Second, victim+" registered again and Ready", o.readyIs(victim, nodemodel.True))
	waitFor(t, 30*time.Second, "the DaemonSet's pod Ready on the re-registered node", func() (bool, string) {
		ps := o.appPods("agent")
		on := 0
		for _, p := range ps {
			if nodeOf(p) == victim && live(p) {
				on++
			}
		}
		return on == 1 && len(liveOn(ps)) == 3, describePods(ps)
	})
	for _, p := range o.appPods("agent") {
		if nodeOf(p) == victim && p.GetMetadata().GetUid() == oldAgent.GetMetadata().GetUid() {
			t.Errorf("the DaemonSet's pod on %s is the old one (uid %s): pod GC should have removed it with its node", victim, p.GetMetadata().GetUid())
		}
	}
	if ps := o.appPods("db"); len(ps) != 2 || !live(ps["db-0"]) || !live(ps["db-1"]) {
		t.Errorf("db after the node came back: %s", describePods(ps))
	}
}

// TestDrain drains a node with `nodepulse drain` (spec §15) as processes:
//
//  1. a PodDisruptionBudget minAvailable=2 over a ReplicaSet of 3, two of
//     whose pods are on the drained node: the drain evicts one, is refused
//     the second (429, retried) until the replacement is Ready elsewhere,
//     then ends "node/X drained"; the node stays cordoned, and live pods
//     never drop below 2; the DaemonSet's pod is ignored;
//  2. a budget minAvailable=3 over the 3 (never allows): with --timeout 5s
//     the drain of another node stops with kubectl's message, exit status
//     non-zero, that node cordoned and its pod untouched.
func TestDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	o := startOwnersStack(t, "drn")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(o.bin, "nodepulse"), append(args, "--server", fmt.Sprintf("127.0.0.1:%d", o.base+1))...)
		var out, errOut syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	must := func(args ...string) {
		if out, errOut, err := cli(args...); err != nil {
			t.Fatalf("nodepulse %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	}

	// The third node is cordoned while the ReplicaSet places its pods, so
	// one node holds two of them.
	spare := o.nodes3[2]
	must("cordon", spare)
	o.daemonSet("agent")
	o.replicaSet("web", 3)
	web := o.waitLive("web", 3, false)
	o.waitLive("agent", 3, true)
	must("uncordon", spare)
	x := ""
	for n, c := range liveOn(web) {
		if c >= 2 {
			x = n
		}
	}
	if x == "" {
		t.Fatalf("no node holds two web pods: %s", describePods(web))
	}
	var onX []string
	for n, p := range web {
		if nodeOf(p) == x {
			onX = append(onX, n)
		}
	}
	o.budget("web-pdb", "web", 2)
	waitFor(t, 30*time.Second, "web-pdb allowing 1 disruption", func() (bool, string) {
		a, err := o.allowed("web-pdb")
		return err == nil && a == 1, fmt.Sprint(a, err)
	})

	// Watch the drain: live web pods never below 2, and the second pod of
	// x is evicted only once a replacement is Ready elsewhere.
	type seen struct {
		minLive                    int
		replacementReady, evicted2 time.Time
		last                       string
	}
	obs := seen{minLive: 3}
	done := make(chan struct{})
	watched := make(chan seen)
	go func() {
		for {
			select {
			case <-done:
				watched <- obs
				return
			case <-time.After(100 * time.Millisecond):
			}
			ps := o.appPods("web")
			n, evicted := 0, 0
			for name, p := range ps {
				if live(p) {
					n++
				}
				if live(p) && nodeOf(p) != x && !slices.Contains(onX, name) && web[name] == nil && obs.replacementReady.IsZero() {
					obs.replacementReady = time.Now()
				}
			}
			for _, name := range onX {
				if p := ps[name]; p == nil || isTerminating(p) {
					evicted++
				}
			}
			if evicted == len(onX) && obs.evicted2.IsZero() {
				obs.evicted2 = time.Now()
			}
			obs.minLive = min(obs.minLive, n)
			obs.last = describePods(ps)
		}
	}()
	started := time.Now()
	out, errOut, err := cli("drain", x, "--ignore-daemonsets", "--delete-emptydir-data")
	close(done)
	got := <-watched
	t.Logf("drain of %s (%s) took %s:\n%s%s", x, strings.Join(onX, ", "), time.Since(started).Round(time.Millisecond), out, errOut)
	if err != nil {
		t.Fatalf("drain %s: %v", x, err)
	}
	if !strings.Contains(out, "node/"+x+" drained") {
		t.Errorf("drain output lacks node/%s drained", x)
	}
	if !strings.Contains(errOut, "will retry after") || !strings.Contains(errOut, "disruption budget") {
		t.Errorf("the budget never refused an eviction (want a 429 retried): %s", errOut)
	}
	if got.minLive < 2 {
		t.Errorf("live web pods dropped to %d during the drain (minAvailable 2)", got.minLive)
	}
	if got.replacementReady.IsZero() || got.evicted2.IsZero() || got.evicted2.Before(got.replacementReady) {
		t.Errorf("the second pod of %s evicted (%s) before a replacement was Ready elsewhere (%s); last %s",
			x, got.evicted2.Format("15:04:05.000"), got.replacementReady.Format("15:04:05.000"), got.last)
	}
	if n, err := o.getNode(x); err != nil || !n.GetSpec().GetUnschedulable() {
		t.Errorf("%s not cordoned after the drain: %v", x, err)
	}
	ps := o.waitLive("web", 3, false)
	for _, p := range ps {
		if nodeOf(p) == x {
			t.Errorf("web pod %s still on drained %s", p.GetMetadata().GetName(), x)
		}
	}
	if on := liveOn(o.appPods("agent")); on[x] != 1 {
		t.Errorf("the DaemonSet's pod on %s was not ignored: %v", x, on)
	}

	// 2. A budget that never allows: --timeout 5s ends the drain.
	c, cancelCall := o.call()
	_, err = o.budgets.DeletePodDisruptionBudget(c, &policyv1.DeletePodDisruptionBudgetRequest{Namespace: "e2e", Name: "web-pdb"})
	cancelCall()
	if err != nil {
		t.Fatal(err)
	}
	o.budget("web-all", "web", 3)
	waitFor(t, 30*time.Second, "web-all computed (0 allowed, 3 healthy)", func() (bool, string) {
		c, cancel := o.call()
		defer cancel()
		r, err := o.budgets.GetPodDisruptionBudget(c, &policyv1.GetPodDisruptionBudgetRequest{Namespace: "e2e", Name: "web-all"})
		st := r.GetPodDisruptionBudget().GetStatus()
		return err == nil && st.GetCurrentHealthy() == 3 && st.GetDisruptionsAllowed() == 0, fmt.Sprint(st, err)
	})
	y, victimPod := "", ""
	for n, p := range ps {
		if nodeOf(p) != x {
			y, victimPod = nodeOf(p), n
			break
		}
	}
	started = time.Now()
	out, errOut, err = cli("drain", y, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "5s")
	took := time.Since(started)
	t.Logf("drain of %s with --timeout 5s took %s: %v\n%s%s", y, took.Round(time.Millisecond), err, out, errOut)
	if err == nil {
		t.Fatalf("drain of %s against a budget that never allows succeeded", y)
	}
	if !strings.Contains(errOut, "global timeout reached: 5s") || !strings.Contains(errOut, "There are pending nodes to be drained") {
		t.Errorf("drain did not stop with the timeout message: %s", errOut)
	}
	if took > 20*time.Second {
		t.Errorf("drain with --timeout 5s took %s", took)
	}
	if n, err := o.getNode(y); err != nil || !n.GetSpec().GetUnschedulable() {
		t.Errorf("%s not left cordoned after the failed drain: %v", y, err)
	}
	if p := o.pod(victimPod); !live(p) || nodeOf(p) != y {
		t.Errorf("%s evicted despite the budget: %s@%s", victimPod, podState(p), nodeOf(p))
	}
}
