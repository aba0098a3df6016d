// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

func node(name string) *nodev1.Node {
	return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name}}
}

func TestSharedIsolatesByPrefix(t *testing.T) {
	c := etcdtest.Shared(t)
	if c2 := etcdtest.Shared(t); c2 != c {
		t.Fatal("Shared started a second member")
	}
	a, b := etcdtest.NewStore(t, c), etcdtest.NewStore(t, c)
	if a.Prefix() == b.Prefix() || !strings.HasPrefix(a.Prefix(), "/t/TestSharedIsolatesByPrefix-") {
		t.Fatalf("prefixes %q and %q: want distinct, named after the test", a.Prefix(), b.Prefix())
	}
	if _, err := a.Apply(t.Context(), nil, nodestore.Put(nodestore.Nodes, "n1", node("n1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(t.Context(), nodestore.Nodes, "n1"); !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatalf("store b sees store a's object: %v", err)
	}
}

func TestStopRestartKeepsData(t *testing.T) {
	c := etcdtest.Start(t)
	// A short request timeout so calls fail fast while the member is down.
	s := etcdtest.NewStoreWith(t, c, etcdstore.Config{RequestTimeout: time.Second})
	rev, err := s.Apply(t.Context(), nil, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	if err != nil {
		t.Fatal(err)
	}

	c.Stop()
	if c.Running() {
		t.Fatal("running after Stop")
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Fatal("ping succeeded with the member stopped")
	}

	c.Restart(t)
	// The shared client reconnects by itself; poll until it has.
	deadline := time.Now().Add(30 * time.Second)
	for s.Ping(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("client did not reconnect after Restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	o, err := s.Get(t.Context(), nodestore.Nodes, "n1")
	if err != nil || o.ModRevision != rev {
		t.Fatalf("after restart: %v mod=%d, %v; want the object written at %d", o.Value, o.ModRevision, err, rev)
	}
}

func TestCompact(t *testing.T) {
	c := etcdtest.Start(t)
	s := etcdtest.NewStore(t, c)
	ctx := t.Context()
	r1, err := s.Apply(ctx, nil, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Apply(ctx, nil, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	if err != nil {
		t.Fatal(err)
	}
	c.Compact(t, r2)
	if _, _, err := s.List(ctx, nodestore.Nodes, nodestore.ListOptions{Revision: r1}); !errors.Is(err, nodestore.ErrCompacted) {
		t.Fatalf("list at %d after compaction at %d: %v, want ErrCompacted", r1, r2, err)
	}
	if err := c.CompactContext(context.Background(), r1); err == nil {
		t.Fatal("compacting below the compacted revision succeeded")
	}
}
