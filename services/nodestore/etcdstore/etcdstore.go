// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package etcdstore implements nodestore.Store on etcd v3. It is the only
// package that imports the etcd client. Values are protobuf-encoded, DEFLATE
// compressed with a preset dictionary per kind when that pays (codec.go);
// writes
// are Txns whose compares carry the preconditions and the leader fence; lists
// page at one revision; watches resume from a revision and report compaction.
package etcdstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// Config of the etcd connection.
type Config struct {
	Endpoints   flagenv.StringList
	Prefix      string
	DialTimeout time.Duration
	// RequestTimeout bounds each read and write.
	RequestTimeout time.Duration
	// MaxTxnOps must not exceed the server's --max-txn-ops (default 128).
	MaxTxnOps int
	// PageSize of internal list paging.
	PageSize int64
	TLS      tlsconfig.Config
	Username string
	Password string
	// PlainValues: write values as plain protobuf instead of compressing
	// them. Reading understands both whatever this says. Set it while any
	// replica of an older nodepulse that cannot read compressed values
	// still runs (an upgrade from a release before compression).
	PlainValues bool
}

// invertedBool is a boolean flag that sets *p to its negation, so a flag
// can default to true while the Config field's zero value keeps meaning it.
type invertedBool struct{ p *bool }

func (b invertedBool) String() string {
	if b.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.p)
}
func (b invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = !v
	return nil
}
func (b invertedBool) IsBoolFlag() bool { return true }

// RegisterFlags adds the etcd.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Endpoints = flagenv.StringList{"127.0.0.1:2379"}
	fs.Var(&c.Endpoints, "etcd.endpoints", "comma-separated etcd client endpoints (default 127.0.0.1:2379)")
	fs.StringVar(&c.Prefix, "etcd.prefix", "/nodepulse/", "key prefix of all nodepulse data; several fleets can share one etcd under different prefixes")
	fs.DurationVar(&c.DialTimeout, "etcd.dial-timeout", 5*time.Second, "time to establish the first etcd connection")
	fs.DurationVar(&c.RequestTimeout, "etcd.request-timeout", 5*time.Second, "timeout of each etcd read or write")
	fs.IntVar(&c.MaxTxnOps, "etcd.max-txn-ops", 128, "operations per etcd transaction; must not exceed the server's --max-txn-ops")
	fs.Int64Var(&c.PageSize, "etcd.page-size", 2000, "objects per page when listing")
	c.TLS.RegisterFlags(fs, "etcd", true)
	c.TLS.Insecure = true
	fs.StringVar(&c.Username, "etcd.username", "", "etcd user (RBAC), if auth is enabled")
	fs.StringVar(&c.Password, "etcd.password", "", "password of --etcd.username")
	fs.Var(invertedBool{&c.PlainValues}, "etcd.compress-values", "DEFLATE-compress stored values with a dictionary per kind when that makes them smaller; "+
		"reading understands compressed and plain values either way. Set to false while replicas of a release before compression still run")
}

// Store is the etcd-backed nodestore.
//
// It holds two clients, each with its own connection: cli carries the data
// (reads, writes, watches), ctl the traffic whose lateness is itself a
// verdict: Ping, which decides whether a process calls etcd unavailable,
// and the sessions' lease keep-alives, whose expiry ends a collector's
// registration or a monitor's leadership. On one connection, the data a
// registration storm moves (pages of nodes, hundreds of Txns in flight)
// queues ahead of them; in such storms pings missed their deadline and the
// collector went NOT_SERVING while etcd applied everything in under 0.1 s
// (docs/adr/0012-etcd-control-connection.md: the collector's own CPU is the
// other part of that lateness, which no connection removes).
type Store struct {
	cli    *clientv3.Client
	ctl    *clientv3.Client
	cfg    Config
	lg     *zap.Logger
	prefix string
	owns   bool
	codec  *codec
}

var _ nodestore.Store = (*Store)(nil)

// New connects to etcd.
func New(cfg Config, lg *zap.Logger) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd.endpoints is empty")
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("etcd.prefix %q must start and end with '/'", cfg.Prefix)
	}
	tc, err := cfg.TLS.Client()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: %w", err)
	}
	dial := func(role string) (*clientv3.Client, error) {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   cfg.Endpoints,
			DialTimeout: cfg.DialTimeout,
			TLS:         tc,
			Username:    cfg.Username,
			Password:    cfg.Password,
			Logger:      lg.Named("etcdclient").With(zap.String("connection", role)).WithOptions(zap.IncreaseLevel(zap.WarnLevel)),
			// Keepalive makes a dead member or a partition visible to watches.
			DialKeepAliveTime:    10 * time.Second,
			DialKeepAliveTimeout: 5 * time.Second,
			DialOptions:          []grpc.DialOption{},
			PermitWithoutStream:  true,
		})
		if err != nil {
			return nil, fmt.Errorf("etcd %s client for %v: %w", role, []string(cfg.Endpoints), err)
		}
		return cli, nil
	}
	cli, err := dial("data")
	if err != nil {
		return nil, err
	}
	ctl, err := dial("control")
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	s := Wrap(cli, cfg, lg)
	s.ctl, s.owns = ctl, true
	return s, nil
}

// Wrap uses an existing client (tests, embedded etcd) for data and control
// alike. Close does not close it.
func Wrap(cli *clientv3.Client, cfg Config, lg *zap.Logger) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = "/nodepulse/"
	}
	if cfg.MaxTxnOps <= 0 {
		cfg.MaxTxnOps = 128
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 2000
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	return &Store{cli: cli, ctl: cli, cfg: cfg, lg: lg, prefix: cfg.Prefix, codec: newCodec(!cfg.PlainValues)}
}

// Prefix is the key prefix in use.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the clients if New created them.
func (s *Store) Close() error {
	if !s.owns {
		return nil
	}
	return errors.Join(s.cli.Close(), s.ctl.Close())
}

func (s *Store) key(k nodestore.Kind, name string) string { return nodestore.Key(s.prefix, k, name) }

func (s *Store) decode(key string, value []byte, create, mod int64) (nodestore.Object, error) {
	k, name, ok := nodestore.ParseKey(s.prefix, key)
	if !ok {
		return nodestore.Object{}, fmt.Errorf("unexpected key %q under prefix %q", key, s.prefix)
	}
	m := k.New()
	if err := s.codec.decode(k, value, m); err != nil {
		return nodestore.Object{}, fmt.Errorf("decode %s: %w", key, err)
	}
	return nodestore.Object{Kind: k, Name: name, Value: m, CreateRevision: create, ModRevision: mod}, nil
}

func (s *Store) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// Ping implements nodestore.Store with a linearizable read, which needs a
// quorum: a member cut off from its cluster fails it. It goes over the
// control connection, so it times etcd, not the data queued ahead of it.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	if _, err := s.ctl.Get(ctx, s.prefix+"ping", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd ping: %w", err)
	}
	return nil
}

// Get implements nodestore.Reader.
func (s *Store) Get(ctx context.Context, k nodestore.Kind, name string) (nodestore.Object, error) {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key(k, name))
	if err != nil {
		return nodestore.Object{}, fmt.Errorf("get %s/%s: %w", k, name, err)
	}
	if len(resp.Kvs) == 0 {
		return nodestore.Object{}, fmt.Errorf("%s/%s: %w", k, name, nodestore.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return s.decode(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision)
}

// List implements nodestore.Reader, paging at one revision.
func (s *Store) List(ctx context.Context, k nodestore.Kind, opts nodestore.ListOptions) ([]nodestore.Object, int64, error) {
	prefix := s.prefix + string(k) + "/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	rev := opts.Revision
	var out []nodestore.Object
	from := prefix
	for {
		gopts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(s.cfg.PageSize)}
		if rev > 0 {
			gopts = append(gopts, clientv3.WithRev(rev))
		}
		cctx, cancel := s.reqCtx(ctx)
		resp, err := s.cli.Get(cctx, from, gopts...)
		cancel()
		if err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return nil, 0, fmt.Errorf("list %s at %d: %w", k, rev, nodestore.ErrCompacted)
			}
			return nil, 0, fmt.Errorf("list %s: %w", k, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			o, err := s.decode(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, o)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// MaxOps implements nodestore.Writer.
func (s *Store) MaxOps() int { return s.cfg.MaxTxnOps }

// Apply implements nodestore.Writer as one Txn.
func (s *Store) Apply(ctx context.Context, fence *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	if len(ops) == 0 {
		return 0, nil
	}
	if len(ops) > s.cfg.MaxTxnOps {
		return 0, fmt.Errorf("apply: %d ops exceed etcd.max-txn-ops %d", len(ops), s.cfg.MaxTxnOps)
	}
	// Refuse what could never be read back (List and Watch only decode keys
	// of known kinds with a name), before any lease is granted.
	for _, op := range ops {
		if !op.Kind.Valid() || op.Name == "" {
			return 0, fmt.Errorf("apply: invalid object %q/%q", op.Kind, op.Name)
		}
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	var cmps []clientv3.Cmp
	if fence != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(fence.Key), "=", fence.Revision))
	}
	// One lease per distinct TTL: objects written together with different
	// TTLs must each expire on their own.
	leases := map[time.Duration]clientv3.LeaseID{}
	thens := make([]clientv3.Op, 0, len(ops))
	for _, op := range ops {
		key := s.key(op.Kind, op.Name)
		if op.IfAbsent {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		}
		if op.IfModRevision > 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", op.IfModRevision))
		}
		if op.Check {
			continue
		}
		if op.Value == nil {
			thens = append(thens, clientv3.OpDelete(key))
			continue
		}
		v, err := s.codec.encode(op.Kind, op.Value)
		if err != nil {
			return 0, fmt.Errorf("encode %s: %w", key, err)
		}
		var popts []clientv3.OpOption
		if op.TTL > 0 {
			lease, ok := leases[op.TTL]
			if !ok {
				g, err := s.cli.Grant(ctx, int64((op.TTL+time.Second-1)/time.Second))
				if err != nil {
					return 0, fmt.Errorf("grant TTL for %s: %w", key, err)
				}
				lease = g.ID
				leases[op.TTL] = lease
			}
			popts = append(popts, clientv3.WithLease(lease))
		}
		thens = append(thens, clientv3.OpPut(key, v, popts...))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(thens...).Commit()
	if err != nil {
		return 0, fmt.Errorf("txn of %d ops: %w", len(ops), err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	if fence != nil {
		g, err := s.cli.Get(ctx, fence.Key)
		if err != nil {
			return 0, fmt.Errorf("check fence after failed txn: %w", err)
		}
		if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != fence.Revision {
			return 0, nodestore.ErrFenced
		}
	}
	return 0, nodestore.ErrConflict
}

// Watch implements nodestore.Watcher.
func (s *Store) Watch(ctx context.Context, afterRev int64) <-chan nodestore.WatchBatch {
	return s.watch(ctx, s.prefix, afterRev)
}

// WatchKind implements nodestore.KindWatcher: one etcd watch of the kind's
// prefix, with puts filtered by etcd itself when only deletions are wanted.
func (s *Store) WatchKind(ctx context.Context, k nodestore.Kind, afterRev int64, o nodestore.KindWatchOptions) <-chan nodestore.WatchBatch {
	var extra []clientv3.OpOption
	if o.DeletesOnly {
		extra = append(extra, clientv3.WithFilterPut())
	}
	return s.watch(ctx, s.prefix+string(k)+"/", afterRev, extra...)
}

func (s *Store) watch(ctx context.Context, prefix string, afterRev int64, extra ...clientv3.OpOption) <-chan nodestore.WatchBatch {
	out := make(chan nodestore.WatchBatch, 64)
	go func() {
		defer close(out)
		wctx := clientv3.WithRequireLeader(ctx)
		opts := append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify()}, extra...)
		if afterRev > 0 {
			opts = append(opts, clientv3.WithRev(afterRev+1))
		}
		send := func(b nodestore.WatchBatch) bool {
			select {
			case out <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for resp := range s.cli.Watch(wctx, prefix, opts...) {
			if resp.CompactRevision != 0 {
				send(nodestore.WatchBatch{Err: fmt.Errorf("watch after %d: %w (compacted at %d)", afterRev, nodestore.ErrCompacted, resp.CompactRevision)})
				return
			}
			if err := resp.Err(); err != nil {
				send(nodestore.WatchBatch{Err: fmt.Errorf("watch: %w", err)})
				return
			}
			b := nodestore.WatchBatch{Revision: resp.Header.Revision, Progress: resp.IsProgressNotify()}
			for _, ev := range resp.Events {
				kv := ev.Kv
				// Election keys share the prefix but are not objects.
				k, name, ok := nodestore.ParseKey(s.prefix, string(kv.Key))
				if !ok {
					continue
				}
				if ev.Type == clientv3.EventTypeDelete {
					b.Events = append(b.Events, nodestore.Event{Type: nodestore.DeleteEvent,
						Object: nodestore.Object{Kind: k, Name: name, ModRevision: kv.ModRevision}})
					continue
				}
				o, err := s.decode(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision)
				if err != nil {
					s.lg.Warn("skipping undecodable value", zap.String("key", string(kv.Key)), zap.Error(err))
					continue
				}
				b.Events = append(b.Events, nodestore.Event{Type: nodestore.PutEvent, Object: o})
			}
			// A response with only election keys in it is no news; a
			// batch is either changes or a progress notification.
			if len(b.Events) == 0 && !b.Progress {
				continue
			}
			if !send(b) {
				return
			}
		}
		if ctx.Err() == nil {
			send(nodestore.WatchBatch{Err: errors.New("watch channel closed by the etcd client")})
		}
	}()
	return out
}

// RequestProgress implements nodestore.Watcher.
func (s *Store) RequestProgress(ctx context.Context) error {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	return s.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
}

type session struct {
	s  *Store
	cs *concurrency.Session
}

// NewSession implements nodestore.Store on an etcd lease kept alive by the
// control client (a keep-alive queued behind data would let a busy but
// healthy process's lease expire); its keys go when the lease expires.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (nodestore.Session, error) {
	secs := int((ttl + time.Second - 1) / time.Second)
	cs, err := concurrency.NewSession(s.ctl, concurrency.WithTTL(max(secs, 1)), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return &session{s: s, cs: cs}, nil
}

// Put stores plain protobuf, never compressed: session objects are the
// collectors' registrations (collectors/<id>), one small key per process
// that nothing gains from compressing and people read when discovery
// misbehaves. Reading would understand either.
func (ss *session) Put(ctx context.Context, k nodestore.Kind, name string, v proto.Message) error {
	b, err := proto.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := ss.s.reqCtx(ctx)
	defer cancel()
	if _, err := ss.cs.Client().Put(ctx, ss.s.key(k, name), string(b), clientv3.WithLease(ss.cs.Lease())); err != nil {
		return fmt.Errorf("put ephemeral %s/%s: %w", k, name, err)
	}
	return nil
}

func (ss *session) Done() <-chan struct{} { return ss.cs.Done() }
func (ss *session) Close() error          { return ss.cs.Close() }

// ExpireSession ends a session at the server now, as its TTL running out
// after its process died would: the lease is revoked (its objects and
// election keys go in one revision) and the local keep-alive stops, so Done
// closes. Tests use it to simulate a crash; nodestore/storetest finds it by
// this name.
func (s *Store) ExpireSession(ctx context.Context, ns nodestore.Session) error {
	ss, ok := ns.(*session)
	if !ok {
		return errors.New("expire session: not a session of this store")
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	if _, err := s.cli.Revoke(ctx, ss.cs.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke session lease: %w", err)
	}
	// Without Orphan, Done would only close at the next keep-alive, up to
	// a third of the TTL later.
	ss.cs.Orphan()
	return nil
}

// leadership ends with its session or its Resign, whichever comes first:
// ctx derives from the session's context, so it needs no goroutine.
type leadership struct {
	e      *concurrency.Election
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *leadership) Fence() nodestore.Fence {
	return nodestore.Fence{Key: l.e.Key(), Revision: l.e.Rev()}
}
func (l *leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Resign deletes the leader key, so the next candidate takes over and this
// fence stops holding, and ends Done even if the delete fails: the caller
// asked to stop leading and must not act as leader any more.
func (l *leadership) Resign(ctx context.Context) error {
	defer l.cancel()
	return l.e.Resign(ctx)
}

func (s *Store) electionPrefix(name string) string { return s.prefix + "election/" + name }

// Campaign implements nodestore.Store with concurrency.Election. Leadership
// ends with the session.
func (s *Store) Campaign(ctx context.Context, ns nodestore.Session, name, id string) (nodestore.Leadership, error) {
	ss, ok := ns.(*session)
	if !ok {
		return nil, errors.New("campaign needs a session of this store")
	}
	e := concurrency.NewElection(ss.cs, s.electionPrefix(name))
	if err := e.Campaign(ctx, id); err != nil {
		if ctx.Err() != nil {
			s.withdraw(ctx, ss, name)
		}
		return nil, fmt.Errorf("campaign %s: %w", name, err)
	}
	lctx, cancel := context.WithCancel(ss.cs.Ctx())
	return &leadership{e: e, ctx: lctx, cancel: cancel}, nil
}

// withdraw deletes the candidate key a cancelled campaign may have left.
// concurrency.Election deletes it when ctx ends while the campaign waits
// for its turn, but not when ctx ends while the Txn that writes it is in
// flight: etcd may have applied the write, the key stays with the
// session's lease, and the session would become leader once the others
// are gone, without anyone campaigning (seen in the conformance suite).
// Only a key of this session's lease is deleted. Best effort: a delete
// that fails leaves the key to end with the session's lease, as before.
func (s *Store) withdraw(ctx context.Context, ss *session, name string) {
	k := fmt.Sprintf("%s/%x", s.electionPrefix(name), ss.cs.Lease())
	dctx, cancel := s.reqCtx(context.WithoutCancel(ctx))
	defer cancel()
	_, _ = s.cli.Txn(dctx).If(clientv3.Compare(clientv3.LeaseValue(k), "=", ss.cs.Lease())).Then(clientv3.OpDelete(k)).Commit()
}

// Leader implements nodestore.Store.
func (s *Store) Leader(ctx context.Context, name string) (string, error) {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.electionPrefix(name)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("leader of %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nodestore.ErrNotFound
	}
	return string(resp.Kvs[0].Value), nil
}
