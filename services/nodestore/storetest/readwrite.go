// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

func testGetPutDelete(t *testing.T, s nodestore.Store) {
	mustNotFound(t, s, nodestore.Nodes, "n1")

	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "n1", node("n1", "1")))
	o := mustGet(t, s, nodestore.Nodes, "n1")
	wantValue(t, o, node("n1", "1"))
	if o.Kind != nodestore.Nodes || o.Name != "n1" || o.CreateRevision != r1 || o.ModRevision != r1 {
		t.Fatalf("after create at %d: got %s/%s create=%d mod=%d", r1, o.Kind, o.Name, o.CreateRevision, o.ModRevision)
	}

	// An update moves ModRevision and keeps CreateRevision: that is what
	// IfModRevision and fences compare.
	r2 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "n1", node("n1", "2")))
	if r2 <= r1 {
		t.Fatalf("revision went from %d to %d", r1, r2)
	}
	o = mustGet(t, s, nodestore.Nodes, "n1")
	wantValue(t, o, node("n1", "2"))
	if o.CreateRevision != r1 || o.ModRevision != r2 {
		t.Fatalf("after update at %d: create=%d mod=%d, want %d/%d", r2, o.CreateRevision, o.ModRevision, r1, r2)
	}

	// The store keeps its own copy: changing the message after the write
	// (or after the read) changes nothing stored.
	v := node("n1", "3")
	apply(t, s, nil, nodestore.Put(nodestore.Nodes, "n1", v))
	v.Metadata.Labels["version"] = "mutated"
	o.Value.(*nodev1.Node).Metadata.Labels["version"] = "mutated too"
	wantValue(t, mustGet(t, s, nodestore.Nodes, "n1"), node("n1", "3"))

	apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "n1"))
	mustNotFound(t, s, nodestore.Nodes, "n1")

	// A new object under an old name is a new object: new CreateRevision.
	r4 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "n1", node("n1", "4")))
	if o := mustGet(t, s, nodestore.Nodes, "n1"); o.CreateRevision != r4 {
		t.Fatalf("recreated at %d: create=%d", r4, o.CreateRevision)
	}

	// Deleting what does not exist is not an error (deletes are
	// idempotent, so a retried cleanup is safe).
	if _, err := s.Apply(ctx(t), nil, nodestore.Delete(nodestore.Nodes, "never")); err != nil {
		t.Fatalf("delete of a missing object: %v", err)
	}

	// Names of namespaced kinds contain a slash.
	pod := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: "web-0", Namespace: "prod"}}
	apply(t, s, nil, nodestore.Put(nodestore.Pods, "prod/web-0", pod))
	o = mustGet(t, s, nodestore.Pods, "prod/web-0")
	wantValue(t, o, pod)
	if o.Kind != nodestore.Pods || o.Name != "prod/web-0" {
		t.Fatalf("pod read back as %s/%s", o.Kind, o.Name)
	}
}

func testKindsAreSeparate(t *testing.T, s nodestore.Store) {
	status := &nodev1.NodeStatus{Capacity: map[string]string{"cpu": "4"}}
	lease := &nodev1.Lease{}
	apply(t, s, nil,
		nodestore.Put(nodestore.Nodes, "n1", node("n1", "1")),
		nodestore.Put(nodestore.Statuses, "n1", status),
		nodestore.Put(nodestore.Leases, "n1", lease),
	)
	wantValue(t, mustGet(t, s, nodestore.Statuses, "n1"), status)
	wantValue(t, mustGet(t, s, nodestore.Leases, "n1"), lease)
	apply(t, s, nil, nodestore.Delete(nodestore.Statuses, "n1"))
	mustNotFound(t, s, nodestore.Statuses, "n1")
	wantValue(t, mustGet(t, s, nodestore.Nodes, "n1"), node("n1", "1"))
	mustNotFound(t, s, nodestore.Health, "n1")

	for _, k := range nodestore.Kinds {
		objs, _, err := s.List(ctx(t), k, nodestore.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", k, err)
		}
		for _, o := range objs {
			if o.Kind != k {
				t.Fatalf("list %s returned a %s", k, o.Kind)
			}
		}
		want := map[nodestore.Kind]int{nodestore.Nodes: 1, nodestore.Leases: 1}[k]
		if len(objs) != want {
			t.Fatalf("list %s: %d objects, want %d", k, len(objs), want)
		}
	}
}

func names(objs []nodestore.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Name
	}
	return out
}

func testListSorted(t *testing.T, s nodestore.Store) {
	objs, rev0, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{})
	if err != nil || len(objs) != 0 || rev0 <= 0 {
		t.Fatalf("list of an empty kind = %v, %d, %v; want nothing at a positive revision", names(objs), rev0, err)
	}
	last := apply(t, s, nil,
		nodestore.Put(nodestore.Nodes, "b", node("b", "1")),
		nodestore.Put(nodestore.Nodes, "a", node("a", "1")),
		nodestore.Put(nodestore.Nodes, "c-2", node("c-2", "1")),
		nodestore.Put(nodestore.Nodes, "c-10", node("c-10", "1")),
		nodestore.Put(nodestore.Pods, "ns1/p", &podv1.Pod{}),
		nodestore.Put(nodestore.Pods, "ns0/q", &podv1.Pod{}),
		nodestore.Put(nodestore.Pods, "ns0/p", &podv1.Pod{}),
	)
	objs, rev, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	// Byte order of names, as etcd sorts keys: "c-10" before "c-2".
	if got, want := names(objs), []string{"a", "b", "c-10", "c-2"}; !slices.Equal(got, want) {
		t.Fatalf("list nodes = %v, want %v", got, want)
	}
	if rev < last {
		t.Fatalf("list revision %d is before the last write %d", rev, last)
	}
	for _, o := range objs {
		wantValue(t, o, node(o.Name, "1"))
		if o.CreateRevision != last || o.ModRevision != last {
			t.Fatalf("%s: create=%d mod=%d, want %d", o.Name, o.CreateRevision, o.ModRevision, last)
		}
	}
	objs, _, err = s.List(ctx(t), nodestore.Pods, nodestore.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if got, want := names(objs), []string{"ns0/p", "ns0/q", "ns1/p"}; !slices.Equal(got, want) {
		t.Fatalf("list pods = %v, want %v", got, want)
	}
}

func testListAtRevision(t *testing.T, s nodestore.Store) {
	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "1")))
	r2 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "b", node("b", "1")))
	r3 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "a", node("a", "2")))
	r4 := apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "b"))

	type want struct {
		name, version string
		mod           int64
	}
	check := func(at int64, wants ...want) {
		t.Helper()
		objs, rev, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{Revision: at})
		if err != nil {
			t.Fatalf("list at %d: %v", at, err)
		}
		if rev != at {
			t.Fatalf("list at %d answered for revision %d", at, rev)
		}
		if len(objs) != len(wants) {
			t.Fatalf("list at %d = %v, want %d objects", at, names(objs), len(wants))
		}
		for i, w := range wants {
			wantValue(t, objs[i], node(w.name, w.version))
			if objs[i].ModRevision != w.mod {
				t.Fatalf("list at %d: %s mod=%d, want %d", at, w.name, objs[i].ModRevision, w.mod)
			}
		}
	}
	check(r1, want{"a", "1", r1})
	check(r2, want{"a", "1", r1}, want{"b", "1", r2})
	check(r3, want{"a", "2", r3}, want{"b", "1", r2})
	check(r4, want{"a", "2", r3})

	// Listing several kinds at the revision of the first list is one
	// consistent snapshot: later writes do not show.
	_, snap, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, nil, nodestore.Put(nodestore.Statuses, "a", &nodev1.NodeStatus{}))
	objs, rev, err := s.List(ctx(t), nodestore.Statuses, nodestore.ListOptions{Revision: snap})
	if err != nil || rev != snap || len(objs) != 0 {
		t.Fatalf("list statuses at %d = %v, %d, %v; want nothing at %d", snap, names(objs), rev, err, snap)
	}

	// A revision that does not exist yet is an error, and not ErrCompacted
	// (which would make a caller relist in a loop).
	future := r4 + 1<<40
	_, _, err = s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{Revision: future})
	if err == nil || errors.Is(err, nodestore.ErrCompacted) {
		t.Fatalf("list at future revision %d: err = %v, want a non-compaction error", future, err)
	}
}

func testListMany(t *testing.T, s nodestore.Store) {
	// More objects than one Apply takes, so ApplyChunked has to split, and
	// (with a small page size configured by the backend's harness) more
	// than one page of List.
	n := 2*s.MaxOps() + 3
	ops := make([]nodestore.Op, n)
	want := make([]string, n)
	for i := range ops {
		name := fmt.Sprintf("node-%04d", i)
		ops[i] = nodestore.Put(nodestore.Nodes, name, node(name, "1"))
		want[i] = name
	}
	done, err := nodestore.ApplyChunked(ctx(t), s, nil, ops)
	if err != nil || done != n {
		t.Fatalf("apply chunked = %d, %v; want %d, nil", done, err, n)
	}
	objs, rev, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if got := names(objs); !slices.Equal(got, want) {
		t.Fatalf("list returned %d objects, want %d in name order", len(got), n)
	}
	// The paged list is still one revision: a write after it does not
	// change a re-list at that revision.
	apply(t, s, nil, nodestore.Delete(nodestore.Nodes, "node-0000"))
	objs, _, err = s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{Revision: rev})
	if err != nil || len(objs) != n {
		t.Fatalf("re-list at %d: %d objects, %v; want %d", rev, len(objs), err, n)
	}
}

func testApplyPreconditions(t *testing.T, s nodestore.Store) {
	c := ctx(t)
	// IfAbsent creates once.
	r1 := apply(t, s, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", Value: node("n1", "1"), IfAbsent: true})
	_, err := s.Apply(c, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", Value: node("n1", "x"), IfAbsent: true})
	wantErr(t, "second create", err, nodestore.ErrConflict)
	wantValue(t, mustGet(t, s, nodestore.Nodes, "n1"), node("n1", "1"))

	// IfModRevision is compare-and-swap.
	r2 := apply(t, s, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", Value: node("n1", "2"), IfModRevision: r1})
	_, err = s.Apply(c, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", Value: node("n1", "x"), IfModRevision: r1})
	wantErr(t, "update with a stale revision", err, nodestore.ErrConflict)
	wantValue(t, mustGet(t, s, nodestore.Nodes, "n1"), node("n1", "2"))

	// A CAS delete with a stale revision deletes nothing.
	_, err = s.Apply(c, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", IfModRevision: r1})
	wantErr(t, "delete with a stale revision", err, nodestore.ErrConflict)
	mustGet(t, s, nodestore.Nodes, "n1")
	apply(t, s, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", IfModRevision: r2})
	mustNotFound(t, s, nodestore.Nodes, "n1")

	// IfModRevision on a missing object fails: it must exist.
	_, err = s.Apply(c, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", Value: node("n1", "x"), IfModRevision: r2})
	wantErr(t, "update of a missing object", err, nodestore.ErrConflict)
	mustNotFound(t, s, nodestore.Nodes, "n1")

	// After a delete, IfAbsent succeeds again.
	apply(t, s, nil, nodestore.Op{Kind: nodestore.Nodes, Name: "n1", Value: node("n1", "3"), IfAbsent: true})
}

func testApplyAtomic(t *testing.T, s nodestore.Store) {
	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "exists", node("exists", "1")))
	// One failing precondition fails every op.
	_, err := s.Apply(ctx(t), nil,
		nodestore.Put(nodestore.Nodes, "new", node("new", "1")),
		nodestore.Delete(nodestore.Statuses, "exists"),
		nodestore.Op{Kind: nodestore.Nodes, Name: "exists", Value: node("exists", "2"), IfAbsent: true},
	)
	wantErr(t, "apply with one failing precondition", err, nodestore.ErrConflict)
	mustNotFound(t, s, nodestore.Nodes, "new")
	if o := mustGet(t, s, nodestore.Nodes, "exists"); o.ModRevision != r1 {
		t.Fatalf("failed apply modified an object: mod=%d, want %d", o.ModRevision, r1)
	}

	// Every op of a successful Apply commits at the one returned revision.
	rev := apply(t, s, nil,
		nodestore.Put(nodestore.Nodes, "new", node("new", "1")),
		nodestore.Put(nodestore.Statuses, "new", &nodev1.NodeStatus{}),
		nodestore.Op{Kind: nodestore.Nodes, Name: "exists", Value: node("exists", "2"), IfModRevision: r1},
	)
	for _, o := range []nodestore.Object{
		mustGet(t, s, nodestore.Nodes, "new"),
		mustGet(t, s, nodestore.Statuses, "new"),
		mustGet(t, s, nodestore.Nodes, "exists"),
	} {
		if o.ModRevision != rev {
			t.Fatalf("%s/%s mod=%d, want the apply's revision %d", o.Kind, o.Name, o.ModRevision, rev)
		}
	}

	// Empty Apply is a no-op.
	if _, err := s.Apply(ctx(t), nil); err != nil {
		t.Fatalf("empty apply: %v", err)
	}
}

// testApplyChecks: a check (nodestore.Unchanged) makes a write conditional
// on another object's revision without writing that object: the taint
// eviction's delete of a pod, conditional on its node's health record.
func testApplyChecks(t *testing.T, s nodestore.Store) {
	c := ctx(t)
	h1 := apply(t, s, nil, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{NodeName: "n1"}))
	apply(t, s, nil, nodestore.Put(nodestore.Nodes, "p", node("p", "1")))

	// The checked object unchanged: the write commits, the checked one is
	// not written.
	rev := apply(t, s, nil, nodestore.Unchanged(nodestore.Health, "n1", h1), nodestore.Delete(nodestore.Nodes, "p"))
	mustNotFound(t, s, nodestore.Nodes, "p")
	if o := mustGet(t, s, nodestore.Health, "n1"); o.ModRevision != h1 {
		t.Fatalf("checked object written: mod=%d, want %d (apply at %d)", o.ModRevision, h1, rev)
	}

	// The checked object changed since: nothing commits.
	apply(t, s, nil, nodestore.Put(nodestore.Nodes, "p", node("p", "2")))
	h2 := apply(t, s, nil, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{NodeName: "n1", Taints: []*nodev1.Taint{{Key: "k", Effect: "NoExecute"}}}))
	_, err := s.Apply(c, nil, nodestore.Unchanged(nodestore.Health, "n1", h1), nodestore.Delete(nodestore.Nodes, "p"))
	wantErr(t, "delete checked on a stale revision", err, nodestore.ErrConflict)
	mustGet(t, s, nodestore.Nodes, "p")

	// A key may be checked and written in one apply.
	apply(t, s, nil, nodestore.Unchanged(nodestore.Health, "n1", h2), nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{NodeName: "n1"}))

	// Revision 0: the object was absent and must still be.
	apply(t, s, nil, nodestore.Unchanged(nodestore.Health, "n2", 0), nodestore.Put(nodestore.Nodes, "q", node("q", "1")))
	apply(t, s, nil, nodestore.Put(nodestore.Health, "n2", &nodev1.NodeHealth{NodeName: "n2"}))
	_, err = s.Apply(c, nil, nodestore.Unchanged(nodestore.Health, "n2", 0), nodestore.Delete(nodestore.Nodes, "q"))
	wantErr(t, "delete checked on an absent object that appeared", err, nodestore.ErrConflict)
	mustGet(t, s, nodestore.Nodes, "q")

	// Checks compose with the fence: a failed fence is still ErrFenced.
	_, err = s.Apply(c, &nodestore.Fence{Key: "/no/such/leader/key", Revision: 1},
		nodestore.Unchanged(nodestore.Health, "n2", 0), nodestore.Delete(nodestore.Nodes, "q"))
	wantErr(t, "fenced apply with a failing check", err, nodestore.ErrFenced)
}

func testApplyBadInput(t *testing.T, s nodestore.Store) {
	c := ctx(t)
	isPrecondition := func(err error) bool {
		return errors.Is(err, nodestore.ErrConflict) || errors.Is(err, nodestore.ErrFenced)
	}
	// Too many ops: an error, nothing written.
	ops := make([]nodestore.Op, s.MaxOps()+1)
	for i := range ops {
		name := fmt.Sprintf("n%d", i)
		ops[i] = nodestore.Put(nodestore.Nodes, name, node(name, "1"))
	}
	if _, err := s.Apply(c, nil, ops...); err == nil || isPrecondition(err) {
		t.Fatalf("apply of %d ops (max %d): err = %v, want a plain error", len(ops), s.MaxOps(), err)
	}
	mustNotFound(t, s, nodestore.Nodes, "n0")

	// Two ops on one object: etcd rejects such a Txn, so every backend
	// does; it is a caller bug, not a conflict to retry.
	_, err := s.Apply(c, nil,
		nodestore.Put(nodestore.Nodes, "dup", node("dup", "1")),
		nodestore.Put(nodestore.Nodes, "dup", node("dup", "2")))
	if err == nil || isPrecondition(err) {
		t.Fatalf("apply with a duplicate object: err = %v, want a plain error", err)
	}
	mustNotFound(t, s, nodestore.Nodes, "dup")

	// A write that could never be read back (unknown kind, empty name).
	for _, op := range []nodestore.Op{
		nodestore.Put("bogus", "x", node("x", "1")),
		nodestore.Put(nodestore.Nodes, "", node("", "1")),
	} {
		if _, err := s.Apply(c, nil, op); err == nil || isPrecondition(err) {
			t.Fatalf("apply %s: err = %v, want a plain error", describe([]nodestore.Op{op}), err)
		}
	}
}

// testApplyEach: each op is written on its own precondition, all at one
// revision; a failed one reports what is stored and changes nothing.
func testApplyEach(t *testing.T, s nodestore.Store) {
	ea, ok := s.(nodestore.EachApplier)
	if !ok {
		t.Skip("the store has no ApplyEach")
	}
	c := ctx(t)
	r1 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "cas", node("cas", "1")), nodestore.Put(nodestore.Nodes, "taken", node("taken", "1")))
	r2 := apply(t, s, nil, nodestore.Put(nodestore.Nodes, "taken", node("taken", "2")))
	res, rev, err := ea.ApplyEach(c, []nodestore.Op{
		{Kind: nodestore.Nodes, Name: "cas", Value: node("cas", "2"), IfModRevision: r1},       // holds
		{Kind: nodestore.Nodes, Name: "taken", Value: node("taken", "x"), IfModRevision: r1},   // stale
		{Kind: nodestore.Nodes, Name: "new", Value: node("new", "1"), IfAbsent: true},          // holds
		{Kind: nodestore.Nodes, Name: "taken2", Value: node("taken2", "x"), IfModRevision: r2}, // missing
		{Kind: nodestore.Nodes, Name: "plain", Value: node("plain", "1")},                      // unconditional
	})
	if err != nil {
		t.Fatalf("apply each: %v", err)
	}
	if rev <= r2 {
		t.Fatalf("apply each: revision %d, want after %d", rev, r2)
	}
	want := []bool{true, false, true, false, true}
	for i, r := range res {
		if r.Applied != want[i] {
			t.Errorf("op %d: applied %v, want %v", i, r.Applied, want[i])
		}
	}
	if !res[1].Current.Found || res[1].Current.Object.ModRevision != r2 {
		t.Errorf("stale op: current %+v, want the object at revision %d", res[1].Current, r2)
	} else {
		wantValue(t, res[1].Current.Object, node("taken", "2"))
	}
	if res[3].Current.Found {
		t.Errorf("op on a missing object: current %+v, want absent", res[3].Current)
	}
	for _, n := range []string{"cas", "new", "plain"} {
		if o := mustGet(t, s, nodestore.Nodes, n); o.ModRevision != rev {
			t.Errorf("%s: mod revision %d, want the apply's %d", n, o.ModRevision, rev)
		}
	}
	wantValue(t, mustGet(t, s, nodestore.Nodes, "taken"), node("taken", "2"))
	mustNotFound(t, s, nodestore.Nodes, "taken2")

	// Nothing applied: no revision is spent, and the results say why.
	res, rev2, err := ea.ApplyEach(c, []nodestore.Op{{Kind: nodestore.Nodes, Name: "new", Value: node("new", "y"), IfAbsent: true}})
	if err != nil || res[0].Applied || rev2 != rev {
		t.Errorf("a create of an existing object: applied %v, revision %d (want %d), err %v", res[0].Applied, rev2, rev, err)
	}

	// As many ops as the store takes below its limit, one of them stale.
	n := s.MaxOps() - 1
	ops := make([]nodestore.Op, n)
	for i := range ops {
		name := fmt.Sprintf("many-%03d", i)
		ops[i] = nodestore.Op{Kind: nodestore.Nodes, Name: name, Value: node(name, "1"), IfAbsent: true}
	}
	ops[n/2].Name, ops[n/2].Value = "cas", node("cas", "x")
	if res, _, err = ea.ApplyEach(c, ops); err != nil {
		t.Fatalf("apply each of %d ops: %v", n, err)
	}
	if res[n/2].Applied || !res[0].Applied || !res[n-1].Applied {
		t.Errorf("apply each of %d ops: the stale op applied %v, the first %v, the last %v", n, res[n/2].Applied, res[0].Applied, res[n-1].Applied)
	}

	// Bad input is refused before anything is sent.
	for name, bad := range map[string][]nodestore.Op{
		"too many":  make([]nodestore.Op, s.MaxOps()),
		"delete":    {{Kind: nodestore.Nodes, Name: "cas"}},
		"check":     {nodestore.Unchanged(nodestore.Nodes, "cas", rev)},
		"duplicate": {nodestore.Put(nodestore.Nodes, "d", node("d", "1")), nodestore.Put(nodestore.Nodes, "d", node("d", "2"))},
	} {
		if _, _, err := ea.ApplyEach(c, bad); err == nil {
			t.Errorf("%s: apply each accepted it", name)
		}
	}
}
