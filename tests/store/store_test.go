// Package store runs the nodestore conformance suite against etcdstore on an
// embedded etcd: the suite memstore passes too, so the fake and the real
// store cannot disagree unnoticed.
package store

import (
	"context"
	"testing"

	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/services/nodestore/storetest"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// store adds the suite's compaction hook, which etcdstore leaves to
// operators (etcd compacts itself).
type store struct {
	*etcdstore.Store
	c *etcdtest.Cluster
}

func (s store) Compact(ctx context.Context, rev int64) error { return s.c.CompactContext(ctx, rev) }

func TestConformance(t *testing.T) {
	// A member of its own: the suite compacts, which is member-wide.
	c := etcdtest.Start(t)
	storetest.Run(t, func(t *testing.T) nodestore.Store {
		// A page size far below the suite's object counts, so List's
		// paging at one revision is exercised too.
		return store{etcdtest.NewStoreWith(t, c, etcdstore.Config{PageSize: 7}), c}
	})
}
