// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package podgc is the pod garbage collector (spec §12.4, upstream
// pkg/controller/podgc): on the leader, every Period, it force-deletes the
// pods nothing else will ever remove —
//
//   - Terminating pods on a node that exists, is not Ready and carries the
//     node.kubernetes.io/out-of-service taint (any effect): the operator
//     says the machine is off, so its reporter will never confirm;
//   - pods bound to a node that does not exist: the node name is
//     quarantined for Quarantine (a node that reappears meanwhile saves its
//     pods), then checked again against the store itself, not the cache,
//     and its pods get DisruptionTarget=True/DeletionByPodGC;
//   - Terminating pods bound to no node.
//
// Force deletion is podlife.ForceDelete: a non-terminal pod is first set
// Failed (with the condition), then removed with grace 0, conditional on
// the UID the pass saw and fenced by the leadership. Each pass deletes at
// most MaxPerPass pods (the rest wait for the next pass), so a mass node
// deletion does not turn into a burst of writes on etcd.
//
// Upstream's terminated-pod threshold (--terminated-pod-gc-threshold,
// 12500) is not implemented: nodepulse stores no pod history for it to trim
// (an orchestrator removes its own finished pods).
package podgc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// Defaults of upstream's pod GC (gcCheckPeriod, quarantineTime).
const (
	DefaultPeriod     = 20 * time.Second
	DefaultQuarantine = 40 * time.Second
	// DefaultMaxPerPass bounds the deletions of one pass.
	DefaultMaxPerPass = 500
)

// Paths of a force deletion (label "path" of MetricDeleted).
const (
	PathOutOfService = "out_of_service"
	PathOrphaned     = "orphaned"
	PathUnscheduled  = "unscheduled_terminating"
)

// Event strings. Upstream's pod GC only logs; nodepulse records an event on
// the pod too, so `nodepulse describe pod` and the event list say who
// removed it.
const (
	EventSource = "pod-garbage-collector"
	EventReason = podlife.ReasonPodGC
	eventTTL    = time.Hour
)

// Metric names.
const (
	MetricDeleted     = "nodepulse_monitor_podgc_deleted_total"
	MetricFailed      = "nodepulse_monitor_podgc_failures_total"
	MetricQuarantined = "nodepulse_monitor_podgc_quarantined_nodes"
)

// Leader is what pod GC needs from the lifecycle controller.
type Leader interface {
	leadership.Leader
	// Paused is why judgement is paused ("" when it is not): the cache may
	// be stale, so nothing is collected until it is fresh again.
	Paused() string
}

// Config of pod GC.
type Config struct {
	// Period between passes (--pod-gc-period); zero means DefaultPeriod.
	Period time.Duration
	// Quarantine of a missing node before its pods go (--pod-gc-quarantine);
	// zero means DefaultQuarantine.
	Quarantine time.Duration
	// MaxPerPass bounds the deletions of one pass; zero means
	// DefaultMaxPerPass.
	MaxPerPass int
	// Now is the clock; After waits (tests inject both).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// GC runs pod GC on the leader.
type GC struct {
	cfg    Config
	store  nodestore.Store
	cache  *cache.Cache
	leader Leader
	lg     *zap.Logger

	deleted     *prometheus.CounterVec
	failed      prometheus.Counter
	quarantined prometheus.Gauge

	mu      sync.Mutex
	leading bool
	// queued: missing node → when a pass first saw it missing.
	queued map[string]time.Time
}

// New builds pod GC; call Run.
func New(cfg Config, store nodestore.Store, c *cache.Cache, leader Leader, lg *zap.Logger, reg prometheus.Registerer) (*GC, error) {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Quarantine <= 0 {
		cfg.Quarantine = DefaultQuarantine
	}
	if cfg.MaxPerPass <= 0 {
		cfg.MaxPerPass = DefaultMaxPerPass
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	g := &GC{cfg: cfg, store: store, cache: c, leader: leader, lg: lg.Named("podgc"),
		deleted: metric.CounterVec(MetricDeleted,
			"Pods force-deleted by pod GC, by path: out_of_service, orphaned, unscheduled_terminating.", "path"),
		failed: metric.Counter(MetricFailed,
			"Pod GC force deletions that failed (retried at the next pass)."),
		quarantined: metric.Gauge(MetricQuarantined,
			"Missing nodes whose pods pod GC holds in quarantine on the leader."),
	}
	for _, p := range []string{PathOutOfService, PathOrphaned, PathUnscheduled} {
		g.deleted.WithLabelValues(p)
	}
	if err := metric.Register(reg, g.deleted, g.failed, g.quarantined); err != nil {
		return nil, fmt.Errorf("register pod GC metrics: %w", err)
	}
	return g, nil
}

// Period is the pause between passes, as configured.
func (g *GC) Period() time.Duration { return g.cfg.Period }

// Quarantine is how long a missing node's pods are kept, as configured.
func (g *GC) Quarantine() time.Duration { return g.cfg.Quarantine }

// Queued returns when this replica, leading, first saw node missing.
func (g *GC) Queued(node string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.queued[node]
	return t, ok && g.leading
}

// Run follows the controller's leadership until ctx ends: while this
// replica leads, it collects every Period.
func (g *GC) Run(ctx context.Context) error {
	leadership.Follow(ctx, g.leader, func(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) {
		g.lead(ctx, fence, done)
	})
	return nil
}

func (g *GC) lead(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) {
	g.mu.Lock()
	// Quarantines start afresh with each leadership: a new leader waits a
	// full Quarantine from its own first sight (later, never earlier).
	g.leading, g.queued = true, map[string]time.Time{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.leading, g.queued = false, nil
		g.mu.Unlock()
		g.quarantined.Set(0)
	}()
	for {
		// As upstream, the first pass runs at once, then every Period.
		if err := g.Pass(ctx, fence); errors.Is(err, nodestore.ErrFenced) {
			g.lg.Warn("pod GC stopped: no longer the leader")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-g.cfg.After(g.cfg.Period):
		}
	}
}

// Pass runs one collection with the leadership's fence; it returns
// nodestore.ErrFenced when the leadership is lost. Exported for tests.
func (g *GC) Pass(ctx context.Context, fence nodestore.Fence) error {
	if why := g.leader.Paused(); why != "" {
		g.lg.Debug("pod GC pass skipped: judgement paused", zap.String("why", why))
		return nil
	}
	now := g.cfg.Now()
	pods, _ := g.cache.Pods()
	p := &pass{g: g, ctx: ctx, fence: fence, now: now, budget: g.cfg.MaxPerPass}

	// Upstream order: terminating on out-of-service nodes, orphans,
	// unscheduled terminating.
	for _, pe := range pods {
		nn := pe.Pod.GetSpec().GetNodeName()
		if !podlife.IsTerminating(pe.Pod) || nn == "" {
			continue
		}
		if n, ok := g.cache.Node(nn); ok && OutOfService(n) {
			if err := p.force(pe, nil, PathOutOfService, "PodGC: force-deleting a terminating pod on out-of-service node "+nn); err != nil {
				return err
			}
		}
	}
	if err := p.orphans(pods); err != nil {
		return err
	}
	for _, pe := range pods {
		if podlife.IsTerminating(pe.Pod) && pe.Pod.GetSpec().GetNodeName() == "" {
			if err := p.force(pe, nil, PathUnscheduled, "PodGC: force-deleting a terminating pod bound to no node"); err != nil {
				return err
			}
		}
	}
	return nil
}

// OutOfService reports whether pod GC force-deletes the Terminating pods of
// node: a taint with the out-of-service key (any value, any effect) and
// Ready not True (upstream gcTerminating).
func OutOfService(n *nodev1.Node) bool {
	if nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready).GetStatus() == nodemodel.True {
		return false
	}
	return slices.ContainsFunc(n.GetSpec().GetTaints(), func(t *nodev1.Taint) bool { return t.GetKey() == nodemodel.TaintOutOfService })
}

// pass is the state of one collection.
type pass struct {
	g      *GC
	ctx    context.Context
	fence  nodestore.Fence
	now    time.Time
	budget int
	capped bool
}

// orphans quarantines missing nodes and force-deletes the pods of those
// whose quarantine is over and which the store confirms are gone.
func (p *pass) orphans(pods []cache.PodEntry) error {
	g := p.g
	missing := map[string][]cache.PodEntry{}
	for _, pe := range pods {
		nn := pe.Pod.GetSpec().GetNodeName()
		if nn == "" {
			continue
		}
		if _, ok := g.cache.Node(nn); !ok {
			missing[nn] = append(missing[nn], pe)
		}
	}
	g.mu.Lock()
	for n := range g.queued {
		if _, ok := missing[n]; !ok {
			delete(g.queued, n) // the node is back, or its pods are gone
		}
	}
	var due []string
	for n := range missing {
		at, ok := g.queued[n]
		switch {
		case !ok:
			g.queued[n] = p.now
			g.lg.Info("pods bound to a missing node; quarantined before pod GC removes them", zap.String("node", n),
				zap.Int("pods", len(missing[n])), zap.Duration("quarantine", g.cfg.Quarantine))
		case !p.now.Before(at.Add(g.cfg.Quarantine)):
			due = append(due, n)
		}
	}
	g.quarantined.Set(float64(len(g.queued)))
	g.mu.Unlock()
	slices.Sort(due)
	cond := &podv1.PodCondition{Type: podlife.DisruptionTarget, Status: nodemodel.True, Reason: podlife.ReasonPodGC, Message: podlife.MessagePodGCOrphan}
	for _, n := range due {
		// The cache may lag: ask the store itself, as upstream asks the API
		// server rather than its informer.
		_, err := g.store.Get(p.ctx, nodestore.Nodes, n)
		if err == nil {
			g.mu.Lock()
			delete(g.queued, n)
			g.mu.Unlock()
			g.lg.Info("missing node exists again; its pods are kept", zap.String("node", n))
			continue
		}
		if !errors.Is(err, nodestore.ErrNotFound) {
			g.lg.Warn("cannot check a missing node; retrying at the next pass", zap.String("node", n), zap.Error(err))
			continue
		}
		for _, pe := range missing[n] {
			if err := p.force(pe, cond, PathOrphaned, podlife.MessagePodGCOrphan); err != nil {
				return err
			}
		}
	}
	return nil
}

// force force-deletes one pod and records it; only a lost fence is
// returned, every other failure is logged and retried next pass.
func (p *pass) force(pe cache.PodEntry, cond *podv1.PodCondition, path, msg string) error {
	g := p.g
	md := pe.Pod.GetMetadata()
	key := cache.PodKey(md.GetNamespace(), md.GetName())
	if p.budget <= 0 {
		if !p.capped {
			p.capped = true
			g.lg.Info("pod GC reached its deletions per pass; the rest wait for the next pass", zap.Int("max", g.cfg.MaxPerPass))
		}
		return nil
	}
	p.budget--
	last, err := podlife.ForceDelete(p.ctx, g.store, md.GetNamespace(), md.GetName(), md.GetUid(), cond, &p.fence, p.now)
	switch {
	case errors.Is(err, nodestore.ErrFenced):
		g.failed.Inc()
		return err
	case errors.Is(err, nodestore.ErrNotFound), errors.Is(err, podlife.ErrPrecondition):
		return nil // gone, or another pod under the name now
	case err != nil:
		g.failed.Inc()
		g.lg.Warn("pod GC cannot delete pod; retrying at the next pass", zap.String("pod", key), zap.String("path", path), zap.Error(err))
		return nil
	}
	g.deleted.WithLabelValues(path).Inc()
	g.lg.Info("pod force-deleted by pod GC", zap.String("pod", key), zap.String("node", pe.Pod.GetSpec().GetNodeName()), zap.String("path", path))
	p.event(last, msg)
	return nil
}

// event records a pod event (best effort, fenced).
func (p *pass) event(pod *podv1.Pod, msg string) {
	md := pod.GetMetadata()
	ts := nodemodel.Timestamp(p.now)
	name := md.GetName() + "." + strconv.FormatInt(p.now.UnixNano(), 16)
	ev := &nodev1.Event{
		Metadata:       &nodev1.ObjectMeta{Name: name, Namespace: md.GetNamespace(), CreationTimestamp: ts},
		InvolvedObject: &nodev1.ObjectReference{Kind: "Pod", Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid()},
		Reason:         EventReason, Message: msg, Type: "Normal", Source: EventSource,
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
	}
	if _, err := p.g.store.Apply(p.ctx, &p.fence, nodestore.Op{Kind: nodestore.Events, Name: md.GetNamespace() + "/" + name, Value: ev, TTL: eventTTL}); err != nil {
		p.g.lg.Warn("cannot record event", zap.String("pod", md.GetNamespace()+"/"+md.GetName()), zap.Error(err))
	}
}
