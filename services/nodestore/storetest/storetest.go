// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package storetest is the conformance suite of nodestore.Store: every
// backend (etcdstore on an embedded etcd, memstore) runs the same Run, so the
// in-memory fake used by unit tests cannot drift from etcd's behaviour.
//
// The suite asserts only what the nodestore contract promises: revisions are
// compared by order, never by exact value, so a backend shared with other
// writers (one etcd for a whole test package, one key prefix per test)
// passes too. Timing-dependent cases (TTL, session expiry) poll with a
// generous deadline instead of sleeping, so a slow machine makes them slower,
// never flaky.
//
// Two behaviours need a hook that is not part of nodestore.Store. A backend
// exposes them by implementing Compactor and SessionExpirer; the cases that
// need a missing hook are skipped, with a message saying so.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Compactor discards a store's history before rev (etcd's compaction). The
// suite uses it to check that List and Watch report ErrCompacted.
type Compactor interface {
	Compact(ctx context.Context, rev int64) error
}

// SessionExpirer ends a session at once, as its TTL running out would after
// its process died. The suite uses it to check that ephemeral objects and
// leadership go with the session.
type SessionExpirer interface {
	ExpireSession(ctx context.Context, s nodestore.Session) error
}

// Deadline bounds every wait of the suite (a watch event, a TTL expiry, a
// campaign). It is a guard against hangs, not a performance assertion: a
// correct backend on a busy machine finishes far sooner.
var Deadline = 30 * time.Second

// ShortTTL is the TTL of objects that a case waits to see expire. etcd
// rounds it up to its minimum lease TTL (about 2s with default settings).
var ShortTTL = time.Second

type testCase struct {
	name string
	fn   func(t *testing.T, s nodestore.Store)
}

var cases = []testCase{
	{"Ping", testPing},
	{"GetPutDelete", testGetPutDelete},
	{"KindsAreSeparate", testKindsAreSeparate},
	{"ListSortedByName", testListSorted},
	{"ListAtRevision", testListAtRevision},
	{"ListManyAndApplyChunked", testListMany},
	{"ApplyPreconditions", testApplyPreconditions},
	{"ApplyIsAtomic", testApplyAtomic},
	{"ApplyChecks", testApplyChecks},
	{"ApplyRejectsBadInput", testApplyBadInput},
	{"ApplyEach", testApplyEach},
	{"Fence", testFence},
	{"TTL", testTTL},
	{"WatchOrder", testWatchOrder},
	{"WatchFromRevision", testWatchFromRevision},
	{"WatchCancel", testWatchCancel},
	{"WatchCompacted", testWatchCompacted},
	{"WatchKind", testWatchKind},
	{"OwnerKinds", testOwnerKinds},
	{"RequestProgress", testRequestProgress},
	{"SessionClose", testSessionClose},
	{"SessionExpiry", testSessionExpiry},
	{"ElectionHandover", testElectionHandover},
	{"ElectionCancelledCandidate", testElectionCancelled},
	{"ElectionSessionExpiry", testElectionSessionExpiry},
}

// Run runs the whole suite, one subtest per behaviour, each on a store from
// newStore, which Run closes when the subtest ends. Subtests run one after
// the other, never in parallel: compaction is global to a backend, and a
// shared etcd must not be compacted under another case's feet.
func Run(t *testing.T, newStore func(t *testing.T) nodestore.Store) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close store: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// ctx bounds a case by Deadline; t.Context ends it before cleanups run, so
// watch goroutines stop before the store closes.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*Deadline)
	t.Cleanup(cancel)
	return c
}

func node(name, version string) *nodev1.Node {
	return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Labels: map[string]string{"version": version}}}
}

func apply(t *testing.T, s nodestore.Store, fence *nodestore.Fence, ops ...nodestore.Op) int64 {
	t.Helper()
	rev, err := s.Apply(ctx(t), fence, ops...)
	if err != nil {
		t.Fatalf("apply %s: %v", describe(ops), err)
	}
	if rev <= 0 {
		t.Fatalf("apply %s: revision %d, want > 0", describe(ops), rev)
	}
	return rev
}

func describe(ops []nodestore.Op) string {
	s := ""
	for i, op := range ops {
		if i > 0 {
			s += ","
		}
		verb := "put"
		if op.Value == nil {
			verb = "delete"
		}
		s += fmt.Sprintf("%s %s/%s", verb, op.Kind, op.Name)
	}
	return "[" + s + "]"
}

// currentRev returns a revision at or after every write so far, without
// writing (a List reads at the latest revision).
func currentRev(t *testing.T, s nodestore.Store) int64 {
	t.Helper()
	_, rev, err := s.List(ctx(t), nodestore.Nodes, nodestore.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return rev
}

func mustGet(t *testing.T, s nodestore.Store, k nodestore.Kind, name string) nodestore.Object {
	t.Helper()
	o, err := s.Get(ctx(t), k, name)
	if err != nil {
		t.Fatalf("get %s/%s: %v", k, name, err)
	}
	return o
}

func mustNotFound(t *testing.T, s nodestore.Store, k nodestore.Kind, name string) {
	t.Helper()
	o, err := s.Get(ctx(t), k, name)
	if !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatalf("get %s/%s = %v, %v; want ErrNotFound", k, name, o.Value, err)
	}
}

func wantValue(t *testing.T, o nodestore.Object, want proto.Message) {
	t.Helper()
	if !proto.Equal(o.Value, want) {
		t.Fatalf("%s/%s = %v, want %v", o.Kind, o.Name, o.Value, want)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// eventually polls cond until it holds or Deadline passes. Polling, not
// sleeping a fixed time, keeps TTL cases both fast and robust.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v", what, Deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Deadline):
		t.Fatalf("%s: not closed after %v", what, Deadline)
	}
}

func testPing(t *testing.T, s nodestore.Store) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
}
