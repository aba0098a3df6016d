// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

func (e *env) apply(t *testing.T, ops ...nodestore.Op) {
	t.Helper()
	if _, err := e.store.Apply(context.Background(), nil, ops...); err != nil {
		t.Fatal(err)
	}
	want := e.store.Revision()
	for e.cache.Revision() < want {
		time.Sleep(time.Millisecond)
	}
}

func storedLease(name string, renew time.Time) nodestore.Op {
	return nodestore.Put(nodestore.Leases, name, &nodev1.Lease{Metadata: &nodev1.ObjectMeta{Name: name},
		Spec: &nodev1.LeaseSpec{HolderIdentity: name, LeaseDurationSeconds: 40, RenewTime: nodemodel.Timestamp(renew)}})
}

type rawEvent struct {
	Type   string
	Object json.RawMessage
}

// watchStream opens a watch and returns a reader of its events.
func (e *env) watchStream(t *testing.T, path, accept string) func() rawEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("watch %s: %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	return func() rawEvent {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("watch %s ended: %v", path, sc.Err())
		}
		return decode[rawEvent](t, sc.Bytes())
	}
}

// skipBookmarks reads the next event that is not a bookmark.
func skipBookmarks(next func() rawEvent) rawEvent {
	for {
		if ev := next(); ev.Type != "BOOKMARK" {
			return ev
		}
	}
}

func TestWatchLeases(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil, "True")
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	e.apply(t, storedLease("a", t0))

	// kubectl get leases -n kube-node-lease -w: a Table per event.
	table := e.watchStream(t, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=1&allowWatchBookmarks=true", tableAccept)
	ev := table()
	tb := decode[metav1.Table](t, ev.Object)
	if ev.Type != "ADDED" || len(tb.Rows) != 1 || tb.Rows[0].Cells[0] != "a" || tb.Rows[0].Cells[1] != "a" || len(tb.ColumnDefinitions) == 0 {
		t.Fatalf("first table event %s %s", ev.Type, ev.Object)
	}
	// A client resuming from a list's version sees only what changes.
	_, b := e.do(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "application/json", "", "")
	l := decode[coordinationv1.LeaseList](t, b)
	if len(l.Items) != 1 || l.ResourceVersion == "" {
		t.Fatalf("lease list %s", b)
	}
	resumed := e.watchStream(t, "/apis/coordination.k8s.io/v1/leases?watch=true&resourceVersion="+l.ResourceVersion, "application/json")

	e.apply(t, storedLease("a", t0.Add(10*time.Second)))
	if ev := skipBookmarks(table); ev.Type != "MODIFIED" || decode[metav1.Table](t, ev.Object).Rows[0].Cells[0] != "a" {
		t.Fatalf("renewal as a table row: %s %s", ev.Type, ev.Object)
	}
	ev = skipBookmarks(resumed)
	got := decode[coordinationv1.Lease](t, ev.Object)
	if ev.Type != "MODIFIED" || got.Name != "a" || got.Spec.RenewTime == nil || !got.Spec.RenewTime.Time.Equal(t0.Add(10*time.Second)) || got.ResourceVersion == "" {
		t.Fatalf("renewal: %s %s", ev.Type, ev.Object)
	}
	// A new node's lease is ADDED; a lease that goes (its node deleted) is
	// DELETED.
	e.put(t, "b", nil, "True")
	e.apply(t, storedLease("b", t0))
	if ev := skipBookmarks(resumed); ev.Type != "ADDED" || decode[coordinationv1.Lease](t, ev.Object).Name != "b" {
		t.Fatalf("new lease: %s %s", ev.Type, ev.Object)
	}
	e.apply(t, nodestore.Delete(nodestore.Leases, "a"), nodestore.Delete(nodestore.Nodes, "a"), nodestore.Delete(nodestore.Statuses, "a"))
	if ev := skipBookmarks(resumed); ev.Type != "DELETED" || decode[coordinationv1.Lease](t, ev.Object).Name != "a" {
		t.Fatalf("lease gone: %s %s", ev.Type, ev.Object)
	}
	// A renewal seen only on a collector's feed (never stored) is a
	// change too: a node that never checkpointed its lease has one now.
	e.put(t, "c", nil, "True")
	e.live.renew("c", t0.Add(20*time.Second))
	if ev := skipBookmarks(resumed); ev.Type != "ADDED" || decode[coordinationv1.Lease](t, ev.Object).Name != "c" {
		t.Fatalf("live lease: %s %s", ev.Type, ev.Object)
	}
	e.live.renew("c", t0.Add(30*time.Second))
	ev = skipBookmarks(resumed)
	if got := decode[coordinationv1.Lease](t, ev.Object); ev.Type != "MODIFIED" || got.Name != "c" || got.Spec.RenewTime == nil || !got.Spec.RenewTime.Time.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("live renewal: %s %s", ev.Type, ev.Object)
	}
	// Bookmarks come when asked for.
	for {
		if ev := table(); ev.Type == "BOOKMARK" {
			if md := decode[coordinationv1.Lease](t, ev.Object); md.ResourceVersion == "" {
				t.Fatalf("bookmark without a version: %s", ev.Object)
			}
			break
		}
	}
}

func TestWatchEvents(t *testing.T) {
	e := start(t, "")
	e.put(t, "a", nil, "True")
	at := time.Now().Truncate(time.Second)
	event := func(name, reason string, count int32) nodestore.Op {
		return nodestore.Put(nodestore.Events, "default/"+name, &nodev1.Event{
			Metadata:       &nodev1.ObjectMeta{Name: name, Namespace: "default"},
			InvolvedObject: &nodev1.ObjectReference{Kind: "Node", Name: "a"},
			Reason:         reason, Message: reason + " happened", Type: "Normal", Source: "nodepulse-monitor",
			FirstTimestamp: nodemodel.Timestamp(at), LastTimestamp: nodemodel.Timestamp(at.Add(time.Duration(count) * time.Second)), Count: count})
	}
	e.apply(t, event("a.1", "NodeReady", 1))

	// kubectl get events -w (all namespaces, as a Table), and a JSON
	// watch with a field selector.
	table := e.watchStream(t, "/api/v1/events?watch=1", tableAccept)
	sel := e.watchStream(t, "/api/v1/namespaces/default/events?watch=true&fieldSelector=reason%3DNodeNotReady", "application/json")
	ev := table()
	if tb := decode[metav1.Table](t, ev.Object); ev.Type != "ADDED" || len(tb.Rows) != 1 || tb.Rows[0].Cells[2] != "NodeReady" {
		t.Fatalf("first event: %s %s", ev.Type, ev.Object)
	}
	e.apply(t, event("a.2", "NodeNotReady", 1))
	ev = table()
	if tb := decode[metav1.Table](t, ev.Object); ev.Type != "ADDED" || tb.Rows[0].Cells[2] != "NodeNotReady" || len(tb.ColumnDefinitions) != 0 {
		t.Fatalf("new event as a table row: %s %s", ev.Type, ev.Object)
	}
	if ev := sel(); ev.Type != "ADDED" || decode[corev1.Event](t, ev.Object).Reason != "NodeNotReady" {
		t.Fatalf("selected event: %s %s", ev.Type, ev.Object)
	}
	// The same event seen again: its count grows.
	e.apply(t, event("a.2", "NodeNotReady", 2))
	ev = sel()
	if got := decode[corev1.Event](t, ev.Object); ev.Type != "MODIFIED" || got.Count != 2 || got.ResourceVersion == "" {
		t.Fatalf("repeated event: %s %s", ev.Type, ev.Object)
	}
	if ev := table(); ev.Type != "MODIFIED" {
		t.Fatalf("repeated event in the table watch: %s %s", ev.Type, ev.Object)
	}
}

func TestListLeasesPages(t *testing.T) {
	e := start(t, "")
	now := time.Now()
	for _, n := range []string{"a", "b", "c", "d"} {
		e.put(t, n, nil, "True")
	}
	// c never renewed: no lease.
	e.apply(t, storedLease("a", now), storedLease("b", now), storedLease("d", now))
	var names []string
	cont := ""
	for range 4 {
		_, b := e.do(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?limit=2&continue="+cont, "application/json", "", "")
		l := decode[coordinationv1.LeaseList](t, b)
		for _, it := range l.Items {
			names = append(names, it.Name)
			if it.CreationTimestamp.IsZero() || *it.Spec.HolderIdentity != it.Name {
				t.Fatalf("lease %+v", it)
			}
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	if got := len(names); got != 3 || names[0] != "a" || names[1] != "b" || names[2] != "d" || cont != "" {
		t.Fatalf("leases over pages: %v (continue %q)", names, cont)
	}
	if code, b := e.do(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?limit=2&continue=%21%21", "application/json", "", ""); code != 410 {
		t.Fatalf("bad continue: %d %s", code, b)
	}
}
