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
	"sync"
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
}

// Event is a compact feed event; the feed turns batches of them into
// protobuf.
type Event struct {
	Name            string
	Kind            collectorv1.LivenessEventKind
	RenewTime       time.Time
	DurationSeconds int32
}

// Table is the liveness table. The zero value is not usable; use New.
type Table struct {
	mu         sync.Mutex
	nodes      map[string]*Entry
	gen        uint64
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
	waiting   map[string]time.Time
	lastPrune time.Time
}

// WaitingMemory is how long a node heard waiting stays in snapshots
// without being heard again: the longest a refused reporter stays away
// (the collector's retry_after cap of 20 s plus half again of jitter).
const WaitingMemory = 30 * time.Second

// New returns an empty table whose pending event buffer holds at most
// maxPending events; beyond that events are dropped and the next batch
// tells subscribers to take a fresh snapshot instead (bounded memory when
// the feed flusher falls behind).
func New(maxPending int) *Table {
	return &Table{nodes: map[string]*Entry{}, maxPending: maxPending, waiting: map[string]time.Time{}}
}

func (t *Table) record(ev Event) {
	if len(t.pending) >= t.maxPending {
		t.overflow = true
		return
	}
	t.pending = append(t.pending, ev)
}

// Attach records that name registered on a stream here and returns the new
// attachment's generation. A previous attachment of the same name is
// replaced (its late Detach is ignored).
func (t *Table) Attach(name, uid string, now time.Time) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	if old, ok := t.nodes[name]; ok && old.Dirty {
		t.dirty--
	}
	t.nodes[name] = &Entry{Name: name, Gen: t.gen, UID: uid, AttachTime: now}
	delete(t.waiting, name)
	t.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED})
	return t.gen
}

// Waiting records that name's reporter was heard at now, alive, but is
// not attached (its Register waits, or it was refused for capacity): a
// feed event, repeated in snapshots for WaitingMemory.
func (t *Table) Waiting(name string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting[name] = now
	t.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING})
}

// Renew records a renewal of attachment gen. It reports false when the
// attachment is gone (the stream was replaced). Monotonicity of renewTime is
// checked by the caller before; Renew trusts it.
func (t *Table) Renew(name string, gen uint64, renew time.Time, durSeconds int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[name]
	if !ok || e.Gen != gen {
		return false
	}
	if e.Renewals == 0 {
		e.AcquireTime = renew
	}
	e.RenewTime = renew
	e.DurationSeconds = durSeconds
	e.Renewals++
	if !e.Dirty {
		e.Dirty = true
		t.dirty++
	}
	t.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED, RenewTime: renew, DurationSeconds: durSeconds})
	return true
}

// Leaving records that the reporter announced a deliberate shutdown.
func (t *Table) Leaving(name string, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.nodes[name]; ok && e.Gen == gen {
		e.Leaving = true
		t.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_LEAVING, RenewTime: e.RenewTime, DurationSeconds: e.DurationSeconds})
	}
}

// Detach removes attachment gen of name (its stream ended) and reports
// whether it was still current.
func (t *Table) Detach(name string, gen uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[name]
	if !ok || e.Gen != gen {
		return false
	}
	if e.Dirty {
		t.dirty--
	}
	delete(t.nodes, name)
	t.record(Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED, RenewTime: e.RenewTime, DurationSeconds: e.DurationSeconds})
	return true
}

// Get returns a copy of the entry of attachment gen (any generation when gen
// is 0).
func (t *Table) Get(name string, gen uint64) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[name]
	if !ok || (gen != 0 && e.Gen != gen) {
		return Entry{}, false
	}
	return *e, true
}

// MarkPersisted records that a checkpoint holding renewTime committed for
// attachment gen. The entry stays dirty if a newer renewal arrived meanwhile.
func (t *Table) MarkPersisted(name string, gen uint64, renew time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[name]
	if !ok || e.Gen != gen {
		return
	}
	e.Persisted = true
	e.PersistedRenew = renew
	if e.Dirty && !e.RenewTime.After(renew) {
		e.Dirty = false
		t.dirty--
	}
}

// Names lists the attached nodes.
func (t *Table) Names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.nodes))
	for n := range t.nodes {
		out = append(out, n)
	}
	return out
}

// Len is the number of attached nodes.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.nodes)
}

// Unpersisted is the number of attached nodes whose latest acknowledged
// renewal is not yet in etcd: the acknowledged-but-unpersisted backlog.
func (t *Table) Unpersisted() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dirty
}

// Take hands the pending events to the feed and, when snapshot is true (or
// events were dropped), also a snapshot of every attached node taken at the
// same instant. overflow says events were dropped since the last Take, so
// every subscriber must start over from the snapshot.
func (t *Table) Take(snapshot bool, now time.Time) (events []Event, snap []Event, overflow bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	events, overflow = t.pending, t.overflow
	t.pending, t.overflow = make([]Event, 0, max(64, len(events))), false
	if snapshot || overflow || now.Sub(t.lastPrune) >= WaitingMemory {
		t.pruneWaitingLocked(now)
	}
	if snapshot || overflow {
		snap = make([]Event, 0, len(t.nodes)+len(t.waiting))
		for _, e := range t.nodes {
			snap = append(snap, Event{Name: e.Name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, RenewTime: e.RenewTime, DurationSeconds: e.DurationSeconds})
		}
		// Waiting nodes carry when they were heard (this collector's
		// clock), for the subscriber to date them by their age.
		for name, at := range t.waiting {
			snap = append(snap, Event{Name: name, Kind: collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING, RenewTime: at})
		}
	}
	return events, snap, overflow
}

func (t *Table) pruneWaitingLocked(now time.Time) {
	t.lastPrune = now
	for name, at := range t.waiting {
		if now.Sub(at) > WaitingMemory {
			delete(t.waiting, name)
		}
	}
}
