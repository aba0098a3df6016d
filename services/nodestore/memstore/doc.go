// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package memstore is an in-memory nodestore.Store for unit tests, including
// tests that run inside testing/synctest bubbles. It passes the same
// conformance suite (nodestore/storetest) as etcdstore, so a component tested
// on memstore behaves the same on etcd.
//
// What it models, as etcd does:
//   - one global revision, starting at 1 and bumped once per write that
//     changes something (an Apply, a TTL or session expiry that deletes
//     keys, a session Put, a campaign or a resignation);
//   - CreateRevision and ModRevision per key; Apply is atomic, checks the
//     fence first (ErrFenced) and then the preconditions (ErrConflict);
//   - multi-version history: List at a past revision and Watch from a past
//     revision work until the revision is compacted, then fail with
//     ErrCompacted;
//   - ordered watches that filter out keys which are not objects (election
//     keys), and progress notifications on RequestProgress;
//   - TTL ops and sessions on leases; an expired lease deletes all its keys
//     in one revision;
//   - elections whose leader is the candidate key with the lowest
//     CreateRevision, so a Fence stops holding as soon as the leader key goes.
//
// Known limits (what memstore does not model, or models differently):
//   - History: only Config.History revisions (default 10,000) are kept; older
//     ones are compacted automatically, like etcd's auto-compaction. Tests
//     that need old revisions set a larger History or a negative one (keep
//     everything until Compact).
//   - TTLs are exact durations measured with Go timers; etcd rounds them up
//     to whole seconds and to its minimum lease TTL (about 2s by default).
//   - Sessions never expire on their own: an in-process keep-alive cannot
//     fail. ExpireSession ends one at once (as if its TTL ran out) and
//     KillSession stops its keep-alive so it expires one TTL later (as if its
//     process died; etcd would expire it between 2/3 TTL and TTL later).
//   - Watch(ctx, 0) starts at the revision current when Watch is called;
//     etcd starts wherever the server registers the watch, slightly later.
//   - A watch batch holds every change pending for the watcher (possibly
//     several revisions); etcd usually sends one revision per batch. Never
//     rely on batch boundaries beyond "one revision is never split".
//   - Nothing is slow, nothing times out, and there is no network: the
//     store is never unavailable unless a test calls Fail. Values are stored
//     encoded, so callers never share messages with the store.
//   - The whole store is one mutex; fine for tests, not a production store.
//
// synctest: create the store inside the bubble that uses it (its channels
// and timers then belong to that bubble), cancel watch contexts or call
// Close before the bubble ends. Close stops every timer, ends every watch
// goroutine and returns only when they have exited, so nothing outlives it.
// TTLs and KillSession use time.AfterFunc only, so the bubble's fake clock
// drives them: time.Sleep(ttl) in a bubble is enough to expire a key.
package memstore
