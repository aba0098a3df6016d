// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package nodestore is the one seam between nodepulse and its store. It fixes
// the key layout (one key per object, one writer per kind), the value
// encoding (protobuf, the same messages as on the wire) and a narrow set of
// operations: read, atomic conditional writes (optionally fenced by a leader
// key), ordered watch from a revision, ephemeral keys tied to a session, and
// leader election. etcdstore implements it on etcd; memstore in memory for
// unit tests; storetest holds the conformance suite both pass.
package nodestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

// Kind is a class of stored object; every kind is a key prefix with a single
// writer, so components never contend on a key.
type Kind string

// The stored kinds. Names are "<node>" for node kinds, "<namespace>/<name>"
// for pods, events, owners and disruption budgets, the collector id for
// collectors.
const (
	// Nodes hold metadata and spec (nodev1.Node without status). Written by
	// the collector at registration (create only) and by admin calls (CAS).
	Nodes Kind = "nodes"
	// Statuses hold nodev1.NodeStatus as last reported. Collector only.
	Statuses Kind = "status"
	// Leases hold nodev1.Lease checkpoints. Collector only.
	Leases Kind = "leases"
	// Health holds nodev1.NodeHealth. Monitor leader only, fenced.
	Health Kind = "health"
	// Pods hold podv1.Pod. The orchestrator (PodService), and the monitor
	// leader for Ready and eviction (fenced, CAS).
	Pods Kind = "pods"
	// Events hold nodev1.Event, with a TTL: one event per key (pod events
	// of the eviction runner).
	Events Kind = "events"
	// EventBatches hold nodev1.EventBatch, with a TTL: the node events the
	// monitor leader records together, one key per batch (the per-key cost
	// of one RegisteredNode event per node was a fifth of the database at
	// 100,000 nodes). Names are "<namespace>/<first event's name>".
	EventBatches Kind = "eventbatches"
	// Collectors hold collectorv1.CollectorInfo, ephemeral (session-bound).
	Collectors Kind = "collectors"
	// ReplicaSets hold appsv1.ReplicaSet: spec by WorkloadService (CAS),
	// status by the monitor leader's owner controller (fenced, CAS).
	ReplicaSets Kind = "replicasets"
	// StatefulSets hold appsv1.StatefulSet, written as ReplicaSets.
	StatefulSets Kind = "statefulsets"
	// DaemonSets hold appsv1.DaemonSet, written as ReplicaSets.
	DaemonSets Kind = "daemonsets"
	// PodDisruptionBudgets hold policyv1.PodDisruptionBudget: spec by
	// DisruptionBudgetService, status by the disruption controller and
	// evictions (CAS).
	PodDisruptionBudgets Kind = "poddisruptionbudgets"
)

// Kinds lists every kind.
var Kinds = []Kind{Nodes, Statuses, Leases, Health, Pods, Events, EventBatches, Collectors,
	ReplicaSets, StatefulSets, DaemonSets, PodDisruptionBudgets}

// New returns an empty message of the kind's type.
func (k Kind) New() proto.Message {
	switch k {
	case Nodes:
		return &nodev1.Node{}
	case Statuses:
		return &nodev1.NodeStatus{}
	case Leases:
		return &nodev1.Lease{}
	case Health:
		return &nodev1.NodeHealth{}
	case Pods:
		return &podv1.Pod{}
	case Events:
		return &nodev1.Event{}
	case EventBatches:
		return &nodev1.EventBatch{}
	case Collectors:
		return &collectorv1.CollectorInfo{}
	case ReplicaSets:
		return &appsv1.ReplicaSet{}
	case StatefulSets:
		return &appsv1.StatefulSet{}
	case DaemonSets:
		return &appsv1.DaemonSet{}
	case PodDisruptionBudgets:
		return &policyv1.PodDisruptionBudget{}
	}
	return nil
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k.New() != nil }

// Key returns the store key of an object under prefix ("/nodepulse/").
func Key(prefix string, k Kind, name string) string { return prefix + string(k) + "/" + name }

// ParseKey splits a key under prefix into kind and name.
func ParseKey(prefix, key string) (Kind, string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", false
	}
	k, name, ok := strings.Cut(rest, "/")
	if !ok || !Kind(k).Valid() || name == "" {
		return "", "", false
	}
	return Kind(k), name, true
}

// Errors of the store. Callers test with errors.Is; gRPC codes are chosen at
// the API edge, never here.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a precondition (IfAbsent, IfModRevision) did not hold.
	ErrConflict = errors.New("conflict: the object changed or already exists")
	// ErrFenced: the fence (leader key) no longer holds; the caller is not the
	// leader any more and must not retry the write as leader.
	ErrFenced = errors.New("fenced: leadership lost")
	// ErrCompacted: the requested watch revision was compacted; list again.
	ErrCompacted = errors.New("revision compacted")
)

// Object is one stored object.
type Object struct {
	Kind  Kind
	Name  string
	Value proto.Message
	// CreateRevision and ModRevision are the store's revisions of the key.
	CreateRevision int64
	ModRevision    int64
}

// Op is one write of an atomic Apply.
type Op struct {
	Kind Kind
	Name string
	// Value to store; nil deletes the object.
	Value proto.Message
	// IfAbsent: the object must not exist.
	IfAbsent bool
	// IfModRevision, when > 0: the object must exist with this ModRevision.
	IfModRevision int64
	// TTL, when > 0, makes the object expire after this long (events).
	TTL time.Duration
	// Check makes the op a compare only: its IfAbsent/IfModRevision must
	// hold for the Apply to commit, and nothing is written (Value is
	// ignored). It makes a write conditional on an object the writer read
	// but does not change: a pod's eviction on its node's health record.
	// A check does not count as a write of its key: the same Apply may
	// check one key and write another.
	Check bool
}

// Unchanged is a check that the object is still at modRev, the revision a
// decision was made from; modRev 0 means the object was absent and must
// still be.
func Unchanged(k Kind, name string, modRev int64) Op {
	if modRev <= 0 {
		return Op{Kind: k, Name: name, Check: true, IfAbsent: true}
	}
	return Op{Kind: k, Name: name, Check: true, IfModRevision: modRev}
}

// Put is a shorthand for an unconditional write.
func Put(k Kind, name string, v proto.Message) Op { return Op{Kind: k, Name: name, Value: v} }

// Delete is a shorthand for an unconditional delete.
func Delete(k Kind, name string) Op { return Op{Kind: k, Name: name} }

// EachApplier commits several conditional writes in one round trip, each
// on its own precondition (etcd: one Txn of nested Txns, each "if the key
// is at its revision, put, else read it").
// Apply is all or nothing, so one node's stale revision would fail a whole
// group commit; the collector's status writes are conditional per node so
// that a write from a stream that was superseded cannot land over a newer
// one, and need this instead.
type EachApplier interface {
	// ApplyEach writes each op (a put: Value set, no Check, no TTL) whose
	// own precondition (IfAbsent, IfModRevision, or none) holds, all at
	// one revision, which it returns. An op whose precondition failed is
	// not written, and its result holds the object as stored then. Keep
	// len(ops) below MaxOps: etcd counts each nested Txn against the same
	// limit as the ops around it.
	ApplyEach(ctx context.Context, ops []Op) ([]EachResult, int64, error)
}

// EachResult is one op's outcome in ApplyEach.
type EachResult struct {
	// Applied: the precondition held and the value was written.
	Applied bool
	// Current is the object as stored when the op was not applied (Found
	// false: absent).
	Current GetResult
}

// CheckEach validates ops for ApplyEach: only puts, distinct keys, within
// max (MaxOps minus the one level of nesting etcd counts).
func CheckEach(ops []Op, maxOps int) error {
	if len(ops) > maxOps-1 {
		return fmt.Errorf("apply each: %d ops exceed the limit of %d", len(ops), maxOps-1)
	}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if !op.Kind.Valid() || op.Name == "" {
			return fmt.Errorf("apply each: invalid object %q/%q", op.Kind, op.Name)
		}
		if op.Value == nil || op.Check || op.TTL > 0 {
			return fmt.Errorf("apply each: %s/%s: only plain puts are supported", op.Kind, op.Name)
		}
		k := string(op.Kind) + "/" + op.Name
		if seen[k] {
			return fmt.Errorf("apply each: duplicate key %s", k)
		}
		seen[k] = true
	}
	return nil
}

// Fence makes a write conditional on a leadership still being held: the
// leader key must exist with the given create revision.
type Fence struct {
	Key      string
	Revision int64
}

// ListOptions page a list.
type ListOptions struct {
	// Revision to read at; 0 reads the latest. Listing several kinds at the
	// revision the first list returned gives one consistent snapshot.
	Revision int64
}

// Reader reads objects.
type Reader interface {
	// Get returns one object or ErrNotFound.
	Get(ctx context.Context, k Kind, name string) (Object, error)
	// List returns every object of a kind, sorted by name, and the revision
	// it was read at. Implementations page internally.
	List(ctx context.Context, k Kind, opts ListOptions) ([]Object, int64, error)
}

// Writer writes objects.
type Writer interface {
	// Apply commits ops atomically: all or none. A failed precondition
	// returns ErrConflict, a failed fence ErrFenced. It returns the revision
	// of the commit. Keep len(ops) within MaxOps.
	Apply(ctx context.Context, fence *Fence, ops ...Op) (int64, error)
	// MaxOps is the largest number of ops one Apply accepts.
	MaxOps() int
}

// EventType of a watch event.
type EventType int

// Watch event types.
const (
	PutEvent EventType = iota + 1
	DeleteEvent
)

// Event is one change.
type Event struct {
	Type EventType
	// Object after the change; for DeleteEvent only Kind, Name and ModRevision
	// (the deletion revision) are set.
	Object Object
}

// WatchBatch is what a watch delivers: changes committed in one or more
// revisions, or a progress notification (no events) proving the watch is
// current up to Revision, or an error after which the channel closes.
type WatchBatch struct {
	Events   []Event
	Revision int64
	Progress bool
	Err      error
}

// Watcher follows changes.
type Watcher interface {
	// Watch delivers every change under the store prefix after revision
	// afterRev, in order. The channel closes after a batch with Err (for
	// example ErrCompacted) or when ctx ends.
	Watch(ctx context.Context, afterRev int64) <-chan WatchBatch
	// RequestProgress asks for a progress notification on open watches, so a
	// watcher can tell a quiet store from a broken watch.
	RequestProgress(ctx context.Context) error
}

// Session keeps ephemeral objects alive: they vanish when the session is
// closed or the process dies and the TTL runs out.
type Session interface {
	// Put writes an object bound to the session.
	Put(ctx context.Context, k Kind, name string, v proto.Message) error
	// Done is closed when the session is lost (expired or closed).
	Done() <-chan struct{}
	// Close ends the session and deletes its objects.
	Close() error
}

// Leadership is a won election.
type Leadership interface {
	// Fence for writes that only the leader may make.
	Fence() Fence
	// Done is closed when leadership is lost.
	Done() <-chan struct{}
	// Resign gives leadership up.
	Resign(ctx context.Context) error
}

// Store is everything a backend provides.
type Store interface {
	Reader
	Writer
	EachApplier
	Watcher
	// Ping checks the store answers a linearizable read.
	Ping(ctx context.Context) error
	// NewSession starts a session with the given TTL.
	NewSession(ctx context.Context, ttl time.Duration) (Session, error)
	// Campaign blocks until id leads election name (or ctx ends), using the
	// session for liveness.
	Campaign(ctx context.Context, s Session, name, id string) (Leadership, error)
	// Leader returns the id of the current leader of election name, or
	// ErrNotFound when there is none.
	Leader(ctx context.Context, name string) (string, error)
	// Close releases the backend.
	Close() error
}

// ApplyChunked commits independent ops in chunks of at most w.MaxOps(), each
// chunk atomic on its own. It stops at the first error and returns how many
// ops were committed.
func ApplyChunked(ctx context.Context, w Writer, fence *Fence, ops []Op) (int, error) {
	n := w.MaxOps()
	if fence != nil {
		n-- // leave room for the fence compare in backends that count it
	}
	done := 0
	for len(ops) > 0 {
		c := min(n, len(ops))
		if _, err := w.Apply(ctx, fence, ops[:c]...); err != nil {
			return done, fmt.Errorf("apply chunk of %d: %w", c, err)
		}
		done += c
		ops = ops[c:]
	}
	return done, nil
}
