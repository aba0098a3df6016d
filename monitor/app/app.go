// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package app is the monitor's composition root: configuration and flags,
// wiring of the watch cache, the collectors' liveness feeds, the node
// lifecycle controller and the NodeService API, and the run sequence.
// tests/ runs monitors in-process through it (docs/contracts.md).
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi"
	"github.com/nodepulse/nodepulse/monitor/internal/kubemetrics"
	"github.com/nodepulse/nodepulse/monitor/internal/maintenance/compactor"
	"github.com/nodepulse/nodepulse/monitor/internal/maintenance/defrag"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/controller"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/disruption"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/eviction"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/owners"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podgc"
	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/bootstrap"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/grpcserver"
	"github.com/nodepulse/nodepulse/services/logging"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/version"
)

// EnvPrefix of every monitor flag's environment variable.
const EnvPrefix = bootstrap.EnvPrefix

const synopsis = `monitor: the node lifecycle controller of nodepulse, and its query API.

Every replica follows etcd (list + watch) and the collectors' live liveness
feeds, and serves NodeService (get, list, watch, cordon, taint, explain ...)
and PodService (the workload records an orchestrator keeps) on its gRPC port. One replica, elected through etcd, judges the nodes: a node
not heard from for --node-monitor-grace-period turns Unknown, gets condition
taints, its pods turn Ready=False, and it is queued for a NoExecute taint at
the zone's rate; the evictor then deletes the pods that do not tolerate the
taint for long enough (default tolerations: 300 s) gracefully: they turn
Terminating and stay until the node's reporter confirms, pod GC removes them
(node deleted, or tainted out-of-service while not Ready) or a forced delete. Run two or
more for availability; a failover gives every node a fresh grace period.

Usage: monitor [flags]`

// Config of a monitor.
type Config struct {
	Log   logging.Config
	GRPC  grpcserver.Config
	Admin admin.Config
	Etcd  etcdstore.Config
	// Collector is how feeds are dialled (TLS and keepalive; addresses come
	// from collectors/ in etcd).
	Collector grpcclient.Config

	// Lifecycle holds the grace periods and rates, see lifecycle.Config.
	Lifecycle lifecycle.Config
	// Admission holds the default NoExecute toleration seconds PodService
	// adds to pods (kube-apiserver DefaultTolerationSeconds).
	Admission admission.Config
	// EvictionResync: how often the evictor reprocesses every pod on a
	// tainted node (catches missed changes and failed deletions).
	EvictionResync time.Duration
	// PodGCPeriod is the pause between pod GC passes (kube-controller-manager
	// gcCheckPeriod, 20 s); PodGCQuarantine how long the pods of a missing
	// node are kept before pod GC removes them (quarantineTime, 40 s).
	PodGCPeriod     time.Duration
	PodGCQuarantine time.Duration
	// OwnersResync is the longest pause between two syncs of the owner
	// controllers and placement (spec §16); changes in the cache wake them
	// at once.
	OwnersResync time.Duration
	// MonitorPeriod (--node-monitor-period) is the pause between health
	// passes; it must be well below the grace period.
	MonitorPeriod time.Duration
	// ID of this replica in the election; default "<hostname>-<random>".
	ID string
	// ElectionTTL bounds how long a crashed leader holds leadership; keep it
	// well below the grace period so a failover never costs a node its grace.
	ElectionTTL time.Duration
	// ProgressInterval: how often the etcd watch is asked to prove itself
	// alive; WatchStaleAfter: judgement pauses when it has been silent this
	// long (must exceed ProgressInterval by a margin for a loaded etcd).
	ProgressInterval time.Duration
	WatchStaleAfter  time.Duration
	// CompactionInterval: the history the leader keeps; it compacts to the
	// revision of one interval ago every fifth of one (0: etcd compacts
	// itself).
	CompactionInterval time.Duration
	// Defrag: after its compactions the leader defragments etcd members
	// whose files hold much more than they use (package defrag).
	Defrag defrag.Config
	// OperatorToken, on a plaintext server, is the bearer token changes need.
	OperatorToken string
	// ShutdownTimeout bounds the stop sequence.
	ShutdownTimeout time.Duration
	// GCPercent is the Go GC target Main runs the process with, unless GOGC
	// is set (0: Go's default).
	GCPercent int
	// KubeMetrics: which replicas export the kube_* node series on the admin
	// /metrics, and the node labels kube_node_labels carries (package
	// kubemetrics; Leading is set by New).
	KubeMetrics kubemetrics.Config

	// KubeAPI is the Kubernetes-compatible HTTP API (package kubeapi).
	KubeAPI KubeAPIConfig

	// Store, when set, is used instead of connecting to --etcd.endpoints
	// (tests). The monitor does not close it.
	Store nodestore.Store `json:"-"`
}

// DefaultConfig returns the defaults of every flag.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("monitor", flag.ContinueOnError))
	return c
}

// RegisterFlags adds every monitor flag to fs with its default.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Log.RegisterFlags(fs)
	c.GRPC.RegisterFlags(fs, fmt.Sprintf(":%d", admin.MonitorGRPCPort))
	c.Admin.RegisterFlags(fs, fmt.Sprintf(":%d", admin.MonitorAdmin))
	c.Etcd.RegisterFlags(fs)
	c.Collector.TLS.RegisterFlags(fs, "collector", true)
	fs.DurationVar(&c.Collector.KeepaliveTime, "collector.keepalive-time", grpcclient.DefaultKeepaliveTime, "ping a collector feed after this long without traffic")
	fs.DurationVar(&c.Collector.KeepaliveTimeout, "collector.keepalive-timeout", grpcclient.DefaultKeepaliveTimeout, "treat a feed connection as dead when a ping is not answered within this")
	c.Collector.MaxRecvMsgSize = 64 << 20

	d := lifecycle.DefaultConfig()
	fs.DurationVar(&c.Lifecycle.GracePeriod, "node-monitor-grace-period", d.GracePeriod,
		"a node not heard from (lease renewal, status heartbeat) for this long turns Unknown; several times the reporters' lease renew interval (10s). Kubernetes >=1.32 uses 50s")
	fs.DurationVar(&c.Lifecycle.StartupGracePeriod, "node-startup-grace-period", d.StartupGracePeriod, "grace period of a node that has never reported Ready")
	fs.Float64Var(&c.Lifecycle.EvictionRate, "node-eviction-rate", d.EvictionRate, "NoExecute taints per second per zone while the zone is healthy (or fully down while others are healthy)")
	fs.Float64Var(&c.Lifecycle.SecondaryEvictionRate, "secondary-node-eviction-rate", d.SecondaryEvictionRate, "NoExecute taints per second in a partially disrupted zone larger than --large-cluster-size-threshold (smaller ones stop)")
	fs.Float64Var(&c.Lifecycle.UnhealthyZoneThreshold, "unhealthy-zone-threshold", d.UnhealthyZoneThreshold, "fraction of not-ready nodes (at least 3) that makes a zone partially disrupted")
	fs.IntVar(&c.Lifecycle.LargeClusterSizeThreshold, "large-cluster-size-threshold", d.LargeClusterSizeThreshold, "zones with more nodes keep tainting at the secondary rate when partially disrupted")
	fs.DurationVar(&c.Lifecycle.ClockSkewWarning, "clock-skew-warning", d.ClockSkewWarning, "record a NodeClockSkew warning event for a node whose clock is further than this from its collector's (and NodeClockSkewResolved once within half of it); liveness never depends on node clocks, this only tells (0: no events; the skew is still exported as nodepulse_node_clock_skew_seconds)")
	ad := admission.DefaultConfig()
	fs.Int64Var(&c.Admission.NotReadySeconds, "default-not-ready-toleration-seconds", ad.NotReadySeconds,
		"tolerationSeconds of the node.kubernetes.io/not-ready:NoExecute toleration added to every pod that has none covering it (how long a pod stays on a not-ready node)")
	fs.Int64Var(&c.Admission.UnreachableSeconds, "default-unreachable-toleration-seconds", ad.UnreachableSeconds,
		"tolerationSeconds of the node.kubernetes.io/unreachable:NoExecute toleration added to every pod that has none covering it (how long a pod stays on an unreachable node)")
	fs.DurationVar(&c.EvictionResync, "eviction.resync-period", eviction.DefaultConfig().Resync, "how often the evictor reprocesses every pod on a node with NoExecute taints (retries failed deletions, catches missed changes)")
	fs.DurationVar(&c.PodGCPeriod, "pod-gc-period", podgc.DefaultPeriod, "pause between two pod GC passes on the leader: Terminating pods of out-of-service, not-Ready nodes and of no node are force-deleted, and pods of deleted nodes once their quarantine is over")
	fs.DurationVar(&c.PodGCQuarantine, "pod-gc-quarantine", podgc.DefaultQuarantine, "how long pod GC keeps the pods of a node that does not exist before it checks the store again and force-deletes them (a node that reappears meanwhile saves them)")
	fs.DurationVar(&c.OwnersResync, "owners.resync-period", owners.DefaultResync, "longest pause between two syncs of the ReplicaSet, StatefulSet and DaemonSet controllers and the placement of unbound pods on the leader (any change in the cache starts one at once)")
	fs.DurationVar(&c.MonitorPeriod, "node-monitor-period", 5*time.Second, "pause between two health passes (measured from the end of the previous one)")

	fs.StringVar(&c.ID, "monitor.id", "", "id of this replica in the leader election and in health records (default <hostname>-<random>)")
	fs.DurationVar(&c.ElectionTTL, "monitor.election-ttl", 10*time.Second, "TTL of the leader's etcd session: a crashed leader is replaced within about this long (keep well below the grace period)")
	fs.DurationVar(&c.ProgressInterval, "monitor.progress-interval", 2*time.Second, "how often the etcd watch is asked for a progress notification")
	fs.DurationVar(&c.WatchStaleAfter, "monitor.watch-stale-after", 15*time.Second, "pause judgement when the etcd watch delivered nothing for this long (also: every collector feed stale and no lease advancing)")
	fs.DurationVar(&c.CompactionInterval, "etcd.compaction-interval", 5*time.Minute, "how much of etcd's history the leader keeps: every fifth of this it compacts to the revision it observed one interval earlier, so etcd holds 1 to 1.2 intervals of history (kube-apiserver's --etcd-compaction-interval keeps 1 to 2); a watcher that falls further behind lists again. 0 disables it (run etcd with --auto-compaction-mode/--auto-compaction-retention then)")
	dd := defrag.DefaultConfig()
	c.Defrag = dd
	fs.BoolVar(&c.Defrag.Enabled, "etcd.defrag", dd.Enabled, "after its compactions the leader defragments each etcd member whose file is due (see the --etcd.defrag-* flags), one member at a time, followers first; a member serves nothing while it defragments, about a second per 100 MB. Needs --etcd.compaction-interval > 0")
	fs.Func("etcd.defrag-min-size-mib", fmt.Sprintf("never defragment a member whose database file is smaller than this many `MiB` (default %d)", dd.MinSize>>20), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number of MiB: %w", err)
		}
		c.Defrag.MinSize = n << 20
		return nil
	})
	fs.Float64Var(&c.Defrag.FreePercent, "etcd.defrag-free-percent", dd.FreePercent, "a member is due when at least this percentage of its file is free pages (db size minus db size in use)")
	fs.Float64Var(&c.Defrag.GrowthPercent, "etcd.defrag-growth-percent", dd.GrowthPercent, "a member is also due when its bytes in use grew this percentage beyond the smallest figure seen since its last defragmentation and then stopped growing (within 1 percent over five looks, about five minutes): partly empty pages, which compaction leaves and etcd counts as in use, show only that way")
	fs.DurationVar(&c.Defrag.MinInterval, "etcd.defrag-min-interval", dd.MinInterval, "never defragment one member twice within this")
	c.KubeAPI.RegisterFlags(fs)
	fs.StringVar(&c.OperatorToken, "auth.operator-token", "", "plaintext mode only: bearer token required for changes (cordon, taint, delete); without it anyone may change nodes")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "upper bound of the whole shutdown sequence")
	fs.StringVar(&c.KubeMetrics.Mode, "metrics.kube-state", kubemetrics.ModeLeader,
		"which replicas export the per-node series under kube-state-metrics' names (kube_node_status_condition, kube_node_spec_taint, kube_node_info, kube_lease_renew_time ...) on the admin port's /metrics/kube-state: leader (one series per node across the replicas, as kubernetes-mixin's sums expect), all (every replica; aggregate with max without (instance, pod)), or off")
	fs.Func("metrics.kube-node-labels", "comma-separated node label `keys` exported as label_<key> on kube_node_labels (kube-state-metrics' --metric-labels-allowlist for nodes, exact keys); none by default", func(v string) error {
		c.KubeMetrics.NodeLabels = nil
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				c.KubeMetrics.NodeLabels = append(c.KubeMetrics.NodeLabels, k)
			}
		}
		return nil
	})
	fs.IntVar(&c.GCPercent, "runtime.gc-percent", 200, "Go GC target percentage for this process when the GOGC environment variable is not set (0: Go's default, 100). The monitor caches every node (~0.7 GB live at 100,000 nodes) and each collection cycle takes ~2 CPU-seconds from a shared machine; at 200 cycles came every ~2 minutes (Go's forced collection) instead of every 74-110 s, for ~1.25x the memory (1.8 against 1.44 GB of RSS at 100,000 nodes)")
}

// Validate checks the combination of settings.
func (c *Config) Validate() error {
	errs := []error{c.Lifecycle.Validate()}
	if c.MonitorPeriod <= 0 || c.MonitorPeriod >= c.Lifecycle.GracePeriod {
		errs = append(errs, fmt.Errorf("--node-monitor-period (%s) must be positive and shorter than --node-monitor-grace-period (%s)", c.MonitorPeriod, c.Lifecycle.GracePeriod))
	}
	if c.Admission.NotReadySeconds < 0 || c.Admission.UnreachableSeconds < 0 {
		errs = append(errs, fmt.Errorf("--default-not-ready-toleration-seconds (%d) and --default-unreachable-toleration-seconds (%d) must not be negative",
			c.Admission.NotReadySeconds, c.Admission.UnreachableSeconds))
	}
	if err := c.KubeMetrics.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--metrics.kube-state / --metrics.kube-node-labels: %w", err))
	}
	if c.GCPercent < 0 {
		errs = append(errs, fmt.Errorf("--runtime.gc-percent (%d) must not be negative (to run without a GC target, set GOGC=off with GOMEMLIMIT)", c.GCPercent))
	}
	if c.CompactionInterval < 0 {
		errs = append(errs, fmt.Errorf("--etcd.compaction-interval (%s) must not be negative", c.CompactionInterval))
	}
	if c.Defrag.Enabled {
		if err := c.Defrag.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.EvictionResync <= 0 {
		errs = append(errs, fmt.Errorf("--eviction.resync-period (%s) must be positive", c.EvictionResync))
	}
	if c.PodGCPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--pod-gc-period (%s) must be positive", c.PodGCPeriod))
	}
	if c.OwnersResync < 0 {
		errs = append(errs, fmt.Errorf("--owners.resync-period (%s) must not be negative", c.OwnersResync))
	}
	if c.PodGCQuarantine <= 0 {
		errs = append(errs, fmt.Errorf("--pod-gc-quarantine (%s) must be positive", c.PodGCQuarantine))
	}
	if c.ElectionTTL < time.Second {
		errs = append(errs, fmt.Errorf("--monitor.election-ttl (%s) must be at least 1s", c.ElectionTTL))
	}
	if c.ProgressInterval <= 0 || c.WatchStaleAfter <= c.ProgressInterval {
		errs = append(errs, fmt.Errorf("--monitor.watch-stale-after (%s) must exceed --monitor.progress-interval (%s)", c.WatchStaleAfter, c.ProgressInterval))
	}
	if c.KubeAPI.Insecure && (c.KubeAPI.TLSCert != "" || c.KubeAPI.TLSKey != "") {
		errs = append(errs, errors.New("--kube-api.insecure and --kube-api.tls-cert/--kube-api.tls-key exclude each other"))
	}
	if c.OperatorToken != "" && !c.GRPC.TLS.Insecure {
		errs = append(errs, errors.New("--auth.operator-token only applies with --grpc.insecure; with TLS, operators present certificates"))
	}
	return errors.Join(errs...)
}

// App is a running monitor.
type App struct {
	cfg        Config
	lg         *zap.Logger
	store      nodestore.Store
	closeStore func()
	cache      *cache.Cache
	live       *liveness.Tracker
	ctl        *controller.Controller
	evict      *eviction.Runner
	podGC      *podgc.GC
	disrupt    *disruption.Controller
	owners     *owners.Controller
	compact    *compactor.Compactor
	defrag     *defrag.Defragmenter
	grpc       *grpcserver.Server
	kube       *kubeServer       // nil: the Kubernetes-compatible API is off
	server     *bootstrap.Server // the admin endpoint, and what Run runs
	// kubeState is the registry of the kube_* node series, served on the
	// admin port's KubeStatePath, apart from /metrics.
	kubeState *prometheus.Registry
}

// KubeStatePath is where the admin port serves the kube-state-metrics
// series. They are not on /metrics: at 100,000 nodes one scrape of them is
// 2.8 million series, about 11 CPU-seconds of the leader and 1.3 GB of
// garbage (docs/benchmarks.md), which a scrape of the process's own
// metrics every 30 s must not pay; on a path of their own they get a
// scrape interval of their own, as kubelet's /metrics/cadvisor does.
const KubeStatePath = "/metrics/kube-state"

// ownersMinInterval spaces the owner controllers' syncs: at most ten a
// second however fast the cache changes (each walks every pod).
const ownersMinInterval = 100 * time.Millisecond

// New builds a monitor and listens on its ports at once (":0" works; read
// GRPCAddr and AdminAddr).
func New(cfg Config, lg *zap.Logger, reg *prometheus.Registry) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = bootstrap.InstanceID("monitor")
	}
	a := &App{cfg: cfg, lg: lg}
	var err error
	if a.store, a.closeStore, err = etcdstore.Open(cfg.Store, cfg.Etcd, lg); err != nil {
		return nil, err
	}
	var registerer prometheus.Registerer // nil, not a nil *Registry, when reg is nil
	if reg != nil {
		registerer = reg
	}
	a.cache = cache.New(a.store, cache.Config{ProgressInterval: cfg.ProgressInterval}, lg)
	cm, err := grpcclient.Metrics(registerer)
	if err != nil {
		return nil, a.closeOnErr(err)
	}
	if a.live, err = liveness.New(liveness.Config{Client: cfg.Collector, Watcher: "monitor/" + cfg.ID}, a.cache, lg, registerer, cm); err != nil {
		return nil, a.closeOnErr(err)
	}
	a.ctl, err = controller.New(controller.Config{
		Lifecycle: cfg.Lifecycle, MonitorPeriod: cfg.MonitorPeriod, TaintPeriod: 100 * time.Millisecond,
		ElectionTTL: cfg.ElectionTTL, WatchStaleAfter: cfg.WatchStaleAfter, Identity: cfg.ID,
	}, a.store, a.cache, a.live, lg, registerer)
	if err != nil {
		return nil, a.closeOnErr(err)
	}
	ec := eviction.DefaultConfig()
	ec.Resync = cfg.EvictionResync
	ec.Election = controller.ElectionName
	if a.evict, err = eviction.New(ec, a.store, a.cache, a.ctl, lg, registerer); err != nil {
		return nil, a.closeOnErr(err)
	}
	if a.podGC, err = podgc.New(podgc.Config{Period: cfg.PodGCPeriod, Quarantine: cfg.PodGCQuarantine}, a.store, a.cache, a.ctl, lg, registerer); err != nil {
		return nil, a.closeOnErr(err)
	}
	a.disrupt = disruption.New(disruption.Config{}, a.store, a.cachedPods, a.ctl, lg)
	a.owners = owners.New(owners.Config{Resync: cfg.OwnersResync, MinInterval: ownersMinInterval, Admission: cfg.Admission}, a.store, a.cache, owners.CacheSource{Cache: a.cache, StoreSource: owners.StoreSource{Store: a.store}}, a.ctl, lg)
	if err := a.owners.Register(registerer); err != nil {
		return nil, a.closeOnErr(err)
	}
	km := cfg.KubeMetrics
	km.Leading = a.ctl.Leading
	kubeState, err := kubemetrics.New(km, a.cache, a.live)
	if err != nil {
		return nil, a.closeOnErr(err)
	}
	a.kubeState = prometheus.NewRegistry()
	if err := a.kubeState.Register(kubeState); err != nil {
		return nil, a.closeOnErr(err)
	}
	a.evict.SetGC(eviction.GC{Period: a.podGC.Period(), Quarantine: a.podGC.Quarantine(), Queued: a.podGC.Queued})
	upkeep, _ := a.store.(nodestore.Maintenance) // nil: this store has no upkeep (memstore)
	if a.defrag, err = defrag.New(cfg.Defrag, upkeep, a.ctl, lg, registerer); err != nil {
		return nil, a.closeOnErr(err)
	}
	if a.compact, err = compactor.New(compactor.Config{Interval: cfg.CompactionInterval, Compacted: a.defrag.Compacted}, upkeep, a.ctl, lg, registerer); err != nil {
		return nil, a.closeOnErr(err)
	}
	auth := authz.GRPC{Policy: authz.Policy{Plaintext: cfg.GRPC.TLS.Insecure, OperatorToken: cfg.OperatorToken}, Log: lg.Named("auth")}
	a.grpc, err = grpcserver.New(cfg.GRPC, lg, registerer, grpcserver.Options{
		Unary:  []grpc.UnaryServerInterceptor{auth.Unary()},
		Stream: []grpc.StreamServerInterceptor{auth.Stream()},
	})
	if err != nil {
		return nil, a.closeOnErr(err)
	}
	nodeAPI := api.New(a.store, a.cache, lifecycleView{a.ctl, a.store}, a.live, lg, nil)
	nodeAPI.SetEvictor(a.evict)
	podAPI := api.NewPodServer(a.store, a.cache, a.evict, cfg.Admission, lg, nil)
	workloadAPI := api.NewWorkloadServer(a.store, a.cache, lg, nil)
	budgetAPI := api.NewBudgetServer(a.store, a.cache, lg, nil)
	nodev1.RegisterNodeServiceServer(a.grpc, nodeAPI)
	podv1.RegisterPodServiceServer(a.grpc, podAPI)
	appsv1.RegisterWorkloadServiceServer(a.grpc, workloadAPI)
	policyv1.RegisterDisruptionBudgetServiceServer(a.grpc, budgetAPI)
	a.kube, err = newKubeServer(cfg.KubeAPI, cfg.GRPC.TLS, kubeapi.Backends{
		Nodes: nodeAPI, Pods: podAPI, Workloads: workloadAPI, Budgets: budgetAPI,
		Policy: authz.Policy{Plaintext: cfg.KubeAPI.Insecure, OperatorToken: cfg.OperatorToken},
	}, lg, registerer)
	if err != nil {
		a.grpc.Stop()
		return nil, a.closeOnErr(err)
	}
	if a.server, err = bootstrap.NewServer(cfg.Admin, lg, reg); err != nil {
		a.grpc.Stop()
		return nil, a.closeOnErr(err)
	}
	if ad := a.server.Admin(); ad != nil {
		ad.Handle(KubeStatePath, promhttp.HandlerFor(a.kubeState, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	}
	a.server.AddReadyCheck("cache", a.cacheReady)
	a.server.AddReadyCheck("judgement", a.judgementReady)
	if cfg.GRPC.TLS.Insecure && cfg.OperatorToken == "" {
		lg.Warn("PLAINTEXT and no --auth.operator-token: ANYONE who can reach the gRPC port may cordon, taint and delete nodes and create and delete pods; development only",
			zap.String("grpc", a.grpc.Addr().String()))
	}
	lg.Info("monitor configured", zap.String("id", cfg.ID), zap.String("grpc", a.grpc.Addr().String()), zap.String("version", version.String()),
		zap.Duration("grace", cfg.Lifecycle.GracePeriod), zap.Duration("startupGrace", cfg.Lifecycle.StartupGracePeriod),
		zap.Duration("period", cfg.MonitorPeriod), zap.Duration("electionTTL", cfg.ElectionTTL),
		zap.Int64("defaultNotReadyTolerationSeconds", cfg.Admission.NotReadySeconds), zap.Int64("defaultUnreachableTolerationSeconds", cfg.Admission.UnreachableSeconds))
	return a, nil
}

func (a *App) closeOnErr(err error) error {
	a.closeStore()
	return err
}

func (a *App) cacheReady() error {
	if !a.cache.Synced() {
		return errors.New("watch cache not synced yet")
	}
	return nil
}

// judgementReady fails while the leader pauses judgement, and on any
// replica while its etcd watch is silent: it would serve a stale fleet.
func (a *App) judgementReady() error {
	if r := a.ctl.Paused(); r != "" {
		return errors.New("judgement paused: " + r)
	}
	if a.cache.Synced() {
		if age := time.Since(a.cache.LastBatch()); age > a.cfg.WatchStaleAfter {
			return fmt.Errorf("etcd watch silent for %s (bound %s): serving a stale view", age.Round(time.Millisecond), a.cfg.WatchStaleAfter)
		}
	}
	return nil
}

// Ready is the admin readiness state (nil when ready).
func (a *App) Ready() error { return errors.Join(a.cacheReady(), a.judgementReady()) }

// GRPCAddr is the bound gRPC address.
func (a *App) GRPCAddr() string { return a.grpc.Addr().String() }

// AdminAddr is the bound admin address ("" when disabled).
func (a *App) AdminAddr() string { return a.server.AdminAddr() }

// KubeStateGatherer gathers the kube_* node series (what KubeStatePath
// serves).
func (a *App) KubeStateGatherer() prometheus.Gatherer { return a.kubeState }

// KubeAPIAddr is the bound address of the Kubernetes-compatible API ("" when
// it is off).
func (a *App) KubeAPIAddr() string {
	if a.kube == nil {
		return ""
	}
	return a.kube.ln.Addr().String()
}

// ID of this replica.
func (a *App) ID() string { return a.cfg.ID }

// Leading reports whether this replica leads.
func (a *App) Leading() bool { return a.ctl.Leading() }

// Fence returns this replica's leadership fence while it leads (tests use
// it to prove a deposed leader's writes are rejected).
func (a *App) Fence() (nodestore.Fence, bool) { return a.ctl.Fence() }

// cachedPods are the pods the disruption controller counts: the watch
// cache's, once it has its first view (before, a budget would be computed
// over no pods and allow nothing for no reason).
func (a *App) cachedPods(context.Context) ([]*podv1.Pod, error) {
	if !a.cache.Synced() {
		return nil, errors.New("the watch cache has no view yet")
	}
	entries, _ := a.cache.Pods()
	out := make([]*podv1.Pod, len(entries))
	for i, pe := range entries {
		out[i] = pe.Pod
	}
	return out, nil
}

// Run serves until ctx ends.
func (a *App) Run(ctx context.Context) error {
	defer a.closeStore()
	g := a.server
	g.Add("cache", run.Func(a.cache.Run))
	g.Add("liveness", run.Func(a.live.Run))
	g.Add("controller", run.Func(a.ctl.Run))
	g.Add("evictor", run.Func(a.evict.Run))
	g.Add("podgc", run.Func(a.podGC.Run))
	g.Add("disruption", run.Func(a.disrupt.Run))
	g.Add("owners", run.Func(a.owners.Run))
	g.Add("compactor", run.Func(a.compact.Run))
	g.Add("defrag", run.Func(a.defrag.Run))
	g.Add("grpc", a.grpc)
	if a.kube != nil {
		g.Add("kube-api", a.kube)
	}
	g.Add("serving", run.Func(a.serving))
	err := g.Run(ctx, a.cfg.ShutdownTimeout)
	a.lg.Info("monitor stopped")
	return err
}

// serving turns gRPC health SERVING once the cache has its first view:
// before that every answer would be an empty fleet.
func (a *App) serving(ctx context.Context) error {
	for !a.cache.Synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-a.cache.Changed():
		}
	}
	a.grpc.SetServing(true, nodev1.NodeService_ServiceDesc.ServiceName)
	a.grpc.SetServing(true, podv1.PodService_ServiceDesc.ServiceName)
	a.grpc.SetServing(true, appsv1.WorkloadService_ServiceDesc.ServiceName)
	a.grpc.SetServing(true, policyv1.DisruptionBudgetService_ServiceDesc.ServiceName)
	<-ctx.Done()
	return nil
}

// Main parses args and the environment, then runs a monitor until ctx ends.
func Main(ctx context.Context, args []string) error {
	var cfg Config
	svc := bootstrap.New("monitor", synopsis, &cfg.Log)
	cfg.RegisterFlags(svc.Flags)
	svc.GCPercent = &cfg.GCPercent
	return svc.Run(ctx, args, func() (run.Component, error) { return New(cfg, svc.Logger, svc.Registry) })
}
