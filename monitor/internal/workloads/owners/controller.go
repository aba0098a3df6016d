// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package owners

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/placement"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// DefaultResync is the longest pause between two syncs without a change
// in the cache.
const DefaultResync = 5 * time.Second

// Metric names.
const (
	MetricCreated = "nodepulse_monitor_owners_pods_created_total"
	MetricDeleted = "nodepulse_monitor_owners_pods_deleted_total"
	MetricPlaced  = "nodepulse_monitor_placement_pods_placed_total"
	MetricSyncs   = "nodepulse_monitor_owners_syncs_total"
)

// Source gives the controllers the owners and takes their status. The
// stored kinds of the owners live behind it, so the decisions here do not
// depend on their wire form.
type Source interface {
	// Owners lists every ReplicaSet, StatefulSet and DaemonSet, read
	// after the cache's pods (so every pod's existing owner is listed);
	// an error means the list may be incomplete.
	Owners(ctx context.Context) ([]Owner, error)
	// SetStatus writes st as o's status (a no-op when it is unchanged),
	// fenced.
	SetStatus(ctx context.Context, fence *nodestore.Fence, o Owner, st Status) error
}

// Leader is what the controllers need of the lifecycle controller.
type Leader interface {
	leadership.Leader
	// Paused is why judgement is paused ("" when it is not): the cache may
	// be stale, so nothing is decided until it is fresh again.
	Paused() string
}

// Config of the controllers.
type Config struct {
	// Resync: zero means DefaultResync.
	Resync time.Duration
	// Admission: the defaults every created pod gets, as PodService applies
	// them.
	Admission admission.Config
	// MinInterval is the shortest pause between two syncs started by
	// changes (zero: none). Every cache batch is a change, lease
	// checkpoints and events included, and a sync walks every pod, so a
	// busy fleet would otherwise sync at its batch rate.
	MinInterval time.Duration
	// Now is the clock; After waits (tests inject both).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Controller runs the owner controllers and the placement loop on the
// leader.
type Controller struct {
	cfg    Config
	store  nodestore.Store
	cache  *cache.Cache
	src    Source
	leader Leader
	lg     *zap.Logger

	// minRev: the revision of this leadership's last write; a sync waits
	// until the cache has seen it, so it never decides on a state older
	// than its own writes (upstream's expectations, by revision).
	// Atomic: tests call Sync beside Run.
	minRev           atomic.Int64
	created, deleted *prometheus.CounterVec
	placed, syncs    prometheus.Counter

	// syncMu serialises syncs (tests call Sync beside Run): two at once
	// would both create what one state lacks.
	syncMu sync.Mutex
}

// New builds the controllers; src may be nil (only placement runs).
func New(cfg Config, store nodestore.Store, c *cache.Cache, src Source, leader Leader, lg *zap.Logger) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	return &Controller{cfg: cfg, store: store, cache: c, src: src, leader: leader, lg: lg.Named("owners"),
		created: metric.CounterVec(MetricCreated, "Pods created by the owner controllers, by owner kind.", "kind"),
		deleted: metric.CounterVec(MetricDeleted, "Pods deleted (gracefully) by the owner controllers, by owner kind (\"deleted\": the owner is gone).", "kind"),
		placed:  metric.Counter(MetricPlaced, "Unbound pods bound to a node by placement (pods created already placed included)."),
		syncs:   metric.Counter(MetricSyncs, "Syncs of the owner controllers and placement on the leader."),
	}
}

// Register adds the controllers' metrics to reg (nil: none).
func (c *Controller) Register(reg prometheus.Registerer) error {
	for _, k := range []string{KindReplicaSet, KindStatefulSet, KindDaemonSet} {
		c.created.WithLabelValues(k)
		c.deleted.WithLabelValues(k)
	}
	if err := metric.Register(reg, c.created, c.deleted, c.placed, c.syncs); err != nil {
		return fmt.Errorf("register owner controller metrics: %w", err)
	}
	return nil
}

// Run follows the leadership until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	leadership.Follow(ctx, c.leader, func(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) {
		c.lead(ctx, fence, done)
	})
	return nil
}

func (c *Controller) lead(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) {
	// Every write of the previous leader that landed has a revision below
	// this leadership's key (its fence compare failed after that), so once
	// the cache has reached the fence revision it has seen them all: no
	// pod is created or evicted a second time across a failover.
	c.minRev.Store(fence.Revision)
	var last time.Time // when the last sync started
	for {
		changed := c.cache.Changed()
		last = c.cfg.Now()
		if err := c.Sync(ctx, fence); errors.Is(err, nodestore.ErrFenced) {
			c.lg.Warn("owner controllers stopped: no longer the leader")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-changed:
			if wait := last.Add(c.cfg.MinInterval).Sub(c.cfg.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-done:
					return
				case <-c.cfg.After(wait):
				}
			}
		case <-c.cfg.After(c.cfg.Resync):
		}
	}
}

// Sync runs every owner's controller once, then places the unbound pods.
// Only a lost fence is returned; other failures are logged and retried at
// the next sync. Exported for tests.
func (c *Controller) Sync(ctx context.Context, fence nodestore.Fence) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	if why := c.leader.Paused(); why != "" {
		c.lg.Debug("owner sync skipped: judgement paused", zap.String("why", why))
		return nil
	}
	if !c.cache.Synced() || c.cache.Revision() < c.minRev.Load() {
		return nil // the cache has not seen our last write yet: the next change brings it
	}
	c.syncs.Inc()
	now := c.cfg.Now()
	entries, _ := c.cache.Pods()
	pods := make([]*podv1.Pod, len(entries))
	for i, e := range entries {
		pods[i] = e.Pod
	}
	s := &syncer{c: c, ctx: ctx, fence: fence, now: now, pods: pods}
	if c.src != nil {
		owners, err := c.src.Owners(ctx)
		if err != nil {
			c.lg.Warn("cannot list owners; retrying at the next sync", zap.Error(err))
		}
		for _, o := range owners {
			if err := s.owner(o); err != nil {
				return err
			}
		}
		// Only from a complete list: a missing owner must mean a deleted one.
		if err == nil {
			lg := c.lg.With(zap.String("owner", "deleted"))
			if err := s.delete(lg, "deleted", Orphans(owners, pods)); err != nil {
				return err
			}
		}
	}
	for _, e := range entries {
		if err := s.place(e); err != nil {
			return err
		}
	}
	return nil
}

// syncer is the state of one sync.
type syncer struct {
	c     *Controller
	ctx   context.Context
	fence nodestore.Fence
	now   time.Time
	// nodes: read from the cache once per sync, and only by a sync that
	// needs them (a DaemonSet, or a pod to place). A sync starts on every
	// cache change, at 100,000 nodes several times a second, and a sorted
	// copy of every node each time cost the leader most of a core.
	nodes     []*nodev1.Node
	haveNodes bool
	// pods: the cache's pods plus those this sync created or bound, so
	// placement spreads within a sync too.
	pods []*podv1.Pod
}

func (s *syncer) allNodes() []*nodev1.Node {
	if !s.haveNodes {
		s.nodes, _ = s.c.cache.Nodes()
		s.haveNodes = true
	}
	return s.nodes
}

func (s *syncer) wrote(rev int64) {
	for {
		cur := s.c.minRev.Load()
		if rev <= cur || s.c.minRev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

func (s *syncer) owner(o Owner) error {
	if !Managed(o) {
		s.c.lg.Debug("owner left alone: no selector, or it does not select its template",
			zap.String("owner", o.Kind+"/"+o.Namespace+"/"+o.Name))
		return nil
	}
	var plan Plan
	switch o.Kind {
	case KindReplicaSet:
		plan = ReplicaSet(o, s.pods)
	case KindStatefulSet:
		plan = StatefulSet(o, s.pods)
	case KindDaemonSet:
		plan = DaemonSet(o, DaemonTolerations(o, s.c.cfg.Admission), s.allNodes(), s.pods)
	default:
		return nil
	}
	lg := s.c.lg.With(zap.String("owner", o.Kind+"/"+o.Namespace+"/"+o.Name))
	if plan.Waiting != "" {
		lg.Debug(plan.Waiting)
	}
	if err := s.delete(lg, o.Kind, plan.Delete); err != nil {
		return err
	}
	for _, p := range plan.Create {
		if err := s.create(lg, o, p); err != nil {
			return err
		}
	}
	if o.Stored != nil && *o.Stored == plan.Status {
		return nil // unchanged: no read, no write
	}
	if err := s.c.src.SetStatus(s.ctx, &s.fence, o, plan.Status); errors.Is(err, nodestore.ErrFenced) {
		return err
	} else if err != nil {
		lg.Warn("cannot write owner status; retrying at the next sync", zap.Error(err))
	}
	return nil
}

// delete deletes pods gracefully (podlife.Delete, their UID as
// precondition, fenced); only a lost fence is returned.
func (s *syncer) delete(lg *zap.Logger, kind string, pods []*podv1.Pod) error {
	for _, p := range pods {
		md := p.GetMetadata()
		_, _, rev, err := podlife.DeleteRevision(s.ctx, s.c.store, md.GetNamespace(), md.GetName(), podlife.DeleteOptions{UID: md.GetUid(), Fence: &s.fence}, s.now)
		switch {
		case errors.Is(err, nodestore.ErrFenced):
			return err
		case errors.Is(err, nodestore.ErrNotFound), errors.Is(err, podlife.ErrPrecondition):
		case err != nil:
			lg.Warn("cannot delete pod; retrying at the next sync", zap.String("pod", md.GetName()), zap.Error(err))
		default:
			s.wrote(rev)
			s.c.deleted.WithLabelValues(kind).Inc()
			lg.Info("pod deleted by its owner", zap.String("pod", md.GetNamespace()+"/"+md.GetName()), zap.String("node", p.GetSpec().GetNodeName()))
		}
	}
	return nil
}

// create admits p as PodService would, names it when unnamed, places it
// when unbound, and stores it if the name is free.
func (s *syncer) create(lg *zap.Logger, o Owner, p *podv1.Pod) error {
	if p.Metadata.Name == "" {
		p.Metadata.Name = generateName(o.Name)
	}
	stored, errs := s.c.cfg.Admission.Admit(p, s.now, validation.DefaultLimits())
	if err := errs.Err(); err != nil {
		lg.Warn("owner's pod refused by admission", zap.String("pod", p.Metadata.Name), zap.Error(err))
		return nil
	}
	stored.Metadata.Namespace, stored.Metadata.Name = p.Metadata.Namespace, p.Metadata.Name
	if stored.Spec.NodeName == "" {
		s.bind(stored)
	} else {
		// A DaemonSet pod is placed by name, as upstream's node affinity
		// on metadata.name: it is scheduled at creation.
		s.scheduled(stored, nodemodel.True, "", "")
	}
	rev, err := s.c.store.Apply(s.ctx, &s.fence, nodestore.Op{Kind: nodestore.Pods, Name: cache.PodKey(o.Namespace, stored.Metadata.Name), Value: stored, IfAbsent: true})
	switch {
	case errors.Is(err, nodestore.ErrFenced):
		return err
	case errors.Is(err, nodestore.ErrConflict):
		lg.Info("pod name taken; retrying at the next sync", zap.String("pod", stored.Metadata.Name))
	case err != nil:
		lg.Warn("cannot create pod; retrying at the next sync", zap.String("pod", stored.Metadata.Name), zap.Error(err))
	default:
		s.wrote(rev)
		s.c.created.WithLabelValues(o.Kind).Inc()
		if stored.Spec.NodeName != "" {
			s.c.placed.Inc()
		}
		s.pods = append(s.pods, stored)
		lg.Info("pod created by its owner", zap.String("pod", stored.Metadata.Name), zap.String("node", stored.Spec.NodeName))
	}
	return nil
}

// bind places an unbound pod in place: spec.nodeName and PodScheduled
// True, or PodScheduled False/Unschedulable with the reasons. It reports
// whether the pod changed.
func (s *syncer) bind(p *podv1.Pod) bool {
	r := placement.Place(s.allNodes(), s.pods, p)
	if r.Node == "" {
		return s.scheduled(p, nodemodel.False, placement.ReasonUnschedulablePod, r.Message)
	}
	p.Spec.NodeName = r.Node
	s.scheduled(p, nodemodel.True, "", "")
	return true
}

func (s *syncer) scheduled(p *podv1.Pod, status, reason, msg string) bool {
	if p.Status == nil {
		p.Status = &podv1.PodStatus{}
	}
	return podutil.SetCondition(p.Status, &podv1.PodCondition{Type: placement.ConditionPodScheduled, Status: status, Reason: reason, Message: msg}, s.now)
}

// place binds one cached pod that needs it: unbound, neither terminating
// nor terminal (any owner, and bare pods).
func (s *syncer) place(e cache.PodEntry) error {
	p := e.Pod
	if p.GetSpec().GetNodeName() != "" || podlife.IsTerminating(p) || podlife.IsTerminal(p) {
		return nil
	}
	np := podutil.Stored(p)
	if np.Spec == nil {
		np.Spec = &podv1.PodSpec{}
	}
	if !s.bind(np) {
		return nil
	}
	md := p.GetMetadata()
	rev, err := s.c.store.Apply(s.ctx, &s.fence, nodestore.Op{Kind: nodestore.Pods, Name: cache.PodKey(md.GetNamespace(), md.GetName()), Value: np, IfModRevision: e.ModRevision})
	switch {
	case errors.Is(err, nodestore.ErrFenced):
		return err
	case errors.Is(err, nodestore.ErrConflict):
		// Changed meanwhile: the watch brings it back to the next sync.
	case err != nil:
		s.c.lg.Warn("cannot place pod; retrying at the next sync", zap.String("pod", md.GetNamespace()+"/"+md.GetName()), zap.Error(err))
	default:
		s.wrote(rev)
		if n := np.Spec.NodeName; n != "" {
			s.c.placed.Inc()
			s.pods = append(s.pods, np)
			s.c.lg.Info("pod placed", zap.String("pod", md.GetNamespace()+"/"+md.GetName()), zap.String("node", n))
		}
	}
	return nil
}

// generateName is upstream's generateName: the base (cut to 58
// characters) and 5 characters of the alphabet Kubernetes uses (no vowels,
// no look-alike digits).
func generateName(base string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	if len(base) > 58 {
		base = base[:58]
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 5)
	for i, v := range b {
		out[i] = alphabet[int(v)%len(alphabet)]
	}
	return fmt.Sprintf("%s-%s", base, out)
}
