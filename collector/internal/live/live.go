// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package live is the collector's in-memory liveness table: which nodes are
// attached to this collector, their latest lease renewal, and how much of it
// is already checkpointed in etcd. Every change is also recorded as a feed
// event, under the same lock as the table itself, so a snapshot taken
// together with the pending events is exactly consistent: a feed subscriber
// that gets the snapshot and then the following events never misses or
// double-counts a change.
//
// Renewals are the hot path (100,000 nodes renewing every 10s is 10,000
// renewals/s): Renew only updates a struct and appends a small value to a
// slice; protobuf messages are built once per batch by the feed.
package live

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// Entry is one attached node.
type Entry struct {
	Name string
	// Gen identifies this attachment: a node that reconnects (to this or
	// another stream) gets a new Gen, so late work for an old stream is
	// recognised and dropped.
	Gen uint64
	// UID of the stored Node, for the lease's owner reference.
	UID string
	// AttachTime is the collector's clock at registration.
	AttachTime time.Time
	// RenewTime is the reporter's clock at its latest accepted renewal; zero
	// before the first one.
	RenewTime       time.Time
	DurationSeconds int32
	// AcquireTime is the first renewal on this attachment.
	AcquireTime time.Time
	// Renewals accepted on this attachment.
	Renewals uint64
	// PersistedRenew is the RenewTime of the latest committed checkpoint;
	// Dirty says the live renewTime is ahead of it.
	PersistedRenew time.Time
	Persisted      bool
	Dirty          bool
	Leaving        bool
	// StatusHeartbeat is the heartbeat of the latest status report
	// acknowledged as stored on this attachment (reporter clock; zero
	// before the first); PersistedStatus is the one the latest committed
	// checkpoint carries.
	StatusHeartbeat time.Time
	PersistedStatus time.Time
	// StatusReceived is this collector's clock when that report arrived.
	StatusReceived time.Time
	// gone: replaced or detached; a Ref to it renews nothing.
	gone bool
}

// Event is a compact feed event; the feed turns batches of them into
// protobuf.
type Event struct {
	Name string
	Kind collectorv1.LivenessEventKind
	// RenewTime is the renewal's renewTime, a WAITING node's time in a
	// snapshot, and a STATUS_REPORTED event's status heartbeat (the feed
	// codes it as status_heartbeat_time). One field for both keeps the
	// event, appended by every renewal, as small as it was.
	RenewTime       time.Time
	DurationSeconds int32
	// RetryWithin: a WAITING node was refused and told to stay away up to
	// this long (the feed's retry_within).
	RetryWithin time.Duration
	// Received (STATUS_REPORTED only): this collector's clock when the
	// report arrived, Unix ns (the feed's received_time). Monitors date
	// the report by it, and measure the node's clock skew against it.
	Received int64
}

// Table is the liveness table. The zero value is not usable; use New.
//
// It is split into shards by node name, each with its own lock, events and
// waiting nodes. One lock for the whole table was measured to stall the
// collector at 100,000 nodes on a saturated machine: every renewal (10,000
// a second) takes it, and once a holder is preempted the waiters queue up;
// Go's mutex then hands it over in FIFO order, each hand-over waiting for
// the next goroutine to be scheduled, and 8,637 stream goroutines were found
// queued on it while the feed showed no renewals for seconds. A node lives
// in one shard for good, so its events keep their order, and Take, which
// takes each shard's events and snapshot under that shard's lock, still
// gives a subscriber a consistent view of every node.
type Table struct {
	seed   maphash.Seed
	gen    atomic.Uint64
	shards []shard
}

// numShards: enough that the renewals of 100,000 nodes spread thin (about
// 150 a second per lock), few enough that Take's pass over them is cheap.
const numShards = 64

type shard struct {
	mu         sync.Mutex
	nodes      map[string]*Entry
	pending    []Event
	maxPending int
	overflow   bool
	dirty      int
	// waiting: nodes heard WAITING here and not attached since, with the
	// collector's clock then. Snapshots repeat them, so a monitor that
	// subscribes after the event still hears it: a collector that just
	// started takes a fleet's Registers before any monitor follows its
	// feed, and the events of those seconds went to nobody; a reporter
	// refused then stays away up to 30 s, past the grace period the
	// monitor gave it when its old collector went away.
	waiting   map[string]heard
	lastPrune time.Time
	// Padding keeps neighbouring shards' locks off one cache line.
	_ [64]byte
}

// heard is when a waiting node was last heard, and how long it was told to
// stay away then.
type heard struct {
	at     time.Time
	within time.Duration
}

// WaitingMemory is how long a node heard waiting stays in snapshots
// without being heard again: the longest a refused reporter stays away
// (the collector's retry_after cap of 20 s plus half again of jitter).
const WaitingMemory = 30 * time.Second

// New returns an empty table whose pending event buffer holds at most
// maxPending events (split evenly over the shards); beyond that events are
// dropped and the next batch tells subscribers to take a fresh snapshot
// instead (bounded memory when the feed flusher falls behind).
func New(maxPending int) *Table { return newTable(maxPending, numShards) }

// newTable with n shards (benchmarks compare against one).
func newTable(maxPending, n int) *Table {
	t := &Table{seed: maphash.MakeSeed(), shards: make([]shard, n)}
	per := max(1, (maxPending+n-1)/n)
	for i := range t.shards {
		t.shards[i] = shard{nodes: map[string]*Entry{}, maxPending: per, waiting: map[string]heard{}}
	}
	return t
}

func (t *Table) shard(name string) *shard {
	return &t.shards[maphash.String(t.seed, name)%uint64(len(t.shards))]
}

func (sh *shard) record(ev Event) {
	if len(sh.pending) >= sh.maxPending {
		sh.overflow = true
		return
	}
	sh.pending = append(sh.pending, ev)
}

// Attach records that name registered on a stream here and returns the new
// attachment's generation. A previous attachment of the same name is
// replaced (its late Detach is ignored).
func (t *Table) Attach(name, uid string, now time.Time) uint64 {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Under the shard's lock: two attachments of one name get their
	// generations in the order they replace each other.
	gen := t.gen.Add(1)
	if old, ok := sh.nodes[name]; ok {
		old.gone = true
		if old.Dirty {
			sh.dirty--
		}
	}
	sh.nodes[name] = &Entry{Name: name, Gen: gen, UID: uid, AttachTime: now}
	delete(sh.waiting, name)
	sh.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED})
	return gen
}

// Waiting records that name's reporter was heard at now, alive, but is
// not attached (its Register waits, or it was refused for capacity): a
// feed event, repeated in snapshots for WaitingMemory. within is how long
// a refused reporter was told it may stay away (0 while its Register
// waits here).
func (t *Table) Waiting(name string, now time.Time, within time.Duration) {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.waiting[name] = heard{at: now, within: within}
	sh.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING, RetryWithin: within})
}

// Renew records a renewal of attachment gen, looked up by name (a stream
// keeps a Ref and renews through it). It reports false when the attachment
// is gone (the stream was replaced). Monotonicity of renewTime is checked by
// the caller before; Renew trusts it.
func (t *Table) Renew(name string, gen uint64, renew time.Time, durSeconds int32) bool {
	r, ok := t.Ref(name, gen)
	return ok && r.Renew(renew, durSeconds)
}

func (sh *shard) renewLocked(e *Entry, renew time.Time, durSeconds int32) {
	if e.Renewals == 0 {
		e.AcquireTime = renew
	}
	e.RenewTime = renew
	e.DurationSeconds = durSeconds
	e.Renewals++
	if !e.Dirty {
		e.Dirty = true
		sh.dirty++
	}
	sh.record(Event{Name: e.Name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED, RenewTime: renew, DurationSeconds: durSeconds})
}

// Ref is a handle on one attachment, kept by its stream: renewing through
// it skips hashing the name to its shard and the map lookup, three
// quarters of Table.Renew's CPU at 10,000 renewals a second (profiles in
// docs/adr/0016-sharded-liveness-table.md). The zero Ref renews nothing.
type Ref struct {
	sh *shard
	e  *Entry
}

// Ref returns the handle of attachment gen of name; false when that
// attachment is not current.
func (t *Table) Ref(name string, gen uint64) (Ref, bool) {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.nodes[name]
	if !ok || e.Gen != gen {
		return Ref{}, false
	}
	return Ref{sh: sh, e: e}, true
}

// Renew is Table.Renew of the attachment r refers to.
func (r Ref) Renew(renew time.Time, durSeconds int32) bool {
	if r.e == nil {
		return false
	}
	r.sh.mu.Lock()
	defer r.sh.mu.Unlock()
	if r.e.gone {
		return false
	}
	r.sh.renewLocked(r.e, renew, durSeconds)
	return true
}

// StatusReported records that a status report of the attachment r refers
// to, whose heartbeat is hb and which arrived at received (this
// collector's clock), was acknowledged as stored (written, or equal to the
// stored status). Unchanged statuses are not written to etcd, so this is
// how their heartbeat reaches the monitors (a STATUS_REPORTED feed event)
// and the next lease checkpoint. A report with the latest one's heartbeat
// (a resend) is not an event. One with an earlier heartbeat is: its
// node's clock stepped back, and it is still a report of a live node.
// False when the attachment is gone.
func (r Ref) StatusReported(hb, received time.Time) bool {
	if r.e == nil {
		return false
	}
	r.sh.mu.Lock()
	defer r.sh.mu.Unlock()
	if r.e.gone {
		return false
	}
	if hb.Equal(r.e.StatusHeartbeat) {
		return true
	}
	r.e.StatusHeartbeat, r.e.StatusReceived = hb, received
	r.sh.record(Event{Name: r.e.Name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED, RenewTime: hb, Received: received.UnixNano()})
	return true
}

// Leaving records that the reporter announced a deliberate shutdown.
func (t *Table) Leaving(name string, gen uint64) {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.nodes[name]; ok && e.Gen == gen {
		e.Leaving = true
		sh.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_LEAVING, RenewTime: e.RenewTime, DurationSeconds: e.DurationSeconds})
	}
}

// Detach removes attachment gen of name (its stream ended) and reports
// whether it was still current.
func (t *Table) Detach(name string, gen uint64) bool {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.nodes[name]
	if !ok || e.Gen != gen {
		return false
	}
	if e.Dirty {
		sh.dirty--
	}
	e.gone = true
	delete(sh.nodes, name)
	sh.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED, RenewTime: e.RenewTime, DurationSeconds: e.DurationSeconds})
	return true
}

// Get returns a copy of the entry of attachment gen.
func (t *Table) Get(name string, gen uint64) (Entry, bool) {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.nodes[name]
	if !ok || e.Gen != gen {
		return Entry{}, false
	}
	return *e, true
}

// MarkPersisted records that a checkpoint holding renewTime and the status
// heartbeat statusHB committed for attachment gen. The entry stays dirty if
// a newer renewal arrived meanwhile.
func (t *Table) MarkPersisted(name string, gen uint64, renew, statusHB time.Time) {
	sh := t.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.nodes[name]
	if !ok || e.Gen != gen {
		return
	}
	e.Persisted = true
	e.PersistedRenew = renew
	e.PersistedStatus = statusHB
	if e.Dirty && !e.RenewTime.After(renew) {
		e.Dirty = false
		sh.dirty--
	}
}

// Len is the number of attached nodes.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.nodes)
		sh.mu.Unlock()
	}
	return n
}

// Unpersisted is the number of attached nodes whose latest acknowledged
// renewal is not yet in etcd: the acknowledged-but-unpersisted backlog.
func (t *Table) Unpersisted() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.dirty
		sh.mu.Unlock()
	}
	return n
}

// Take hands the pending events to the feed, appended to dst[:0] (the
// caller's buffer from its previous Take: a flush then allocates nothing,
// where a fresh slice per shard and flush was a tenth of the collector's
// garbage at 10,000 renewals a second), and, when snapshot is true (or
// events were dropped), also a snapshot of every attached node. Each
// shard's events and snapshot are taken together under its lock, so for
// every node the snapshot and the events that follow it in later Takes fit
// exactly. overflow says events were dropped since the last Take, so every
// subscriber must start over from the snapshot.
func (t *Table) Take(dst []Event, snapshot bool, now time.Time) (events []Event, snap []Event, overflow bool) {
	events = dst[:0]
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		events = append(events, sh.pending...)
		clear(sh.pending) // the buffer is kept: drop its references
		sh.pending = sh.pending[:0]
		overflow = overflow || sh.overflow
		sh.overflow = false
		if snapshot {
			snap = sh.snapshotLocked(snap, now)
		} else if now.Sub(sh.lastPrune) >= WaitingMemory {
			sh.pruneWaitingLocked(now)
		}
		sh.mu.Unlock()
	}
	if overflow && !snapshot {
		// Overflow is only known shard by shard, so the snapshot it calls
		// for is a second pass. Each shard's snapshot then includes the
		// events taken from it before, and its events since are taken
		// with it: still consistent (a node's events stay in its shard, so
		// they keep their order), and every subscriber resyncs from it.
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			snap = sh.snapshotLocked(snap, now)
			events = append(events, sh.pending...)
			clear(sh.pending)
			sh.pending = sh.pending[:0]
			sh.mu.Unlock()
		}
	}
	return events, snap, overflow
}

// snapshotLocked appends the shard's attached and waiting nodes to snap.
func (sh *shard) snapshotLocked(snap []Event, now time.Time) []Event {
	sh.pruneWaitingLocked(now)
	for _, e := range sh.nodes {
		snap = append(snap, Event{Name: e.Name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: e.RenewTime, DurationSeconds: e.DurationSeconds})
		// The latest status heartbeat follows its node's ATTACHED, so a
		// monitor that subscribes later serves it at once.
		if !e.StatusHeartbeat.IsZero() {
			snap = append(snap, Event{Name: e.Name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED, RenewTime: e.StatusHeartbeat, Received: e.StatusReceived.UnixNano()})
		}
	}
	// Waiting nodes carry when they were heard (this collector's clock),
	// for the subscriber to date them by their age.
	for name, h := range sh.waiting {
		snap = append(snap, Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING, RenewTime: h.at, RetryWithin: h.within})
	}
	return snap
}

func (sh *shard) pruneWaitingLocked(now time.Time) {
	sh.lastPrune = now
	for name, h := range sh.waiting {
		if now.Sub(h.at) > max(WaitingMemory, h.within) {
			delete(sh.waiting, name)
		}
	}
}
