// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// ErrFutureRevision is nodestore.ErrFutureRevision, under the name the
// store's own tests know it by.
var ErrFutureRevision = nodestore.ErrFutureRevision

// Revision returns the member's current revision (the header of a
// linearizable count-only read, which needs a quorum).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.prefix+"ping", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// Compact discards the history of the whole cluster (every prefix, not only
// this store's) before rev: List and Watch at lower revisions then fail with
// nodestore.ErrCompacted, and the space of the discarded revisions is reused
// by later writes (the database file does not shrink without a defrag).
//
// It returns once the compaction is committed through raft, not when the
// member has finished deleting the revisions (no WithCompactPhysical): the
// deletion runs in the background in batches and, at a hundred thousand
// nodes, can outlast any sensible request timeout. A rev that is already
// compacted returns an error wrapping nodestore.ErrCompacted (someone else,
// or etcd's --auto-compaction, got there first), one beyond the current
// revision ErrFutureRevision.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	if _, err := s.cli.Compact(ctx, rev); err != nil {
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return fmt.Errorf("compact at %d: %w", rev, nodestore.ErrCompacted)
		case errors.Is(err, rpctypes.ErrFutureRev):
			return fmt.Errorf("compact at %d: %w", rev, ErrFutureRevision)
		}
		return fmt.Errorf("compact at %d: %w", rev, err)
	}
	return nil
}
