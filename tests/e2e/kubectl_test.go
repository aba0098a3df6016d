// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/tests/binaries"
	"github.com/nodepulse/nodepulse/tests/procutil"
)

// kubectlBin is the unmodified kubectl `make kubectl` builds into bin/.
func kubectlBin(t *testing.T) string {
	t.Helper()
	root, err := binaries.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make kubectl`; `make test` builds it first)", bin, err)
	}
	return bin
}

// kubeconfig writes a kubeconfig for the stack's plaintext Kubernetes API.
func (s *localStack) kubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "http://127.0.0.1:%d"}
users:
- name: dev
  user: {}
contexts:
- name: local
  context: {cluster: local, user: dev, namespace: default}
current-context: local
`, s.base+3)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKubectl runs an unmodified kubectl against what `make run` starts
// and asserts on what it prints: reads, the node writes of the seeds,
// drain and forced pod deletion.
func TestKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := kubectlBin(t)
	// A node created ahead of its reporter has the startup grace period.
	o := startOwnersStack(t, "kc", "--node-startup-grace-period=5s")
	kc := o.kubeconfig(t)
	cacheDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kc, "--cache-dir", cacheDir}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	contains := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
	}
	// row is the fields of the output line whose first field is first.
	row := func(out, first string) []string {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == first {
				return f
			}
		}
		t.Fatalf("no row %q in:\n%s", first, out)
		return nil
	}
	nodes := slices.Sorted(slices.Values(o.nodes3))
	x := nodes[0]

	out := must("get", "nodes")
	contains(out, "NAME", "STATUS", "ROLES", "AGE", "VERSION")
	for _, n := range nodes {
		if f := row(out, n); f[1] != "Ready" || f[2] != "<none>" {
			t.Fatalf("row of %s: %q", n, f)
		}
	}
	if strings.Contains(out, "INTERNAL-IP") {
		t.Fatalf("wide columns without -o wide:\n%s", out)
	}
	contains(must("get", "nodes", "-o", "wide"), "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")
	if got := must("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"); got != strings.Join(nodes, " ") {
		t.Fatalf("jsonpath: %q, want %q", got, strings.Join(nodes, " "))
	}

	contains(must("label", "node", x, "team=blue"), "node/"+x+" labeled")
	if got := must("get", "nodes", "-l", "team=blue", "-o", "name"); got != "node/"+x+"\n" {
		t.Fatalf("-l team=blue: %q", got)
	}
	contains(must("annotate", "node", x, "note=hello", "kubelet.kubernetes.io/force-status-update="+fmt.Sprint(time.Now().Unix())), "node/"+x+" annotated")
	if got := must("get", "node", x, "-o", "jsonpath={.metadata.annotations.note}"); got != "hello" {
		t.Fatalf("annotation: %q", got)
	}
	waitFor(t, 10*time.Second, "the forced status update in the monitor's log", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(o.logDir, "monitor.log"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "status update requested") && strings.Contains(l, `"`+x+`"`) {
				return true, ""
			}
		}
		return false, "no 'status update requested' line for " + x
	})

	contains(must("cordon", x), "node/"+x+" cordoned")
	if f := row(must("get", "node", x), x); f[1] != "Ready,SchedulingDisabled" {
		t.Fatalf("cordoned row: %q", f)
	}
	contains(must("uncordon", x), "node/"+x+" uncordoned")
	// kubectl taint sends the whole list, the new taint first; the list
	// is kept in that order, as upstream keeps it.
	contains(must("taint", "nodes", x, "first=1:PreferNoSchedule"), "node/"+x+" tainted")
	contains(must("taint", "nodes", x, "second=2:PreferNoSchedule"), "node/"+x+" tainted")
	if got := must("get", "node", x, "-o", "jsonpath={.spec.taints[*].key}"); got != "second first" {
		t.Fatalf("taint order %q, want \"second first\"", got)
	}
	must("taint", "nodes", x, "first:PreferNoSchedule-", "second:PreferNoSchedule-")
	contains(must("taint", "nodes", x, "dedicated=db:NoSchedule"), "node/"+x+" tainted")
	contains(must("get", "node", x, "-o", "jsonpath={.spec.taints}"), `"key":"dedicated"`, `"value":"db"`)
	contains(must("taint", "nodes", x, "dedicated:NoSchedule-"), "node/"+x+" untainted")
	if got := must("get", "node", x, "-o", "jsonpath={.spec.taints}"); strings.Contains(got, "dedicated") {
		t.Fatalf("taint not removed: %s", got)
	}
	if out, err := run("get", "nodes", "--field-selector", "foo=bar"); err == nil || !strings.Contains(out, "Error from server (BadRequest)") {
		t.Fatalf("unknown field selector: %v\n%s", err, out)
	}

	// What the generic API server brings: the version, OpenAPI for
	// explain, server-side apply, the self reviews, cluster-info.
	contains(must("version"), "Server Version: v1.37.2+nodepulse.")
	contains(must("explain", "node.spec.taints"), "FIELD: taints", "DESCRIPTION:")
	applyFile := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(applyFile, []byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: "+x+"\n  labels:\n    applied: \"yes\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	contains(must("apply", "--server-side", "-f", applyFile), "node/"+x+" serverside-applied")
	if got := must("get", "node", x, "-o", "jsonpath={.metadata.labels.applied}"); got != "yes" {
		t.Fatalf("applied label: %q", got)
	}
	// Another field manager applying the same label is a conflict, as
	// upstream's; --force-conflicts takes the field over.
	other := filepath.Join(t.TempDir(), "node-other.yaml")
	if err := os.WriteFile(other, []byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: "+x+"\n  labels:\n    applied: \"no\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("apply", "--server-side", "--field-manager=other", "-f", other); err == nil || !strings.Contains(out, `conflict with "kubectl"`) {
		t.Fatalf("apply of another manager's label: %v %q, want a conflict with kubectl", err, out)
	}
	must("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other)
	if got := must("get", "node", x, "-o", "jsonpath={.metadata.labels.applied}"); got != "no" {
		t.Fatalf("label after the forced apply: %q", got)
	}
	contains(must("auth", "whoami"), "system:anonymous")
	// (kubectl warns on stderr that nodes are cluster-scoped; the answer
	// is the last line.)
	if f := strings.Fields(must("auth", "can-i", "delete", "nodes")); len(f) == 0 || f[len(f)-1] != "yes" {
		got := f
		t.Fatalf("auth can-i on an open plaintext server: %q", got)
	}
	contains(must("auth", "can-i", "--list"), "*.*", "selfsubjectreviews.authentication.k8s.io")
	contains(must("cluster-info"), "Kubernetes control plane is running at http://127.0.0.1:")

	// A node created ahead of its reporter goes Unknown the startup grace
	// period (5 s here) after its creation, as upstream's never-posted
	// node.
	ghostFile := filepath.Join(t.TempDir(), "ghost.yaml")
	if err := os.WriteFile(ghostFile, []byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: ghost-"+x+"\n  labels:\n    rack: r9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	contains(must("create", "-f", ghostFile), "node/ghost-"+x+" created")
	waitFor(t, 30*time.Second, "the created node Unknown", func() (bool, string) {
		out, _ := run("get", "node", "ghost-"+x, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}`)
		return out == "Unknown/NodeStatusNeverUpdated", out
	})
	contains(must("delete", "node", "ghost-"+x), `node "ghost-`+x+`" deleted`)

	// -w: the list, then one line per change; the test reads the first
	// lines and stops it.
	wctx, wcancel := context.WithCancel(ctx)
	w := exec.CommandContext(wctx, bin, "--kubeconfig", kc, "--cache-dir", cacheDir, "get", "nodes", "-w")
	pipe, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	deadline := time.After(30 * time.Second)
	for len(got) < 1+len(nodes) {
		select {
		case l := <-lines:
			got = append(got, l)
		case <-deadline:
			t.Fatalf("get -w printed only %q", got)
		}
	}
	must("label", "node", x, "watched=yes")
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, x+" ") {
			t.Fatalf("get -w: change line %q, want one for %s", l, x)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("get -w printed no line for a change")
	}
	wcancel()
	_ = w.Wait()
	contains(got[0], "NAME", "STATUS")

	out = must("describe", "node", x)
	contains(out, "Name:               "+x, "team=blue", "note: hello", "Lease:", "HolderIdentity:  "+x, "Conditions:", "Ready            True", "Non-terminated Pods:", "Events:")

	o.daemonSet("agent")
	o.replicaSet("web", 3)
	o.waitLive("agent", 3, true)
	o.waitLive("web", 3, false)
	out = must("get", "pods", "-A", "-o", "wide", "--field-selector", "spec.nodeName="+x)
	contains(out, "NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES", "e2e ", "agent-")
	rows := strings.Split(strings.TrimSpace(out), "\n")[1:]
	for _, r := range rows {
		if !strings.Contains(r, " "+x+" ") {
			t.Fatalf("a pod of another node: %q", r)
		}
	}

	// A pod with two containers, created through kubectl and bound to x:
	// the node's agent starts both, so READY reads 2/2 as upstream's.
	podFile := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(podFile, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: two\n  namespace: e2e\nspec:\n  nodeName: "+x+"\n  containers:\n  - {name: app, image: example/app:1}\n  - {name: sidecar, image: example/sidecar:1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	contains(must("create", "-f", podFile), "pod/two created")
	waitFor(t, 30*time.Second, "pod two 2/2 Running", func() (bool, string) {
		out, _ := run("get", "pod", "-n", "e2e", "two", "--no-headers")
		f := strings.Fields(out)
		return len(f) >= 3 && f[1] == "2/2" && f[2] == "Running", out
	})
	if got := must("get", "pod", "-n", "e2e", "two", "-o", "jsonpath={.status.containerStatuses[*].name}"); got != "app sidecar" {
		t.Fatalf("container statuses %q", got)
	}
	must("delete", "pod", "-n", "e2e", "two", "--force", "--grace-period=0")

	web := o.appPods("web")
	var victim string
	for name := range web {
		victim = name
		break
	}
	contains(must("delete", "pod", "-n", "e2e", victim, "--force", "--grace-period=0"), `pod "`+victim+`" force deleted`)
	if _, ok := o.appPods("web")[victim]; ok {
		t.Fatalf("%s still stored after a forced delete", victim)
	}

	// A budget that allows no disruption: kubectl drain prints upstream's
	// refusal for each pod, retries every 5 s and gives up at --timeout.
	pdbFile := filepath.Join(t.TempDir(), "pdb.yaml")
	if err := os.WriteFile(pdbFile, []byte("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web-pdb\n  namespace: e2e\nspec:\n  minAvailable: 3\n  selector:\n    matchLabels:\n      app: web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	contains(must("create", "-f", pdbFile), "poddisruptionbudget.policy/web-pdb created")
	began := time.Now()
	out, err = run("drain", x, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=12s")
	took := time.Since(began)
	if err == nil {
		t.Fatalf("drain against a budget allowing nothing succeeded:\n%s", out)
	}
	contains(out, `(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.`, `-n "e2e"`)
	if took > 30*time.Second {
		t.Fatalf("drain --timeout=12s took %s (client-go retried silently?)", took)
	}
	contains(must("delete", "pdb", "-n", "e2e", "web-pdb"), `poddisruptionbudget.policy "web-pdb" deleted`)
	must("uncordon", x)
	out = must("drain", x, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s")
	contains(out, "node/"+x+" cordoned", "ignoring DaemonSet-managed Pods", "node/"+x+" drained")
	for name, p := range o.appPods("web") {
		if nodeOf(p) == x && live(p) {
			t.Fatalf("web pod %s still live on the drained node", name)
		}
	}
	must("uncordon", x)

	out = must("get", "leases", "-n", "kube-node-lease")
	contains(out, "NAME", "HOLDER", "AGE")
	for _, n := range nodes {
		if f := row(out, n); f[1] != n {
			t.Fatalf("lease row of %s: %q", n, f)
		}
	}
	out = must("get", "events", "--field-selector", "involvedObject.name="+x)
	contains(out, "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", "node/"+x)

	// Deleting a node removes it and its records in one transaction (a
	// live reporter registers it again, as a kubelet does).
	contains(must("delete", "node", nodes[2]), `node "`+nodes[2]+`" deleted`)
}

// TestInformerThroughCollectorRestart lists and watches nodes with a
// client-go informer while the collector two nodes report to is killed and
// started again: the informer must see each node turn NotReady and Ready
// again (no transition missed), and end with what a fresh list says.
func TestInformerThroughCollectorRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	s := startLocalStack(t, "inf", "--grace-period=4s", "--monitor-args=--node-monitor-period=500ms")
	// A second collector of the same fleet, for the test to kill.
	port := freePorts(t, 0, 100)
	colArgs := []string{"--grpc.insecure", fmt.Sprintf("--grpc.listen-address=127.0.0.1:%d", port), fmt.Sprintf("--admin.listen-address=127.0.0.1:%d", port+100),
		fmt.Sprintf("--etcd.endpoints=127.0.0.1:%d", s.etcdPort), "--log.format=console"}
	startCollector := func(name string) *procutil.Proc {
		p, err := procutil.Start(name, s.logDir, filepath.Join(s.bin, "collector"), colArgs...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		if err := p.WaitHTTP(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/readyz", port+100), time.Minute); err != nil {
			t.Fatal(err)
		}
		return p
	}
	col := startCollector("collector-2")
	var mine []string
	for i := 1; i <= 2; i++ {
		n := s.name(fmt.Sprintf("inf%d", i))
		p, err := procutil.Start("reporter-"+n, s.logDir, filepath.Join(s.bin, "reporter"), "--collector.insecure", fmt.Sprintf("--collector.addresses=127.0.0.1:%d", port),
			fmt.Sprintf("--admin.listen-address=127.0.0.1:%d", freePorts(t, 0)), "--node-name="+n, "--log.format=console",
			"--node-lease-duration-seconds=2", "--node-status-update-frequency=1s", "--node-status-report-frequency=3s")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		mine = append(mine, n)
	}
	for _, n := range mine {
		waitFor(t, time.Minute, n+" Ready", s.readyIs(n, nodemodel.True))
	}

	cs, err := kubernetes.NewForConfig(&rest.Config{Host: fmt.Sprintf("http://127.0.0.1:%d", s.base+3)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{} // node → Ready statuses in the order the informer saw them
	record := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		st := "None"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				st = string(c.Status)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if h := seen[n.Name]; len(h) == 0 || h[len(h)-1] != st {
			seen[n.Name] = append(h, st)
		}
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	col.Kill()
	for _, n := range mine {
		waitFor(t, time.Minute, n+" Unknown", s.readyIs(n, nodemodel.Unknown))
	}
	startCollector("collector-2b")
	for _, n := range mine {
		waitFor(t, time.Minute, n+" Ready again", s.readyIs(n, nodemodel.True))
	}
	waitFor(t, 30*time.Second, "the informer seeing True, Unknown, True", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range mine {
			if h := seen[n]; !slices.Equal(h, []string{"True", "Unknown", "True"}) {
				return false, fmt.Sprintf("%s: %v", n, h)
			}
		}
		return true, ""
	})
	// The informer's store and a fresh list agree on every node's version.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, 20*time.Second, "the informer matching a fresh list", func() (bool, string) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, n := range l.Items {
			o, ok, _ := inf.GetStore().GetByKey(n.Name)
			if !ok {
				return false, n.Name + " missing from the informer"
			}
			if got := o.(*corev1.Node); !sameReady(got, &n) || !maps(got.Labels, n.Labels) || got.Spec.Unschedulable != n.Spec.Unschedulable {
				return false, n.Name + " differs"
			}
		}
		return len(l.Items) == len(inf.GetStore().List()), fmt.Sprint(len(l.Items), " listed, ", len(inf.GetStore().List()), " in the informer")
	})
}

func sameReady(a, b *corev1.Node) bool {
	ready := func(n *corev1.Node) corev1.ConditionStatus {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}
	return ready(a) == ready(b)
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
