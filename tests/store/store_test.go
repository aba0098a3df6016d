// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package store

import (
	"context"
	"errors"
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/services/nodestore/storetest"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

func TestConformance(t *testing.T) {
	// A member of its own: the suite compacts, which is member-wide.
	c := etcdtest.Start(t)
	storetest.Run(t, func(t *testing.T) nodestore.Store {
		// A page size far below the suite's object counts, so List's
		// paging at one revision is exercised too.
		// etcdstore's own Compact serves the suite's compaction cases.
		return etcdtest.NewStoreWith(t, c, etcdstore.Config{PageSize: 7})
	})
}

var _ storetest.Compactor = (*etcdstore.Store)(nil)

// Compact's refusals, which the monitor's compactor tells apart: a revision
// already compacted, and one the member has not reached.
func TestCompactRefusals(t *testing.T) {
	c := etcdtest.Start(t)
	s := etcdtest.NewStore(t, c)
	ctx := context.Background()
	r1, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Apply(ctx, nil, nodestore.Put(nodestore.Nodes, "n", &nodev1.Node{}))
	if err != nil || r2 <= r1 {
		t.Fatalf("apply: revision %d (before %d), %v", r2, r1, err)
	}
	if r, err := s.Revision(ctx); err != nil || r != r2 {
		t.Fatalf("Revision after the write: %d %v, want %d", r, err, r2)
	}
	if err := s.Compact(ctx, r2+100); !errors.Is(err, etcdstore.ErrFutureRevision) {
		t.Fatalf("compact at a future revision: %v, want ErrFutureRevision", err)
	}
	if err := s.Compact(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, r1); !errors.Is(err, nodestore.ErrCompacted) {
		t.Fatalf("compact below the compacted revision: %v, want ErrCompacted", err)
	}
	if _, _, err := s.List(ctx, nodestore.Nodes, nodestore.ListOptions{Revision: r1}); !errors.Is(err, nodestore.ErrCompacted) {
		t.Fatalf("list at %d after compaction at %d: %v, want ErrCompacted", r1, r2, err)
	}
	if o, err := s.Get(ctx, nodestore.Nodes, "n"); err != nil || o.ModRevision != r2 {
		t.Fatalf("the latest revision of a key survives compaction: %+v %v", o, err)
	}
}
