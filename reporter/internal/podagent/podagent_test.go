// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podagent

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const node, nodeUID = "n1", "node-uid-1"

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func cond(typ, status string, since time.Time) *podv1.PodCondition {
	return &podv1.PodCondition{Type: typ, Status: status, LastTransitionTime: nodemodel.Timestamp(since)}
}

func pod(name, phase string, conds ...*podv1.PodCondition) *podv1.Pod {
	return &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{Namespace: "ns", Name: name, Uid: "uid-" + name},
		Spec:     &podv1.PodSpec{NodeName: node},
		Status:   &podv1.PodStatus{Phase: phase, Conditions: conds},
	}
}

func terminating(p *podv1.Pod) *podv1.Pod {
	p.Metadata.DeletionTimestamp = nodemodel.Timestamp(at(-30))
	return p
}

var static = &podv1.Pod{
	Metadata: &nodev1.ObjectMeta{Namespace: "kube-system", Name: "etcd", Labels: map[string]string{"tier": "control-plane"}},
	Spec:     &podv1.PodSpec{},
}

// storedMirror is the mirror pod of static as the collector stores it.
func storedMirror(mod func(*podv1.Pod)) *podv1.Pod {
	m := MirrorOf(static, node, nodeUID)
	m.Metadata.Uid = "mirror-uid"
	m.Status = &podv1.PodStatus{Phase: validation.PodRunning, Conditions: []*podv1.PodCondition{cond(nodemodel.Ready, nodemodel.True, at(-100))}}
	if mod != nil {
		mod(m)
	}
	return m
}

func full(ps ...*podv1.Pod) *collectorv1.PodSync { return &collectorv1.PodSync{Full: true, Pods: ps} }

func changed(ps ...*podv1.Pod) *collectorv1.PodSync { return &collectorv1.PodSync{Pods: ps} }

// step is one moment of a timeline: a PodSync arrives (if set), acks of the
// writes in flight arrive (ack: ok or refused), then the agent decides.
type step struct {
	at   float64
	sync *collectorv1.PodSync
	ack  map[string]bool
	want []string // "kind key"
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name   string
		static []*podv1.Pod
		steps  []step
		check  func(t *testing.T, acts []Action) // on the first step's actions
		last   func(t *testing.T, acts []Action) // on the last step's actions
	}{{
		name:  "nothing before the first full sync",
		steps: []step{{at: 0, sync: changed(terminating(pod("a", "Running"))), want: nil}},
	}, {
		name: "terminating: finish the deletion",
		steps: []step{{at: 0, sync: full(terminating(pod("a", "Running", cond("Ready", "True", at(-500)), cond("DisruptionTarget", "True", at(-40))))),
			want: []string{"finish-deletion ns/a"}}},
		check: func(t *testing.T, acts []Action) {
			d := acts[0].Request.GetPodDelete()
			if d.GetUid() != "uid-a" || d.GetStatus().GetPhase() != "Failed" {
				t.Fatalf("delete = %v, want uid-a with phase Failed", d)
			}
			r := findCondition(d.GetStatus(), "Ready")
			if r.GetStatus() != "False" || r.GetReason() != ReasonPodCompleted || !r.GetLastTransitionTime().AsTime().Equal(t0) {
				t.Fatalf("Ready = %v, want False/PodCompleted since now", r)
			}
			if findCondition(d.GetStatus(), "DisruptionTarget") == nil {
				t.Fatal("DisruptionTarget dropped")
			}
		},
	}, {
		name:  "terminating and already terminal: deleted, phase kept",
		steps: []step{{at: 0, sync: full(terminating(pod("a", "Succeeded"))), want: []string{"finish-deletion ns/a"}}},
		check: func(t *testing.T, acts []Action) {
			if ph := acts[0].Request.GetPodDelete().GetStatus().GetPhase(); ph != "Succeeded" {
				t.Fatalf("phase = %s, want Succeeded kept", ph)
			}
		},
	}, {
		name: "live NotReady: Ready=True with the cached transition time",
		steps: []step{
			{at: 0, sync: full(pod("a", "Running", cond("Ready", "True", at(-500)))), want: nil},
			{at: 60, sync: changed(pod("a", "Running", cond("Ready", "False", at(50)), cond("DisruptionTarget", "True", at(55)))), want: []string{"set-ready ns/a"}},
		},
		last: func(t *testing.T, acts []Action) {
			st := acts[0].Request.GetPodStatus().GetStatus()
			if r := findCondition(st, "Ready"); r.GetStatus() != "True" || !r.GetLastTransitionTime().AsTime().Equal(at(-500)) {
				t.Fatalf("Ready = %v, want True since the cached %s", r, at(-500))
			}
			if findCondition(st, "DisruptionTarget") == nil {
				t.Fatal("DisruptionTarget dropped")
			}
		},
	}, {
		name:  "live NotReady never seen Ready: Ready=True since now",
		steps: []step{{at: 0, sync: full(pod("a", "Running", cond("Ready", "False", at(-50)))), want: []string{"set-ready ns/a"}}},
		check: func(t *testing.T, acts []Action) {
			r := findCondition(acts[0].Request.GetPodStatus().GetStatus(), "Ready")
			if r.GetStatus() != "True" || !r.GetLastTransitionTime().AsTime().Equal(t0) {
				t.Fatalf("Ready = %v, want True since now", r)
			}
		},
	}, {
		name:  "terminal pods are left alone",
		steps: []step{{at: 0, sync: full(pod("f", "Failed", cond("Ready", "False", at(-5))), pod("s", "Succeeded")), want: nil}},
	}, {
		name: "pending pods are started: Running, Initialized, ContainersReady and Ready True since now",
		steps: []step{
			{at: 0, sync: full(pod("p", "Pending", cond("PodScheduled", "True", at(-5))), pod("q", "")), want: []string{"set-ready ns/p", "set-ready ns/q"}},
		},
		check: func(t *testing.T, acts []Action) {
			for _, a := range acts {
				st := a.Request.GetPodStatus().GetStatus()
				if st.GetPhase() != "Running" {
					t.Fatalf("%s: phase %q, want Running", a.Key, st.GetPhase())
				}
				for _, c := range []string{"Initialized", "ContainersReady", "Ready"} {
					if r := findCondition(st, c); r.GetStatus() != "True" || !r.GetLastTransitionTime().AsTime().Equal(t0) {
						t.Fatalf("%s: %s = %v, want True since now", a.Key, c, r)
					}
				}
				if a.Key == "ns/p" && findCondition(st, "PodScheduled").GetStatus() != "True" {
					t.Fatalf("PodScheduled lost: %v", st)
				}
			}
		},
	}, {
		name: "a write is repeated no sooner than the reconcile period; a refused one after the retry delay",
		steps: []step{
			{at: 0, sync: full(pod("a", "Running", cond("Ready", "False", at(-50))), terminating(pod("b", "Running"))), want: []string{"set-ready ns/a", "finish-deletion ns/b"}},
			{at: 0.5, want: nil}, // in flight
			{at: 1, ack: map[string]bool{"ns/a": true, "ns/b": false}, want: nil},
			{at: 2, want: []string{"finish-deletion ns/b"}},
			// The monitor marked it not ready again meanwhile.
			{at: 5, sync: changed(pod("a", "Running", cond("Ready", "False", at(4)))), ack: map[string]bool{"ns/b": true}, want: nil},
			{at: 11, want: []string{"set-ready ns/a"}},
		},
	}, {
		name: "a deletion after a Ready write is finished at once, not after the reconcile period",
		steps: []step{
			{at: 0, sync: full(pod("a", "Running", cond("Ready", "False", at(-50))), pod("b", "Running", cond("Ready", "False", at(-50)))), want: []string{"set-ready ns/a", "set-ready ns/b"}},
			// a: acked before its deletion is seen; b: deletion seen while its write is in flight.
			{at: 0.1, ack: map[string]bool{"ns/a": true}, want: nil},
			{at: 0.2, sync: changed(terminating(pod("a", "Running", cond("Ready", "True", at(-50)))), terminating(pod("b", "Running", cond("Ready", "False", at(-50))))),
				want: []string{"finish-deletion ns/a"}},
			{at: 0.3, ack: map[string]bool{"ns/b": true}, want: []string{"finish-deletion ns/b"}},
			// A finished deletion acked while the pod is still listed waits the period.
			{at: 0.4, ack: map[string]bool{"ns/a": true, "ns/b": false}, want: nil},
			{at: 1.4, want: []string{"finish-deletion ns/b"}},
			{at: 10.3, want: nil},
			{at: 10.4, want: []string{"finish-deletion ns/a"}},
		},
	}, {
		name:   "static pod without a mirror pod: create it",
		static: []*podv1.Pod{static},
		steps:  []step{{at: 0, sync: full(), want: []string{"create-mirror kube-system/etcd-n1"}}},
		check: func(t *testing.T, acts []Action) {
			m := acts[0].Request.GetMirrorPod().GetPod()
			md := m.GetMetadata()
			if md.GetAnnotations()[validation.MirrorPodAnnotation] != Hash(static) || md.GetLabels()["tier"] != "control-plane" {
				t.Fatalf("metadata = %v", md)
			}
			o := md.GetOwnerReferences()
			if len(o) != 1 || o[0].GetKind() != "Node" || o[0].GetName() != node || o[0].GetUid() != nodeUID || !o[0].GetController() {
				t.Fatalf("owner = %v, want the node as controller", o)
			}
			tol := m.GetSpec().GetTolerations()
			if m.GetSpec().GetNodeName() != node || len(tol) != 1 || tol[0].GetOperator() != "Exists" || tol[0].GetEffect() != "NoExecute" || tol[0].GetKey() != "" {
				t.Fatalf("spec = %v, want bound with the all-NoExecute toleration", m.GetSpec())
			}
		},
	}, {
		name:   "current mirror pod: nothing",
		static: []*podv1.Pod{static},
		steps:  []step{{at: 0, sync: full(storedMirror(nil)), want: nil}},
	}, {
		name:   "mirror pod terminating: replace it",
		static: []*podv1.Pod{static},
		steps:  []step{{at: 0, sync: full(storedMirror(func(p *podv1.Pod) { p.Metadata.DeletionTimestamp = nodemodel.Timestamp(at(-1)) })), want: []string{"create-mirror kube-system/etcd-n1"}}},
	}, {
		name:   "mirror pod of another version or node object: replace it",
		static: []*podv1.Pod{static},
		steps: []step{{at: 0, sync: full(
			storedMirror(func(p *podv1.Pod) { p.Metadata.OwnerReferences[0].Uid = "old-node-uid" }),
		), want: []string{"create-mirror kube-system/etcd-n1"}}},
	}, {
		name:   "mirror pod deleted through the API: recreated at once",
		static: []*podv1.Pod{static},
		steps: []step{
			{at: 0, sync: full(storedMirror(nil)), want: nil},
			{at: 3, sync: &collectorv1.PodSync{Deleted: []*collectorv1.PodRef{{Namespace: "kube-system", Name: "etcd-n1", Uid: "mirror-uid"}}}, want: []string{"create-mirror kube-system/etcd-n1"}},
		},
	}, {
		name:  "mirror pod whose static pod is gone: delete it",
		steps: []step{{at: 0, sync: full(storedMirror(nil)), want: []string{"delete-mirror kube-system/etcd-n1"}}},
	}, {
		name:   "mirror pod marked not ready: Ready=True again",
		static: []*podv1.Pod{static},
		steps: []step{
			{at: 0, sync: full(storedMirror(nil)), want: nil},
			{at: 9, sync: changed(storedMirror(func(p *podv1.Pod) { p.Status.Conditions[0] = cond("Ready", "False", at(8)) })), want: []string{"set-ready kube-system/etcd-n1"}},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Config{Node: node, StaticPods: tc.static})
			a.Reset(nodeUID)
			for i, s := range tc.steps {
				if s.sync != nil {
					a.Sync(s.sync)
				}
				for _, k := range slices.Sorted(maps.Keys(s.ack)) {
					a.Done(k, s.ack[k], at(s.at))
				}
				acts := a.Decide(at(s.at))
				var got []string
				for _, x := range acts {
					got = append(got, x.Kind.String()+" "+x.Key)
				}
				if !slices.Equal(got, s.want) {
					t.Fatalf("step %d (t=%gs): decided %v, want %v", i, s.at, got, s.want)
				}
				if i == 0 && tc.check != nil {
					tc.check(t, acts)
				}
				if i == len(tc.steps)-1 && tc.last != nil {
					tc.last(t, acts)
				}
			}
		})
	}
}

func TestNextWake(t *testing.T) {
	a := New(Config{Node: node})
	a.Reset(nodeUID)
	if _, ok := a.NextWake(); ok {
		t.Fatal("a wake with nothing to wait for")
	}
	a.Sync(full(pod("a", "Running", cond("Ready", "False", at(-1)))))
	a.Decide(at(0))
	a.Done("ns/a", true, at(1))
	if w, ok := a.NextWake(); !ok || !w.Equal(at(11)) {
		t.Fatalf("wake = %v %v, want %s", w, ok, at(11))
	}
	// A new stream forgets what was in flight and the waits.
	a.Reset("node-uid-2")
	if _, ok := a.NextWake(); ok {
		t.Fatal("waits survived a new stream")
	}
}

func TestLoadStatic(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("etcd.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels: {tier: control-plane}
spec:
  hostNetwork: true
  containers: [{name: etcd, image: etcd}]
  tolerations:
  - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
`)
	write("proxy.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"proxy"},"spec":{"containers":[{"name":"p"}]}}`)
	write(".hidden.yaml", "not: [valid")
	write("README", "ignored")
	ps, err := LoadStatic(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("loaded %d static pods, want 2", len(ps))
	}
	etcd, proxy := ps[0], ps[1]
	if Key(etcd) != "kube-system/etcd" || !etcd.GetSpec().GetHostNetwork() || len(etcd.GetSpec().GetTolerations()) != 1 {
		t.Fatalf("etcd = %v", etcd)
	}
	if Key(proxy) != "default/proxy" {
		t.Fatalf("proxy = %s, want the default namespace", Key(proxy))
	}
	m := MirrorOf(etcd, node, nodeUID)
	if m.GetMetadata().GetName() != "etcd-n1" || len(m.GetSpec().GetTolerations()) != 2 {
		t.Fatalf("mirror = %v", m)
	}
	if l := validation.MirrorPod(&collectorv1.MirrorPod{Pod: m}, t0, validation.DefaultLimits()); len(l) > 0 {
		t.Fatalf("a mirror pod the collector refuses: %v", l)
	}
	// The hash follows the manifest.
	e2 := proto.CloneOf(etcd)
	e2.Metadata.Labels["tier"] = "x"
	if Hash(e2) == Hash(etcd) {
		t.Fatal("hash ignores a label change")
	}
	write("bad.yaml", "metadata: {name: Not_A_Name}")
	if _, err := LoadStatic(dir); err == nil {
		t.Fatal("an invalid manifest was loaded")
	}
}

func TestInFlightIsBounded(t *testing.T) {
	a := New(Config{Node: node})
	a.Reset(nodeUID)
	var ps []*podv1.Pod
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		ps = append(ps, terminating(pod(n, "Running")))
	}
	a.Sync(full(ps...))
	if got := len(a.Decide(at(0))); got != MaxInFlight {
		t.Fatalf("decided %d writes, want %d in flight at most", got, MaxInFlight)
	}
	a.Done("ns/a", true, at(0.1))
	if acts := a.Decide(at(0.1)); len(acts) != 1 || acts[0].Key != "ns/i" {
		t.Fatalf("after one ack decided %v, want ns/i", acts)
	}
}
