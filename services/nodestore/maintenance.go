// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodestore

import (
	"context"
	"errors"
)

// ErrFutureRevision: a compaction asked for a revision the store has not
// reached (it was restored from an older snapshot, or the caller remembers a
// revision of another cluster). Nothing was compacted.
var ErrFutureRevision = errors.New("required revision is a future revision")

// Maintenance is the upkeep of a store that keeps history and files on disk
// (etcdstore): the leading monitor compacts the history and defragments the
// members through it, and never reaches past this seam. A store that has
// neither (memstore) does not implement it, and the upkeep is off.
type Maintenance interface {
	Compaction
	Defragmentation
}

// Compaction bounds the store's history.
type Compaction interface {
	// Revision returns the store's current revision.
	Revision(ctx context.Context) (int64, error)
	// Compact discards history before rev; an already compacted rev returns
	// an error wrapping ErrCompacted, one beyond the current revision
	// ErrFutureRevision.
	Compact(ctx context.Context, rev int64) error
}

// Defragmentation gives back the space compaction leaves in the members'
// files, one member at a time.
type Defragmentation interface {
	// Members lists the members that can be addressed.
	Members(ctx context.Context) ([]Member, error)
	// MemberStatus asks the member at endpoint about its database.
	MemberStatus(ctx context.Context, endpoint string) (MemberStatus, error)
	// Defragment rewrites the member's file without its empty space; the
	// member serves nothing meanwhile, and ctx bounds the wait.
	Defragment(ctx context.Context, endpoint string) error
}

// Member is one member of the store's cluster as maintenance addresses it.
type Member struct {
	ID   uint64
	Name string
	// Endpoint is the member's first advertised client URL: maintenance
	// requests (status, defragment) go to that member and no other.
	Endpoint string
}

// MemberStatus is what a member says about its own database.
type MemberStatus struct {
	// Leader is the ID of the member the answering member follows (its own
	// ID when it leads).
	Leader uint64
	// DBSize is the size of the member's bbolt file; DBSizeInUse the part
	// not on bbolt's free list. Pages partly emptied by compaction count as
	// in use: only a defragmentation shows how much of them is empty.
	DBSize, DBSizeInUse int64
}
