// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Errors of memstore itself; the nodestore errors keep their meaning.
var (
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("memstore: closed")
	// ErrSessionExpired: the session's lease is gone (closed or expired).
	ErrSessionExpired = errors.New("memstore: session expired")
)

// Config of a Store. Zero values take the defaults.
type Config struct {
	// Prefix of every key, as etcdstore's etcd.prefix ("/nodepulse/").
	Prefix string
	// MaxOps per Apply (128, etcd's default --max-txn-ops).
	MaxOps int
	// History is how many recent revisions are kept for List and Watch at a
	// past revision (10,000). Older ones are compacted automatically, in
	// amortised steps, so up to 2×History may be kept. Negative: keep
	// everything until Compact.
	History int
}

// Store is the in-memory nodestore.Store. The zero value is not usable; call
// New.
type Store struct {
	cfg         Config
	electPrefix string

	mu         sync.Mutex
	rev        int64
	compactRev int64 // List/Watch below this revision fail with ErrCompacted
	keys       map[string]*keyState
	log        []logEntry // changes by revision, ascending, from compactRev on
	// elections indexes candidate keys by election prefix, so campaigns do
	// not scan every key on each wake-up.
	elections map[string]map[string]struct{}
	leaders   map[string][]*leadership // by election key
	leases    map[int64]*lease
	lastLease int64
	watchers  map[*watcher]struct{}
	// wake is closed and replaced on every change, so waiting watches and
	// campaigns can select on it together with their context.
	wake   chan struct{}
	done   chan struct{} // closed by Close
	closed bool
	fault  error
	wg     sync.WaitGroup // watch goroutines
}

var _ nodestore.Store = (*Store)(nil)

type version struct {
	rev     int64 // ModRevision, or the deletion revision of a tombstone
	create  int64
	value   []byte
	deleted bool
}

type keyState struct {
	versions []version // ascending by rev; the last one is the current state
	lease    int64
}

type rawEvent struct {
	key string
	version
}

type logEntry struct {
	rev    int64
	events []rawEvent
}

type lease struct {
	id    int64
	ttl   time.Duration
	keys  map[string]struct{}
	timer *time.Timer
	sess  *session // nil for the leases of TTL ops
}

type change struct {
	key     string
	value   []byte
	deleted bool
	lease   int64
}

// New returns an empty store at revision 1, as a fresh etcd is.
func New(cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = "/nodepulse/"
	}
	if cfg.MaxOps <= 0 {
		cfg.MaxOps = 128
	}
	if cfg.History == 0 {
		cfg.History = 10000
	}
	return &Store{
		cfg:         cfg,
		electPrefix: cfg.Prefix + "election/",
		rev:         1,
		keys:        map[string]*keyState{},
		elections:   map[string]map[string]struct{}{},
		leaders:     map[string][]*leadership{},
		leases:      map[int64]*lease{},
		watchers:    map[*watcher]struct{}{},
		wake:        make(chan struct{}),
		done:        make(chan struct{}),
	}
}

// Prefix is the key prefix in use.
func (s *Store) Prefix() string { return s.cfg.Prefix }

// Revision is the current revision.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Fail makes every later call fail with err (wrapped), and ends open watches
// with it, as an unreachable etcd would; Fail(nil) heals the store. Sessions,
// leases and elections carry on meanwhile: a test that wants them lost too
// uses ExpireSession.
func (s *Store) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = err
	s.broadcast()
}

// Close stops every timer, ends every watch (with a final ErrClosed batch
// when the reader is waiting for one), closes every session's and
// leadership's Done channel, and returns once the watch goroutines have
// exited. Later calls fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	for _, l := range s.leases {
		if l.timer != nil {
			l.timer.Stop()
		}
		if l.sess != nil {
			l.sess.end()
		}
	}
	for _, ls := range s.leaders {
		for _, l := range ls {
			l.end()
		}
	}
	s.broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// usable reports why the store cannot serve a call, under s.mu.
func (s *Store) usable() error {
	if s.closed {
		return ErrClosed
	}
	if s.fault != nil {
		return fmt.Errorf("memstore: failing: %w", s.fault)
	}
	return nil
}

func (s *Store) broadcast() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Store) key(k nodestore.Kind, name string) string {
	return nodestore.Key(s.cfg.Prefix, k, name)
}

// current is the live version of key, or nil.
func (s *Store) current(key string) *version {
	ks := s.keys[key]
	if ks == nil || len(ks.versions) == 0 {
		return nil
	}
	v := &ks.versions[len(ks.versions)-1]
	if v.deleted {
		return nil
	}
	return v
}

// createRev and modRev answer like etcd compares do: 0 for a missing key.
func (s *Store) createRev(key string) int64 {
	if v := s.current(key); v != nil {
		return v.create
	}
	return 0
}

func (s *Store) modRev(key string) int64 {
	if v := s.current(key); v != nil {
		return v.rev
	}
	return 0
}

func (s *Store) decode(key string, v version) (nodestore.Object, bool) {
	k, name, ok := nodestore.ParseKey(s.cfg.Prefix, key)
	if !ok {
		return nodestore.Object{}, false
	}
	m := k.New()
	if err := proto.Unmarshal(v.value, m); err != nil {
		// Unreachable: only Apply and Session.Put write object keys, and
		// they encode the kind's own message.
		return nodestore.Object{}, false
	}
	return nodestore.Object{Kind: k, Name: name, Value: m, CreateRevision: v.create, ModRevision: v.rev}, true
}

// commit applies changes as one revision, under s.mu. Like etcd, a revision
// is spent only if something changed (deleting a missing key does not).
func (s *Store) commit(changes []change) int64 {
	rev := s.rev + 1
	var events []rawEvent
	for _, c := range changes {
		ks := s.keys[c.key]
		cur := s.current(c.key)
		if c.deleted && cur == nil {
			continue
		}
		if ks == nil {
			ks = &keyState{}
			s.keys[c.key] = ks
		}
		// The key leaves its old lease: in etcd a put without the lease,
		// or a delete, detaches it.
		if ks.lease != 0 {
			if l := s.leases[ks.lease]; l != nil {
				delete(l.keys, c.key)
			}
			ks.lease = 0
		}
		v := version{rev: rev, value: c.value, deleted: c.deleted}
		if !c.deleted {
			v.create = rev
			if cur != nil {
				v.create = cur.create
			}
			if c.lease != 0 {
				ks.lease = c.lease
				s.leases[c.lease].keys[c.key] = struct{}{}
			}
		}
		ks.versions = append(ks.versions, v)
		events = append(events, rawEvent{key: c.key, version: v})
		s.indexElection(c.key, c.deleted)
	}
	if len(events) == 0 {
		return s.rev
	}
	s.rev = rev
	s.log = append(s.log, logEntry{rev: rev, events: events})
	if h := int64(s.cfg.History); h > 0 && s.rev+1-s.compactRev >= 2*h {
		s.compact(s.rev + 1 - h)
	}
	s.broadcast()
	return rev
}

func (s *Store) indexElection(key string, deleted bool) {
	if !strings.HasPrefix(key, s.electPrefix) {
		return
	}
	pfx := key[:strings.LastIndex(key, "/")+1]
	if deleted {
		delete(s.elections[pfx], key)
		if len(s.elections[pfx]) == 0 {
			delete(s.elections, pfx)
		}
		for _, l := range s.leaders[key] {
			l.end()
		}
		delete(s.leaders, key)
		return
	}
	if s.elections[pfx] == nil {
		s.elections[pfx] = map[string]struct{}{}
	}
	s.elections[pfx][key] = struct{}{}
}

// compact drops history below rev, under s.mu: for each key the newest
// version at or below rev survives (unless it is a tombstone), as in etcd.
func (s *Store) compact(rev int64) {
	for key, ks := range s.keys {
		vs := ks.versions
		i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > rev }) - 1
		if i < 0 {
			continue
		}
		if vs[i].deleted {
			i++
		}
		if i > 0 {
			// Copy so the dropped versions can be collected.
			ks.versions = append([]version(nil), vs[i:]...)
		}
		if len(ks.versions) == 0 && ks.lease == 0 {
			delete(s.keys, key)
		}
	}
	j := sort.Search(len(s.log), func(j int) bool { return s.log[j].rev >= rev })
	s.log = append([]logEntry(nil), s.log[j:]...)
	s.compactRev = rev
	s.broadcast()
}

// Compact discards the history before rev: List at a lower revision and
// Watch from a lower one fail with ErrCompacted afterwards. Like etcd, it
// fails with ErrCompacted when rev is already compacted and with
// ErrFutureRevision beyond the current revision.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if rev <= s.compactRev {
		return fmt.Errorf("compact at %d (already at %d): %w", rev, s.compactRev, nodestore.ErrCompacted)
	}
	if rev > s.rev {
		return fmt.Errorf("compact at %d (current %d): %w", rev, s.rev, nodestore.ErrFutureRevision)
	}
	s.compact(rev)
	return nil
}

// Ping implements nodestore.Store.
func (s *Store) Ping(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usable()
}

// Get implements nodestore.Reader.
func (s *Store) Get(ctx context.Context, k nodestore.Kind, name string) (nodestore.Object, error) {
	key := s.key(k, name)
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return nodestore.Object{}, fmt.Errorf("get %s/%s: %w", k, name, err)
	}
	v := s.current(key)
	var cp version
	if v != nil {
		cp = *v
	}
	s.mu.Unlock()
	if v == nil {
		return nodestore.Object{}, fmt.Errorf("%s/%s: %w", k, name, nodestore.ErrNotFound)
	}
	o, ok := s.decode(key, cp)
	if !ok {
		return nodestore.Object{}, fmt.Errorf("unexpected key %q", key)
	}
	return o, nil
}

// List implements nodestore.Reader.
func (s *Store) List(ctx context.Context, k nodestore.Kind, opts nodestore.ListOptions) ([]nodestore.Object, int64, error) {
	kp := s.cfg.Prefix + string(k) + "/"
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("list %s: %w", k, err)
	}
	rev := opts.Revision
	switch {
	case rev <= 0:
		rev = s.rev
	case rev < s.compactRev:
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("list %s at %d: %w", k, rev, nodestore.ErrCompacted)
	case rev > s.rev:
		cur := s.rev
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("list %s at %d: revision is in the future (current %d)", k, rev, cur)
	}
	var found []rawEvent
	for key, ks := range s.keys {
		if !strings.HasPrefix(key, kp) {
			continue
		}
		vs := ks.versions
		i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > rev }) - 1
		if i >= 0 && !vs[i].deleted {
			found = append(found, rawEvent{key: key, version: vs[i]})
		}
	}
	s.mu.Unlock()
	// Sorting by key sorts by name, as etcd's range does.
	slices.SortFunc(found, func(a, b rawEvent) int { return strings.Compare(a.key, b.key) })
	out := make([]nodestore.Object, 0, len(found))
	for _, f := range found {
		if o, ok := s.decode(f.key, f.version); ok {
			out = append(out, o)
		}
	}
	return out, rev, nil
}

// MaxOps implements nodestore.Writer.
func (s *Store) MaxOps() int { return s.cfg.MaxOps }

// Apply implements nodestore.Writer. The fence is checked before the
// preconditions, so a deposed leader always sees ErrFenced.
func (s *Store) Apply(ctx context.Context, fence *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	if len(ops) == 0 {
		return 0, nil
	}
	if len(ops) > s.cfg.MaxOps {
		return 0, fmt.Errorf("apply: %d ops exceed the limit of %d", len(ops), s.cfg.MaxOps)
	}
	keys := make([]string, len(ops))
	changes := make([]change, 0, len(ops))
	changeOf := make([]int, len(ops)) // index in changes, -1 for a check
	seen := make(map[string]bool, len(ops))
	for i, op := range ops {
		if !op.Kind.Valid() || op.Name == "" {
			return 0, fmt.Errorf("apply: invalid object %q/%q", op.Kind, op.Name)
		}
		key := s.key(op.Kind, op.Name)
		keys[i], changeOf[i] = key, -1
		if op.Check {
			continue // compared below, never written
		}
		if seen[key] {
			// etcd rejects a Txn that writes one key twice.
			return 0, fmt.Errorf("apply: duplicate key %s", key)
		}
		seen[key] = true
		c := change{key: key, deleted: op.Value == nil}
		if op.Value != nil {
			b, err := proto.Marshal(op.Value)
			if err != nil {
				return 0, fmt.Errorf("encode %s: %w", key, err)
			}
			c.value = b
		}
		changeOf[i] = len(changes)
		changes = append(changes, c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("apply %d ops: %w", len(ops), err)
	}
	if fence != nil && s.createRev(fence.Key) != fence.Revision {
		return 0, nodestore.ErrFenced
	}
	for i, op := range ops {
		key := keys[i]
		if op.IfAbsent && s.createRev(key) != 0 {
			return 0, nodestore.ErrConflict
		}
		if op.IfModRevision > 0 && s.modRev(key) != op.IfModRevision {
			return 0, nodestore.ErrConflict
		}
	}
	// One lease per distinct TTL, as etcdstore grants them.
	byTTL := map[time.Duration]int64{}
	for i, op := range ops {
		if op.TTL <= 0 || op.Value == nil || op.Check {
			continue
		}
		id, ok := byTTL[op.TTL]
		if !ok {
			l := s.newLease(op.TTL, nil)
			l.timer = time.AfterFunc(op.TTL, func() { s.expire(l.id) })
			id = l.id
			byTTL[op.TTL] = id
		}
		changes[changeOf[i]].lease = id
	}
	return s.commit(changes), nil
}

// ApplyEach implements nodestore.EachApplier: each op is written when its
// own precondition holds, all in one revision.
func (s *Store) ApplyEach(ctx context.Context, ops []nodestore.Op) ([]nodestore.EachResult, int64, error) {
	if err := nodestore.CheckEach(ops, s.cfg.MaxOps); err != nil {
		return nil, 0, err
	}
	values := make([][]byte, len(ops))
	for i, op := range ops {
		b, err := proto.Marshal(op.Value)
		if err != nil {
			return nil, 0, fmt.Errorf("encode %s/%s: %w", op.Kind, op.Name, err)
		}
		values[i] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, 0, fmt.Errorf("apply each of %d ops: %w", len(ops), err)
	}
	out := make([]nodestore.EachResult, len(ops))
	var changes []change
	for i, op := range ops {
		key := s.key(op.Kind, op.Name)
		held := !(op.IfAbsent && s.createRev(key) != 0) && !(op.IfModRevision > 0 && s.modRev(key) != op.IfModRevision)
		if held {
			out[i].Applied = true
			changes = append(changes, change{key: key, value: values[i]})
			continue
		}
		if v := s.current(key); v != nil {
			if o, ok := s.decode(key, *v); ok {
				out[i].Current = nodestore.GetResult{Object: o, Found: true}
			}
		}
	}
	return out, s.commit(changes), nil
}

func (s *Store) newLease(ttl time.Duration, sess *session) *lease {
	s.lastLease++
	l := &lease{id: s.lastLease, ttl: ttl, keys: map[string]struct{}{}, sess: sess}
	s.leases[l.id] = l
	return l
}

// expire is a lease timer's callback.
func (s *Store) expire(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.revoke(id)
	}
}

// revoke deletes a lease and all its keys in one revision, under s.mu.
func (s *Store) revoke(id int64) {
	l := s.leases[id]
	if l == nil {
		return
	}
	delete(s.leases, id)
	if l.timer != nil {
		l.timer.Stop()
	}
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	// Sorted, so the deletions of one expiry reach watchers in a stable
	// order (etcd deletes them in key order too).
	slices.Sort(keys)
	changes := make([]change, len(keys))
	for i, k := range keys {
		changes[i] = change{key: k, deleted: true}
	}
	s.commit(changes)
	if l.sess != nil {
		l.sess.end()
	}
}

// watcher is one open Watch; next and progress are guarded by Store.mu.
type watcher struct {
	next     int64 // first revision not yet delivered
	progress bool  // a progress notification is owed
}

// Watch implements nodestore.Watcher. Each watch runs one goroutine, which
// exits when ctx ends, after an error batch, or when the store is closed.
func (s *Store) Watch(ctx context.Context, afterRev int64) <-chan nodestore.WatchBatch {
	out := make(chan nodestore.WatchBatch)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		// Buffered so the error is there without a goroutine.
		out := make(chan nodestore.WatchBatch, 1)
		out <- nodestore.WatchBatch{Err: fmt.Errorf("watch: %w", err)}
		close(out)
		return out
	}
	w := &watcher{next: afterRev + 1}
	if afterRev <= 0 {
		w.next = s.rev + 1
	}
	s.watchers[w] = struct{}{}
	s.wg.Add(1)
	go s.serveWatch(ctx, w, afterRev, out)
	return out
}

func (s *Store) serveWatch(ctx context.Context, w *watcher, afterRev int64, out chan<- nodestore.WatchBatch) {
	defer s.wg.Done()
	defer close(out)
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			// Best effort: a reader blocked on the channel learns why it
			// closes; one that is not reading must not hold Close up.
			select {
			case out <- nodestore.WatchBatch{Err: fmt.Errorf("watch: %w", ErrClosed)}:
			default:
			}
			return
		}
		b, ok := s.nextBatch(w, afterRev)
		wake := s.wake
		s.mu.Unlock()
		if !ok {
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- b:
			if b.Err != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-s.done:
			// Loop to report ErrClosed.
		}
	}
}

// nextBatch returns what w should receive next, if anything, under s.mu.
func (s *Store) nextBatch(w *watcher, afterRev int64) (nodestore.WatchBatch, bool) {
	if s.fault != nil {
		return nodestore.WatchBatch{Err: fmt.Errorf("watch: %w", s.fault)}, true
	}
	if w.next < s.compactRev {
		return nodestore.WatchBatch{Err: fmt.Errorf("watch after %d: %w (compacted at %d)", afterRev, nodestore.ErrCompacted, s.compactRev)}, true
	}
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev >= w.next })
	var b nodestore.WatchBatch
	for _, e := range s.log[i:] {
		for _, ev := range e.events {
			if ev.deleted {
				k, name, ok := nodestore.ParseKey(s.cfg.Prefix, ev.key)
				if !ok {
					continue
				}
				b.Events = append(b.Events, nodestore.Event{Type: nodestore.DeleteEvent,
					Object: nodestore.Object{Kind: k, Name: name, ModRevision: ev.rev}})
				continue
			}
			// Election keys and anything else that is not an object are
			// not part of the watched data, as in etcdstore.
			if o, ok := s.decode(ev.key, ev.version); ok {
				b.Events = append(b.Events, nodestore.Event{Type: nodestore.PutEvent, Object: o})
			}
		}
	}
	// max: a watch from a future revision must not rewind.
	w.next = max(w.next, s.rev+1)
	if len(b.Events) > 0 {
		b.Revision = s.rev
		return b, true
	}
	if w.progress {
		w.progress = false
		return nodestore.WatchBatch{Revision: s.rev, Progress: true}, true
	}
	return nodestore.WatchBatch{}, false
}

// RequestProgress implements nodestore.Watcher: every open watch receives a
// Progress batch once it has delivered everything up to the current
// revision.
func (s *Store) RequestProgress(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("request progress: %w", err)
	}
	for w := range s.watchers {
		w.progress = true
	}
	s.broadcast()
	return nil
}

// session is a nodestore.Session on a lease that only ends by Close,
// ExpireSession or KillSession.
type session struct {
	s     *Store
	lease *lease
	done  chan struct{}
	ended bool // guarded by Store.mu
}

// end closes Done once, under s.mu.
func (ss *session) end() {
	if !ss.ended {
		ss.ended = true
		close(ss.done)
	}
}

// NewSession implements nodestore.Store. A ttl <= 0 means 60s, the etcd
// concurrency package's default.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (nodestore.Session, error) {
	if ttl <= 0 {
		ttl = 60 * time.Second
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("new session: %w", err)
	}
	ss := &session{s: s, done: make(chan struct{})}
	ss.lease = s.newLease(ttl, ss)
	return ss, nil
}

func (ss *session) Put(ctx context.Context, k nodestore.Kind, name string, v proto.Message) error {
	if !k.Valid() || name == "" {
		return fmt.Errorf("put ephemeral: invalid object %q/%q", k, name)
	}
	b, err := proto.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", k, name, err)
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("put ephemeral %s/%s: %w", k, name, err)
	}
	if s.leases[ss.lease.id] == nil {
		return fmt.Errorf("put ephemeral %s/%s: %w", k, name, ErrSessionExpired)
	}
	s.commit([]change{{key: s.key(k, name), value: b, lease: ss.lease.id}})
	return nil
}

func (ss *session) Done() <-chan struct{} { return ss.done }

// Close ends the session and deletes its objects in one revision. Closing an
// expired session is not an error.
func (ss *session) Close() error {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.revoke(ss.lease.id)
	ss.end()
	return nil
}

func (s *Store) ownSession(ns nodestore.Session) (*session, error) {
	ss, ok := ns.(*session)
	if !ok || ss.s != s {
		return nil, errors.New("memstore: not a session of this store")
	}
	return ss, nil
}

// ExpireSession ends a session now, as its TTL running out at the server
// would: its objects go in one revision, its leaderships and Done end. It is
// the hook tests use to simulate a crashed or partitioned process; the
// storetest suite finds it by this name.
func (s *Store) ExpireSession(ctx context.Context, ns nodestore.Session) error {
	ss, err := s.ownSession(ns)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.revoke(ss.lease.id)
	return nil
}

// KillSession stops a session's keep-alive, as the death of its process
// would: the session expires one TTL from now (on the bubble's clock under
// synctest) unless Close or ExpireSession ends it first.
func (s *Store) KillSession(ns nodestore.Session) error {
	ss, err := s.ownSession(ns)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[ss.lease.id]
	if s.closed || l == nil || l.timer != nil {
		return nil
	}
	l.timer = time.AfterFunc(l.ttl, func() { s.expire(l.id) })
	return nil
}

// leadership is a won election; done closes when its key goes, whatever the
// cause: Resign, the session ending, or the store closing.
type leadership struct {
	s     *Store
	key   string
	rev   int64
	done  chan struct{}
	ended bool // guarded by Store.mu
}

func (l *leadership) end() {
	if !l.ended {
		l.ended = true
		close(l.done)
	}
}

func (l *leadership) Fence() nodestore.Fence { return nodestore.Fence{Key: l.key, Revision: l.rev} }

func (l *leadership) Done() <-chan struct{} { return l.done }

// Resign deletes the leader key if it is still this leadership's, which
// ends it and lets the next candidate in.
func (l *leadership) Resign(ctx context.Context) error {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	if s.createRev(l.key) == l.rev {
		s.commit([]change{{key: l.key, deleted: true}})
	}
	l.end()
	return nil
}

func (s *Store) electionPrefix(name string) string { return s.electPrefix + name + "/" }

// Campaign implements nodestore.Store as etcd's concurrency.Election does:
// the session's candidate key (named after its lease) is created, or its
// value updated, and the call waits until no candidate key of the election
// is older.
func (s *Store) Campaign(ctx context.Context, ns nodestore.Session, name, id string) (nodestore.Leadership, error) {
	ss, err := s.ownSession(ns)
	if err != nil {
		return nil, err
	}
	pfx := s.electionPrefix(name)
	key := fmt.Sprintf("%s%x", pfx, ss.lease.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("campaign %s: %w", name, err)
	}
	if s.leases[ss.lease.id] == nil {
		return nil, fmt.Errorf("campaign %s: %w", name, ErrSessionExpired)
	}
	if cur := s.current(key); cur == nil || !bytes.Equal(cur.value, []byte(id)) {
		s.commit([]change{{key: key, value: []byte(id), lease: ss.lease.id}})
	}
	myRev := s.createRev(key)
	for {
		if s.createRev(key) != myRev {
			return nil, fmt.Errorf("campaign %s: %w", name, ErrSessionExpired)
		}
		older := false
		for k := range s.elections[pfx] {
			if s.createRev(k) < myRev {
				older = true
				break
			}
		}
		if !older {
			break
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			// Withdraw, as concurrency.Election does on cancel, so an
			// abandoned candidate does not become leader later.
			if !s.closed && s.createRev(key) == myRev {
				s.commit([]change{{key: key, deleted: true}})
			}
			return nil, fmt.Errorf("campaign %s: %w", name, ctx.Err())
		}
		if err := s.usable(); err != nil {
			return nil, fmt.Errorf("campaign %s: %w", name, err)
		}
	}
	l := &leadership{s: s, key: key, rev: myRev, done: make(chan struct{})}
	s.leaders[key] = append(s.leaders[key], l)
	return l, nil
}

// Leader implements nodestore.Store: the value of the oldest candidate key.
func (s *Store) Leader(ctx context.Context, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return "", fmt.Errorf("leader of %s: %w", name, err)
	}
	var best *version
	for k := range s.elections[s.electionPrefix(name)] {
		if v := s.current(k); v != nil && (best == nil || v.create < best.create) {
			best = v
		}
	}
	if best == nil {
		return "", nodestore.ErrNotFound
	}
	return string(best.value), nil
}
