// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package app is the collector's composition root: configuration and flags,
// wiring of the ingest server, write path, liveness feed and registration in
// etcd, and the run/drain sequence. tests/ runs collectors in-process
// through it (docs/contracts.md).
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/balance"
	"github.com/nodepulse/nodepulse/collector/internal/feed"
	"github.com/nodepulse/nodepulse/collector/internal/gcboost"
	"github.com/nodepulse/nodepulse/collector/internal/ingest"
	"github.com/nodepulse/nodepulse/collector/internal/live"
	"github.com/nodepulse/nodepulse/collector/internal/persist"
	"github.com/nodepulse/nodepulse/collector/internal/podsync"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/bootstrap"
	"github.com/nodepulse/nodepulse/services/grpcserver"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/logging"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/version"
)

// EnvPrefix of every collector flag's environment variable.
const EnvPrefix = bootstrap.EnvPrefix

const synopsis = `collector: the node-facing front door of nodepulse.

Reporters hold one Report stream per node; the collector validates and
authenticates every message, keeps lease renewals in memory (streaming them
to monitors over the liveness feed and checkpointing them into etcd), and
stores node registrations and changed statuses in etcd. It never judges
health. Stateless: run any number of replicas behind one name.

Usage: collector [flags]`

// Config of a collector.
type Config struct {
	Log   logging.Config
	GRPC  grpcserver.Config
	Admin admin.Config
	Etcd  etcdstore.Config

	// ID of this collector process; default "<hostname>-<random>".
	ID string
	// AdvertiseAddress is where monitors reach the feed; default derived
	// from the gRPC listen address and the host name.
	AdvertiseAddress string
	// SessionTTL of the etcd session that keeps collectors/<id> alive.
	SessionTTL time.Duration
	// DrainWindow: on shutdown, reporters are told to reconnect elsewhere
	// at a random moment within this window; must be shorter than
	// --grpc.drain-timeout so they leave before streams are cut.
	DrainWindow time.Duration
	// ShutdownTimeout bounds the whole stop sequence.
	ShutdownTimeout time.Duration
	// GCPercent is the Go GC target (GOGC) the collector process runs with
	// when the GOGC environment variable is not set (Main only; 0 keeps
	// Go's default of 100). A collector's memory grows with its streams
	// and its CPU with their messages. At 100,000 streams every GC cycle
	// scans ~0.5 GB of heap and ~0.5 GB of goroutine stacks and, through
	// the mutator assists of the stream goroutines, stalls renewals for
	// 1-3 s; 75 has a third fewer cycles than 50 for ~2.5 KB more per
	// connected node (docs/adr/0015-collector-memory-per-stream-and-gc-target.md).
	GCPercent int
	// GCPercentBacklog is the GC target while registrations are
	// backlogged (Main only, and only when GCPercent applies): a fleet
	// re-registering at once is served faster at a higher target, for
	// memory it gives back once the backlog is gone (gcboost).
	GCPercentBacklog int
	// DeprecatedMaxClockSkew is --max-clock-skew, which once refused
	// reporter times that far from this collector's clock and is now
	// ignored (a warning is logged when set).
	DeprecatedMaxClockSkew time.Duration

	Ingest  ingest.Config
	Persist persist.Config
	Feed    feed.Config
	Balance balance.Config

	// Store, when set, is used instead of connecting to --etcd.endpoints
	// (tests: memstore or an embedded etcd). The collector does not close it.
	Store nodestore.Store `json:"-"`
}

// DefaultConfig returns the defaults of every flag.
func DefaultConfig() Config {
	var c Config
	fs := flag.NewFlagSet("collector", flag.ContinueOnError)
	c.RegisterFlags(fs)
	return c
}

// RegisterFlags adds every collector flag to fs with its default.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Log.RegisterFlags(fs)
	c.GRPC.RegisterFlags(fs, fmt.Sprintf(":%d", admin.CollectorGRPCPort))
	c.Admin.RegisterFlags(fs, fmt.Sprintf(":%d", admin.CollectorAdmin))
	c.Etcd.RegisterFlags(fs)
	ic, pc, fc := ingest.DefaultConfig(), persist.DefaultConfig(), feed.DefaultConfig()
	c.Ingest, c.Persist, c.Feed = ic, pc, fc

	fs.StringVar(&c.ID, "collector.id", "", "id of this collector in etcd and in lease checkpoints (default <hostname>-<random>, unique per start)")
	fs.StringVar(&c.AdvertiseAddress, "collector.advertise-address", "", "host:port where monitors reach this collector's feed, and the address other collectors name to the reporters they move here (spec §20.3: match the reporters' --collector.addresses for them to follow it; default: the gRPC listen address, with the host name when it listens on all interfaces)")
	fs.DurationVar(&c.SessionTTL, "collector.session-ttl", 10*time.Second, "TTL of the etcd session holding collectors/<id>: a dead collector disappears from discovery after at most this")
	fs.DurationVar(&c.DrainWindow, "drain.reconnect-window", 5*time.Second, "on shutdown, reporters reconnect elsewhere at a random moment within this window (keep below --grpc.drain-timeout)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "upper bound of the whole shutdown sequence")
	fs.IntVar(&c.GCPercent, "runtime.gc-percent", 75, "Go GC target percentage for this process when the GOGC environment variable is not set (0: Go's default, 100); lower keeps less memory per connected node, for more frequent collections, each of which delays renewals while it runs")
	fs.IntVar(&c.GCPercentBacklog, "runtime.gc-percent-backlog", 200, "Go GC target while registrations are backlogged (a fleet reconnecting at once), back to --runtime.gc-percent 10 s after the backlog is gone; ≤ --runtime.gc-percent disables (not applied when GOGC is set)")

	bc := balance.DefaultConfig()
	fs.DurationVar(&c.Balance.Interval, "balance.interval", bc.Interval, "publish this collector's load (attached nodes, --max-streams) in discovery this often, and ask reporters to move when it holds more than its share of the fleet (0 disables both)")
	fs.Float64Var(&c.Balance.Tolerance, "balance.tolerance", bc.Tolerance, "ask reporters to move only while holding more than the fair share × (1 + this)")
	fs.Float64Var(&c.Balance.MaxFraction, "balance.max-fraction", bc.MaxFraction, "ask at most this fraction of the attached reporters to move in one --balance.interval, each at a random moment within it")
	fs.IntVar(&c.Ingest.MaxStreams, "max-streams", ic.MaxStreams, "open Report streams at most; more are refused with ResourceExhausted")
	fs.DurationVar(&c.DeprecatedMaxClockSkew, "max-clock-skew", 0, "deprecated and ignored: reporter timestamps are no longer refused for being far from the collector's clock (their skew is measured instead: nodepulse_collector_clock_skew_seconds); set --clock-skew-warning on the monitor to be told of skewed nodes")
	fs.Float64Var(&c.Ingest.MessagesPerSecond, "limits.messages-per-second", ic.MessagesPerSecond, "per-node token bucket rate of Report messages (a reporter on defaults sends ~0.2/s)")
	fs.IntVar(&c.Ingest.MessageBurst, "limits.message-burst", ic.MessageBurst, "per-node token bucket burst")
	fs.DurationVar(&c.Ingest.RegisterTimeout, "limits.register-timeout", ic.RegisterTimeout, "a stream must send its Register within this")
	fs.IntVar(&c.Ingest.UnregisteredPerIdentity, "limits.unregistered-streams-per-identity", ic.UnregisteredPerIdentity, "Report streams one certificate identity (mTLS) may hold open before their Register is stored; more are refused at once with ResourceExhausted (0: no limit)")
	fs.IntVar(&c.Ingest.UnregisteredPerAddress, "limits.unregistered-streams-per-address", ic.UnregisteredPerAddress, "Report streams one source IP address without a client certificate may hold open before their Register is stored; more are refused at once with ResourceExhausted (0: no limit; raise it for fleet simulators and NAT gateways)")
	fs.BoolVar(&c.Ingest.RenewPhases, "lease.renew-phases", ic.RenewPhases, "tell each registering reporter its lease renewal phase: phases spread evenly over the renew interval (flat load by construction), and streams sharing a connection renew in 10 groups, so their renewals share reads and writes; false leaves reporters to their jittered intervals")
	fs.DurationVar(&c.Ingest.RetryAfter, "limits.retry-after", ic.RetryAfter, "retry_after given to refused status reports (etcd unavailable, queue full)")
	fs.DurationVar(&c.Ingest.UnavailableReconnectAfter, "etcd-unavailable-reconnect-after", ic.UnavailableReconnectAfter, "after etcd has been unreachable this long, tell reporters to reconnect to another collector (0 disables)")
	fs.DurationVar(&c.Ingest.ReconnectWindow, "etcd-unavailable-reconnect-window", ic.ReconnectWindow, "window over which reporters spread that reconnect")

	fs.DurationVar(&c.Persist.CommitWindow, "status.commit-window", pc.CommitWindow, "group commit: status writes arriving within this window share one etcd Txn")
	fs.IntVar(&c.Persist.QueueSize, "status.queue-size", pc.QueueSize, "status writes waiting for etcd at most; more are refused with retry_after")
	fs.IntVar(&c.Persist.RegisterQueueSize, "registration.queue-size", pc.RegisterQueueSize, "registrations waiting for a registration worker at most; more are refused with RetryInfo (a retry slot after the queue has drained)")
	fs.DurationVar(&c.Persist.RegisterMaxWait, "registration.max-wait", pc.RegisterMaxWait, "queue a registration only while the queue answers it within this, at the rate registrations are answered now; a queued reporter is told so and waits on its stream, beyond it registrations are refused with RetryInfo (only while discovery lists another collector that is not draining: with none, the reporter would only come back here)")
	fs.DurationVar(&c.Ingest.QueuedAfter, "registration.queued-after", ic.QueuedAfter, "tell a reporter its Register is queued (so it waits past its register timeout) when the expected wait is at least this")
	fs.DurationVar(&c.Persist.CheckpointInterval, "lease.checkpoint-interval", pc.CheckpointInterval, "write each attached node's lease to etcd this often, at a per-node phase (and at attach when the stored copy would go stale before that phase); the staleness bound of leases/ in etcd")
	fs.Float64Var(&c.Persist.CheckpointTxnPerSecond, "lease.checkpoint-txn-per-second", pc.CheckpointTxnPerSecond, "cap on lease checkpoint Txns per second (each up to --etcd.max-txn-ops leases), to spread attach storms")
	fs.DurationVar(&c.Persist.PingInterval, "etcd.ping-interval", pc.PingInterval, "how often etcd availability is probed (readiness)")
	fs.IntVar(&c.Persist.PingFailures, "etcd.ping-failures", pc.PingFailures, "consecutive failed pings before etcd is declared unavailable (a failed write declares it at once)")
	fs.IntVar(&c.Persist.StatusConcurrency, "status.concurrency", pc.StatusConcurrency, "status batches (one Txn of up to --etcd.max-txn-ops statuses) in flight at once")
	fs.IntVar(&c.Persist.RegisterConcurrency, "registration.concurrency", pc.RegisterConcurrency, "registration batches (one read Txn + one create Txn of up to --etcd.max-txn-ops/3 nodes each) in flight at once")
	fs.DurationVar(&c.Persist.RegisterReadAttempt, "registration.read-attempt-timeout", pc.RegisterReadAttempt, "bound of one attempt of a registration batch's etcd read; a timed-out attempt is tried again (another etcd member answers it), up to --registration.read-attempts while the reporter waits")
	fs.IntVar(&c.Persist.RegisterReadAttempts, "registration.read-attempts", pc.RegisterReadAttempts, "attempts of a registration batch's etcd read (1: no retry)")

	fs.DurationVar(&c.Feed.BatchInterval, "feed.batch-interval", fc.BatchInterval, "liveness feed: pending events are sent this often")
	fs.DurationVar(&c.Feed.HeartbeatInterval, "feed.heartbeat-interval", fc.HeartbeatInterval, "liveness feed: longest gap between batches (empty batches fill quiet periods)")
	fs.IntVar(&c.Feed.SubscriberBuffer, "feed.subscriber-buffer", fc.SubscriberBuffer, "liveness feed: batches buffered per subscriber before a slow one is resynced from a snapshot")
}

// Validate checks the combination of settings.
func (c *Config) Validate() error {
	var errs []error
	if c.DrainWindow <= 0 || c.DrainWindow >= c.GRPC.DrainTimeout {
		errs = append(errs, fmt.Errorf("--drain.reconnect-window (%s) must be > 0 and below --grpc.drain-timeout (%s)", c.DrainWindow, c.GRPC.DrainTimeout))
	}
	if c.SessionTTL < time.Second {
		errs = append(errs, fmt.Errorf("--collector.session-ttl (%s) must be at least 1s", c.SessionTTL))
	}
	if c.Balance.Interval < 0 || c.Balance.Tolerance < 0 || c.Balance.MaxFraction <= 0 || c.Balance.MaxFraction > 1 {
		errs = append(errs, fmt.Errorf("--balance.interval (%s) and --balance.tolerance (%g) must not be negative, --balance.max-fraction (%g) must be in (0, 1]",
			c.Balance.Interval, c.Balance.Tolerance, c.Balance.MaxFraction))
	}
	if c.GCPercent < 0 {
		errs = append(errs, fmt.Errorf("--runtime.gc-percent (%d) must not be negative (to run without a GC target, set GOGC=off with GOMEMLIMIT)", c.GCPercent))
	}
	if c.Persist.CheckpointInterval < time.Second {
		errs = append(errs, fmt.Errorf("--lease.checkpoint-interval (%s) must be at least 1s", c.Persist.CheckpointInterval))
	}
	if c.Persist.StatusConcurrency < 1 || c.Persist.StatusConcurrency > 64 {
		errs = append(errs, fmt.Errorf("--status.concurrency (%d) must be between 1 and 64", c.Persist.StatusConcurrency))
	}
	if c.Persist.RegisterConcurrency < 1 || c.Persist.RegisterConcurrency > 256 {
		errs = append(errs, fmt.Errorf("--registration.concurrency (%d) must be between 1 and 256", c.Persist.RegisterConcurrency))
	}
	if c.Persist.RegisterReadAttempts < 1 || c.Persist.RegisterReadAttempts > 10 {
		errs = append(errs, fmt.Errorf("--registration.read-attempts (%d) must be between 1 and 10", c.Persist.RegisterReadAttempts))
	}
	if c.Persist.RegisterReadAttempt < 0 {
		errs = append(errs, fmt.Errorf("--registration.read-attempt-timeout (%s) must not be negative (0: the etcd request timeout alone)", c.Persist.RegisterReadAttempt))
	}
	if c.Persist.PingFailures < 1 {
		errs = append(errs, fmt.Errorf("--etcd.ping-failures (%d) must be at least 1", c.Persist.PingFailures))
	}
	if c.Ingest.UnregisteredPerIdentity < 0 || c.Ingest.UnregisteredPerAddress < 0 {
		errs = append(errs, fmt.Errorf("--limits.unregistered-streams-per-identity and -per-address must not be negative (0: no limit)"))
	}
	return errors.Join(errs...)
}

// App is a running collector.
type App struct {
	cfg        Config
	lg         *zap.Logger
	store      nodestore.Store
	closeStore func()
	grpc       *grpcserver.Server
	server     *bootstrap.Server // the admin endpoint, and what Run runs
	table      *live.Table
	persist    *persist.Persister
	ingest     *ingest.Server
	pods       *podsync.Hub
	feed       *feed.Server
	info       *collectorv1.CollectorInfo

	sessMu sync.Mutex
	sess   nodestore.Session

	gc *gcboost.Booster // nil unless Main runs the GC target boost
	bm *balanceMetrics
}

// New builds a collector and listens on its ports at once (":0" works;
// read GRPCAddr and AdminAddr).
func New(cfg Config, lg *zap.Logger, reg *prometheus.Registry) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = bootstrap.InstanceID("collector")
	}
	a := &App{cfg: cfg, lg: lg}
	var err error
	if a.bm, err = newBalanceMetrics(reg); err != nil {
		return nil, err
	}
	if a.store, a.closeStore, err = etcdstore.Open(cfg.Store, cfg.Etcd, lg); err != nil {
		return nil, err
	}
	// Feed events are bounded by four per attached node per batch at most
	// in practice; 1M events is ~50 MB, beyond which subscribers resync.
	a.table = live.New(1 << 20)
	pc := cfg.Persist
	pc.CollectorID = cfg.ID
	if a.persist, err = persist.New(pc, a.store, a.table, lg, reg); err != nil {
		return nil, a.closeOnErr(err)
	}
	ic := cfg.Ingest
	ic.CollectorID, ic.Insecure = cfg.ID, cfg.GRPC.TLS.Insecure
	if a.ingest, err = ingest.New(ic, a.persist, a.table, lg, reg); err != nil {
		return nil, a.closeOnErr(err)
	}
	// The reporters that act as their node's kubelet are served their pods
	// by one list+watch per collector (docs/spec.md, "The reporter as the
	// node's kubelet").
	if a.pods, err = podsync.New(a.store, lg, reg); err != nil {
		return nil, a.closeOnErr(err)
	}
	a.ingest.SetPods(a.pods)
	a.ingest.SetHints(a.hints)
	fc := cfg.Feed
	fc.CollectorID = cfg.ID
	if a.feed, err = feed.New(fc, a.table, a.ingest, lg, reg); err != nil {
		return nil, a.closeOnErr(err)
	}
	auth := &authorizer{insecure: cfg.GRPC.TLS.Insecure}
	a.grpc, err = grpcserver.New(cfg.GRPC, lg, reg, grpcserver.Options{
		Check: auth.check,
		// Large messages are coded off the Report streams' long-lived
		// stacks (ingest.Codec): 16 KB → 8 KB of stack per node.
		Codec: ingest.Codec(),
		// One Report stream per node, ten thousand renewals a second:
		// ingest logs attach, leave and detach and counts messages by kind
		// and result itself (nodepulse_collector_messages_total), and the
		// short chain keeps each stream's stack shallow.
		LongLived: []string{collectorv1.CollectorService_Report_FullMethodName},
	})
	if err != nil {
		return nil, a.closeOnErr(err)
	}
	collectorv1.RegisterCollectorServiceServer(a.grpc, a.ingest)
	collectorv1.RegisterFeedServiceServer(a.grpc, a.feed)
	if a.server, err = bootstrap.NewServer(cfg.Admin, lg, reg); err != nil {
		a.grpc.Stop()
		return nil, a.closeOnErr(err)
	}
	a.server.AddReadyCheck("etcd", a.persist.ReadyCheck)
	adv := cfg.AdvertiseAddress
	if adv == "" {
		adv = advertise(a.grpc.Addr())
	}
	a.info = &collectorv1.CollectorInfo{Id: cfg.ID, FeedAddress: adv, StartTime: nodemodel.Timestamp(time.Now()), Version: version.String()}
	if cfg.DeprecatedMaxClockSkew != 0 {
		lg.Warn("--max-clock-skew is deprecated and ignored: node times are measured, not refused (nodepulse_collector_clock_skew_seconds; the monitor's --clock-skew-warning)")
	}
	lg.Info("collector configured", zap.String("id", cfg.ID), zap.String("grpc", a.grpc.Addr().String()), zap.String("advertise", adv),
		zap.Bool("insecure", cfg.GRPC.TLS.Insecure), zap.Duration("checkpointInterval", cfg.Persist.CheckpointInterval))
	return a, nil
}

func (a *App) closeOnErr(err error) error {
	a.closeStore()
	return err
}

// GRPCAddr is the bound gRPC address.
func (a *App) GRPCAddr() string { return a.grpc.Addr().String() }

// AdminAddr is the bound admin address ("" when disabled).
func (a *App) AdminAddr() string { return a.server.AdminAddr() }

// ID of this collector.
func (a *App) ID() string { return a.cfg.ID }

// FeedAddress is the advertised feed address.
func (a *App) FeedAddress() string { return a.info.GetFeedAddress() }

// Ready is the admin readiness state (nil when ready).
func (a *App) Ready() error { return a.persist.ReadyCheck() }

// Streams is the number of open Report streams.
func (a *App) Streams() int { return a.ingest.Open() }

// Run serves until ctx ends, then drains: CollectorInfo marked draining,
// leases flushed to etcd, reporters told to reconnect within the drain
// window, streams ended, pending writes finished, collectors/<id> removed,
// all within --grpc.drain-timeout plus the final flush.
func (a *App) Run(ctx context.Context) error {
	defer a.closeStore()
	// The write path and feed outlive the gRPC server: streams still being
	// drained need them. They stop only after the server has.
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	loops := []func(context.Context) error{a.persist.Run, a.feed.Run, a.ingest.Run, a.pods.Run, a.readiness, a.register, a.peers, a.balance}
	if a.gc != nil {
		loops = append(loops, a.gc.Run)
	}
	for _, f := range loops {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); _ = f(bg) }()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopBG()
			bgWG.Wait()
		}
	}
	defer stop()

	a.grpc.OnDrain(a.drain)
	a.server.Add("grpc", a.grpc)
	err := a.server.Run(ctx, a.cfg.ShutdownTimeout)

	// Streams are gone (or cut). Status acks were only sent after commit,
	// so nothing acknowledged as durable is pending. Lease renewals were
	// acknowledged as not durable and are not flushed: each stored lease
	// stays within the staleness it declares until the collector the node
	// moves to checkpoints it (see drain, and persist.Attach).
	//
	// Stop the background loops first, so the registration loop does not
	// take the closed session for a lost one and register again.
	stop()
	a.deregister()
	a.lg.Info("collector stopped")
	return err
}

// drain runs when shutdown starts, before GracefulStop.
func (a *App) drain() {
	a.lg.Info("collector draining", zap.Duration("window", a.cfg.DrainWindow))
	// Reporters first: every second before they hear Reconnect is a second
	// they stay on a collector that is going away. No lease flush before
	// they move: every stored lease was checkpointed within its declared
	// staleness, and the collector each node attaches to next writes it by
	// the time that bound runs out (at once if it would run out sooner),
	// newer than anything this one could flush (a flush racing it could
	// only write an older renewTime over it). Flushing every dirty lease
	// here, 100,000 of them at 100,000 nodes, took 4–7 s on a loaded etcd,
	// failed its deadline, and held the Reconnect back all the while.
	a.ingest.Drain(a.cfg.DrainWindow)
	// Then the registry entry says so, for operators listing collectors/
	// and for the other collectors, which stop counting this one as a peer
	// to send refused registrations to (App.peers): an etcd round trip
	// that need not delay the Reconnect.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.sessMu.Lock()
	a.info.Draining = true
	if a.sess != nil {
		if err := a.sess.Put(ctx, nodestore.Collectors, a.cfg.ID, a.info); err != nil {
			a.lg.Warn("could not mark collector draining in etcd", zap.Error(err))
		}
	}
	a.sessMu.Unlock()
	// Once every Report stream has ended (the reporters moved, or the drain
	// cut them a second after the window), the monitors have nothing more
	// to learn here: end the feeds so GracefulStop does not wait for them.
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), a.cfg.GRPC.DrainTimeout)
		defer cancel()
		_ = a.ingest.Wait(wctx)
		a.feed.Finish()
	}()
}

// readiness mirrors etcd availability into gRPC health, so reporters'
// health-checking balancers skip a collector that cannot store.
func (a *App) readiness(ctx context.Context) error {
	last := -1
	mirror := func() {
		ok := 0
		if a.persist.Available() {
			ok = 1
		}
		if ok != last {
			last = ok
			a.grpc.SetServing(ok == 1, collectorv1.CollectorService_ServiceDesc.ServiceName, collectorv1.FeedService_ServiceDesc.ServiceName)
		}
	}
	mirror()
	run.Every(ctx, 500*time.Millisecond, mirror)
	return nil
}

// register keeps collectors/<id> in etcd through a session, recreating it
// when the session is lost (an etcd outage longer than its TTL).
func (a *App) register(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		sess, err := a.store.NewSession(ctx, a.cfg.SessionTTL)
		if err == nil {
			a.sessMu.Lock()
			err = sess.Put(ctx, nodestore.Collectors, a.cfg.ID, a.info)
			if err == nil {
				a.sess = sess
			}
			a.sessMu.Unlock()
			if err != nil {
				_ = sess.Close()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.lg.Warn("cannot register collector in etcd; retrying", zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
		a.lg.Info("collector registered in etcd", zap.String("id", a.cfg.ID), zap.String("feedAddress", a.info.GetFeedAddress()))
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			a.lg.Warn("etcd session lost; registering again")
			a.sessMu.Lock()
			a.sess = nil
			a.sessMu.Unlock()
		}
	}
	return nil
}

// peerInterval is how often a collector lists its peers in discovery.
const peerInterval = 5 * time.Second

// peers tells the write path, every peerInterval, how many other
// collectors discovery lists that are not draining: with none, a
// registration is never refused for the wait, since the reporter would
// only come back here (persist.RegisterQueueFull). A failed list keeps the
// last count.
func (a *App) peers(ctx context.Context) error {
	count := func() {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		objs, _, err := a.store.List(lctx, nodestore.Collectors, nodestore.ListOptions{})
		cancel()
		if err == nil {
			n := 0
			for _, o := range objs {
				if ci, ok := o.Value.(*collectorv1.CollectorInfo); ok && ci.GetId() != a.cfg.ID && !ci.GetDraining() {
					n++
				}
			}
			a.persist.SetPeers(n)
		} else if ctx.Err() == nil {
			a.lg.Debug("cannot list collectors in discovery; keeping the last count", zap.Error(err))
		}
	}
	count()
	run.Every(ctx, peerInterval, count)
	return nil
}

func (a *App) deregister() {
	a.sessMu.Lock()
	defer a.sessMu.Unlock()
	if a.sess != nil {
		if err := a.sess.Close(); err != nil {
			a.lg.Warn("deregistering collector", zap.Error(err))
		}
		a.sess = nil
	}
}

// advertise derives the feed address from the bound address: the host name
// when listening on every interface, else the listen host.
func advertise(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// authorizer lets only nodes report and only control-plane identities
// follow feeds. Register checks the node name itself (the name is inside the
// stream). Plaintext mode allows everyone (logged at start).
type authorizer struct{ insecure bool }

func (z *authorizer) check(ctx context.Context, method string) error {
	if z.insecure {
		return nil
	}
	id := identity.FromContext(ctx)
	switch {
	case method == collectorv1.CollectorService_Report_FullMethodName:
		if id.Role != identity.Node {
			return status.Errorf(codes.PermissionDenied, "caller %s: only node identities (O %s) may open Report streams", id, identity.NodeOrganization)
		}
	case len(method) > len(feedPrefix) && method[:len(feedPrefix)] == feedPrefix:
		if id.Role != identity.Component && id.Role != identity.Operator {
			return status.Errorf(codes.PermissionDenied, "caller %s: FeedService needs a component (O %s) or operator (O %s) identity",
				id, identity.ComponentOrganization, identity.OperatorOrganization)
		}
	}
	return nil
}

var feedPrefix = "/" + collectorv1.FeedService_ServiceDesc.ServiceName + "/"

// Main parses args and the environment, then runs a collector until ctx ends.
func Main(ctx context.Context, args []string) error {
	var cfg Config
	svc := bootstrap.New("collector", synopsis, &cfg.Log)
	cfg.RegisterFlags(svc.Flags)
	svc.GCPercent = &cfg.GCPercent
	return svc.Run(ctx, args, func() (run.Component, error) {
		a, err := New(cfg, svc.Logger, svc.Registry)
		if err != nil {
			return nil, err
		}
		// The backlog boost returns to the target Run set.
		if err := a.boostGC(svc.GCTarget, cfg.GCPercentBacklog, svc.Registry); err != nil {
			return nil, err
		}
		return a, nil
	})
}

// boostGC raises the GC target from base to backlog while registrations
// are backlogged (gcboost); base 0 (GOGC set, or Go's default) disables it.
func (a *App) boostGC(base, backlog int, reg prometheus.Registerer) error {
	b, err := gcboost.New(gcboost.Config{Base: base, Boost: backlog, Hold: 10 * time.Second, Tick: 250 * time.Millisecond},
		a.persist.RegisterBacklog, debug.SetGCPercent, time.Now, a.lg, reg)
	if err != nil {
		return fmt.Errorf("GC target boost: %w", err)
	}
	if b.Enabled() {
		a.gc = b
	}
	return nil
}
