// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// sessionTTL is long enough that no session of the suite expires by itself
// on a slow machine; expiry is tested through SessionExpirer.
const sessionTTL = 20 * time.Second

func newSession(t *testing.T, s nodestore.Store) nodestore.Session {
	t.Helper()
	sess, err := s.NewSession(ctx(t), sessionTTL)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	return sess
}

func isGone(t *testing.T, s nodestore.Store, k nodestore.Kind, name string) func() bool {
	return func() bool {
		_, err := s.Get(ctx(t), k, name)
		if err != nil && !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("get %s/%s: %v", k, name, err)
		}
		return err != nil
	}
}

func testTTL(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := s.Watch(c, currentRev(t, s))
	ev := &nodev1.Event{Reason: "NodeNotReady"}
	// Different TTLs in one Apply: each object keeps its own.
	rev := apply(t, s, nil,
		nodestore.Op{Kind: nodestore.Events, Name: "default/short", Value: ev, TTL: ShortTTL},
		nodestore.Op{Kind: nodestore.Events, Name: "default/long", Value: ev, TTL: time.Hour},
		nodestore.Put(nodestore.Events, "default/none", ev),
	)
	wantEvents(t, collect(t, ch, 3),
		put(nodestore.Events, "default/short", rev),
		put(nodestore.Events, "default/long", rev),
		put(nodestore.Events, "default/none", rev),
	)
	eventually(t, "object with a short TTL expires", isGone(t, s, nodestore.Events, "default/short"))
	// Expiry is a delete like any other for watchers.
	wantEvents(t, collect(t, ch, 1), del(nodestore.Events, "default/short", 0))
	wantValue(t, mustGet(t, s, nodestore.Events, "default/long"), ev)
	wantValue(t, mustGet(t, s, nodestore.Events, "default/none"), ev)

	// Rewriting an object without a TTL makes it permanent.
	apply(t, s, nil, nodestore.Op{Kind: nodestore.Events, Name: "default/rewritten", Value: ev, TTL: ShortTTL})
	apply(t, s, nil, nodestore.Put(nodestore.Events, "default/rewritten", ev))
	apply(t, s, nil, nodestore.Op{Kind: nodestore.Events, Name: "default/marker", Value: ev, TTL: ShortTTL})
	eventually(t, "marker with a short TTL expires", isGone(t, s, nodestore.Events, "default/marker"))
	mustGet(t, s, nodestore.Events, "default/rewritten")
}

func collector(id string) *collectorv1.CollectorInfo {
	return &collectorv1.CollectorInfo{Id: id, FeedAddress: id + ":9000"}
}

func testSessionClose(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := s.Watch(c, currentRev(t, s))
	sess := newSession(t, s)
	for _, id := range []string{"c1", "c2"} {
		if err := sess.Put(c, nodestore.Collectors, id, collector(id)); err != nil {
			t.Fatalf("session put %s: %v", id, err)
		}
	}
	// Re-putting through the session keeps the object bound to it.
	if err := sess.Put(c, nodestore.Collectors, "c1", collector("c1")); err != nil {
		t.Fatalf("session put c1 again: %v", err)
	}
	apply(t, s, nil, nodestore.Put(nodestore.Collectors, "static", collector("static")))
	wantEvents(t, collect(t, ch, 4),
		put(nodestore.Collectors, "c1", 0),
		put(nodestore.Collectors, "c2", 0),
		put(nodestore.Collectors, "c1", 0),
		put(nodestore.Collectors, "static", 0),
	)
	wantValue(t, mustGet(t, s, nodestore.Collectors, "c1"), collector("c1"))
	select {
	case <-sess.Done():
		t.Fatal("session done before Close")
	default:
	}

	if err := sess.Close(); err != nil {
		t.Fatalf("close session: %v", err)
	}
	// Close deletes the session's objects before it returns, in one
	// revision.
	mustNotFound(t, s, nodestore.Collectors, "c1")
	mustNotFound(t, s, nodestore.Collectors, "c2")
	mustGet(t, s, nodestore.Collectors, "static")
	got := collect(t, ch, 2)
	wantEvents(t, got, del(nodestore.Collectors, "c1", 0), del(nodestore.Collectors, "c2", 0))
	if got[0].Object.ModRevision != got[1].Object.ModRevision {
		t.Fatalf("session objects deleted at %d and %d, want one revision", got[0].Object.ModRevision, got[1].Object.ModRevision)
	}
	waitClosed(t, "session Done after Close", sess.Done())
	if err := sess.Put(c, nodestore.Collectors, "c3", collector("c3")); err == nil {
		t.Fatal("put through a closed session succeeded")
	}
	mustNotFound(t, s, nodestore.Collectors, "c3")
}

func expirer(t *testing.T, s nodestore.Store) SessionExpirer {
	t.Helper()
	e, ok := s.(SessionExpirer)
	if !ok {
		t.Skipf("%T has no ExpireSession method (storetest.SessionExpirer)", s)
	}
	return e
}

func testSessionExpiry(t *testing.T, s nodestore.Store) {
	e := expirer(t, s)
	sess := newSession(t, s)
	other := newSession(t, s)
	if err := sess.Put(ctx(t), nodestore.Collectors, "c1", collector("c1")); err != nil {
		t.Fatalf("session put: %v", err)
	}
	if err := other.Put(ctx(t), nodestore.Collectors, "c2", collector("c2")); err != nil {
		t.Fatalf("session put: %v", err)
	}
	if err := e.ExpireSession(ctx(t), sess); err != nil {
		t.Fatalf("expire session: %v", err)
	}
	eventually(t, "object of the expired session goes", isGone(t, s, nodestore.Collectors, "c1"))
	waitClosed(t, "Done of the expired session", sess.Done())
	// Other sessions are untouched.
	mustGet(t, s, nodestore.Collectors, "c2")
	select {
	case <-other.Done():
		t.Fatal("an unrelated session ended")
	default:
	}
}

type campaignResult struct {
	l   nodestore.Leadership
	err error
}

func campaign(c context.Context, s nodestore.Store, sess nodestore.Session, name, id string) <-chan campaignResult {
	res := make(chan campaignResult, 1)
	go func() {
		l, err := s.Campaign(c, sess, name, id)
		res <- campaignResult{l, err}
	}()
	return res
}

func wantLeader(t *testing.T, s nodestore.Store, name, want string) {
	t.Helper()
	got, err := s.Leader(ctx(t), name)
	if want == "" {
		if !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("leader of %s = %q, %v; want none (ErrNotFound)", name, got, err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("leader of %s = %q, %v; want %q", name, got, err, want)
	}
}

func mustCampaign(t *testing.T, s nodestore.Store, sess nodestore.Session, name, id string) nodestore.Leadership {
	t.Helper()
	select {
	case r := <-campaign(ctx(t), s, sess, name, id):
		if r.err != nil {
			t.Fatalf("campaign %s as %s: %v", name, id, r.err)
		}
		return r.l
	case <-time.After(Deadline):
		t.Fatalf("campaign %s as %s: not elected within %v", name, id, Deadline)
	}
	panic("unreachable")
}

func testElectionHandover(t *testing.T, s nodestore.Store) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	wantLeader(t, s, "monitor", "")
	// Election keys live beside the objects but are not objects: watchers
	// must not see them.
	ch := s.Watch(c, currentRev(t, s))

	sa, sb := newSession(t, s), newSession(t, s)
	la := mustCampaign(t, s, sa, "monitor", "a")
	wantLeader(t, s, "monitor", "a")
	wantLeader(t, s, "other-election", "")
	fa := la.Fence()
	r1 := apply(t, s, &fa, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))

	resB := campaign(c, s, sb, "monitor", "b")
	// b waits while a leads. (This can only miss a bug, never fail a
	// correct store: b may simply not have started yet.)
	select {
	case r := <-resB:
		t.Fatalf("b elected while a leads: %v", r.err)
	default:
	}
	wantLeader(t, s, "monitor", "a")

	// A fenced write with a failing precondition is a conflict while the
	// fence holds.
	_, err := s.Apply(c, &fa, nodestore.Op{Kind: nodestore.Health, Name: "n1", Value: &nodev1.NodeHealth{}, IfAbsent: true})
	wantErr(t, "fenced write with a failing precondition", err, nodestore.ErrConflict)

	if err := la.Resign(c); err != nil {
		t.Fatalf("resign: %v", err)
	}
	waitClosed(t, "leadership Done after Resign", la.Done())
	var lb nodestore.Leadership
	select {
	case r := <-resB:
		if r.err != nil {
			t.Fatalf("campaign b: %v", r.err)
		}
		lb = r.l
	case <-time.After(Deadline):
		t.Fatalf("b not elected within %v of a resigning", Deadline)
	}
	wantLeader(t, s, "monitor", "b")
	fb := lb.Fence()
	if fb == fa {
		t.Fatalf("new leader has the old fence %+v", fb)
	}

	// The deposed leader is fenced, whatever else its write asks for.
	_, err = s.Apply(c, &fa, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wantErr(t, "write with the resigned leader's fence", err, nodestore.ErrFenced)
	_, err = s.Apply(c, &fa, nodestore.Op{Kind: nodestore.Health, Name: "n1", Value: &nodev1.NodeHealth{}, IfModRevision: r1 + 1<<40})
	wantErr(t, "fenced-out write with a failing precondition", err, nodestore.ErrFenced)
	_, err = s.Apply(c, &nodestore.Fence{Key: fb.Key, Revision: fb.Revision + 1<<40}, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wantErr(t, "write with a wrong fence revision", err, nodestore.ErrFenced)
	if o := mustGet(t, s, nodestore.Health, "n1"); o.ModRevision != r1 {
		t.Fatalf("fenced writes changed health/n1: mod=%d, want %d", o.ModRevision, r1)
	}
	r2 := apply(t, s, &fb, nodestore.Op{Kind: nodestore.Health, Name: "n1", Value: &nodev1.NodeHealth{}, IfModRevision: r1})

	// The leader's session ending ends the leadership.
	if err := sb.Close(); err != nil {
		t.Fatalf("close b's session: %v", err)
	}
	waitClosed(t, "leadership Done after its session closed", lb.Done())
	_, err = s.Apply(c, &fb, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wantErr(t, "write with the fence of a closed session", err, nodestore.ErrFenced)
	wantLeader(t, s, "monitor", "")

	wantEvents(t, collect(t, ch, 2), put(nodestore.Health, "n1", r1), put(nodestore.Health, "n1", r2))
	noMoreEvents(t, s, ch)
}

func testElectionCancelled(t *testing.T, s nodestore.Store) {
	sa, sc := newSession(t, s), newSession(t, s)
	la := mustCampaign(t, s, sa, "monitor", "a")

	// Cancel c's campaign once it is queued: its candidate key is a
	// write, so the store revision moving shows it is in.
	before := currentRev(t, s)
	cctx, ccancel := context.WithCancel(ctx(t))
	defer ccancel()
	resC := campaign(cctx, s, sc, "monitor", "c")
	eventually(t, "c's candidacy is written", func() bool { return currentRev(t, s) > before })
	ccancel()
	select {
	case r := <-resC:
		if r.err == nil {
			t.Fatal("cancelled campaign was elected while a leads")
		}
	case <-time.After(Deadline):
		t.Fatalf("cancelled campaign did not return within %v", Deadline)
	}

	// c withdrew: when a resigns there is nobody left.
	if err := la.Resign(ctx(t)); err != nil {
		t.Fatalf("resign: %v", err)
	}
	wantLeader(t, s, "monitor", "")

	// Resigning twice is harmless, and a session can campaign again.
	if err := la.Resign(ctx(t)); err != nil {
		t.Fatalf("second resign: %v", err)
	}
	la2 := mustCampaign(t, s, sa, "monitor", "a2")
	wantLeader(t, s, "monitor", "a2")
	f := la2.Fence()
	apply(t, s, &f, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
}

func testElectionSessionExpiry(t *testing.T, s nodestore.Store) {
	e := expirer(t, s)
	sa, sb := newSession(t, s), newSession(t, s)
	la := mustCampaign(t, s, sa, "monitor", "a")
	fa := la.Fence()
	resB := campaign(ctx(t), s, sb, "monitor", "b")

	if err := e.ExpireSession(ctx(t), sa); err != nil {
		t.Fatalf("expire session: %v", err)
	}
	waitClosed(t, "leadership Done after its session expired", la.Done())
	_, err := s.Apply(ctx(t), &fa, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wantErr(t, "write with the fence of an expired session", err, nodestore.ErrFenced)

	// The waiting candidate takes over.
	select {
	case r := <-resB:
		if r.err != nil {
			t.Fatalf("campaign b: %v", r.err)
		}
		f := r.l.Fence()
		apply(t, s, &f, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	case <-time.After(Deadline):
		t.Fatalf("b not elected within %v of a's session expiring", Deadline)
	}
	wantLeader(t, s, "monitor", "b")
}

func testFence(t *testing.T, s nodestore.Store) {
	c := ctx(t)
	// A fence on a key that does not exist never holds.
	bogus := nodestore.Fence{Key: "/no/such/leader/key", Revision: 5}
	_, err := s.Apply(c, &bogus, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wantErr(t, "write with a fence on a missing key", err, nodestore.ErrFenced)
	mustNotFound(t, s, nodestore.Health, "n1")

	sess := newSession(t, s)
	l := mustCampaign(t, s, sess, "fence", "a")
	f := l.Fence()
	if f.Key == "" || f.Revision <= 0 {
		t.Fatalf("fence %+v: want a key and a positive revision", f)
	}
	r1 := apply(t, s, &f, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wrong := nodestore.Fence{Key: f.Key, Revision: f.Revision + 1<<40}
	_, err = s.Apply(c, &wrong, nodestore.Put(nodestore.Health, "n1", &nodev1.NodeHealth{}))
	wantErr(t, "write with a wrong fence revision", err, nodestore.ErrFenced)
	// The fence is checked with the preconditions, atomically: a failing
	// precondition under a holding fence is a conflict, and a failing fence
	// wins over a failing precondition.
	stale := nodestore.Op{Kind: nodestore.Health, Name: "n1", Value: &nodev1.NodeHealth{}, IfModRevision: r1 + 1<<40}
	_, err = s.Apply(c, &f, stale)
	wantErr(t, "fenced write with a stale revision", err, nodestore.ErrConflict)
	_, err = s.Apply(c, &wrong, stale)
	wantErr(t, "wrongly fenced write with a stale revision", err, nodestore.ErrFenced)
	if o := mustGet(t, s, nodestore.Health, "n1"); o.ModRevision != r1 {
		t.Fatalf("rejected writes changed health/n1: mod=%d, want %d", o.ModRevision, r1)
	}
	// Fenced writes are ordinary writes otherwise: chunked, several kinds.
	ops := []nodestore.Op{
		nodestore.Put(nodestore.Health, "n2", &nodev1.NodeHealth{}),
		nodestore.Delete(nodestore.Health, "n1"),
	}
	if n, err := nodestore.ApplyChunked(c, s, &f, ops); err != nil || n != len(ops) {
		t.Fatalf("fenced chunked apply = %d, %v", n, err)
	}
	mustNotFound(t, s, nodestore.Health, "n1")
}
