// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package eviction is the taint-eviction controller (spec §7): pods on a
// node with NoExecute taints are deleted at once when a taint is not
// tolerated, or after the smallest tolerationSeconds of their matching
// tolerations, counted from when the evictor processed the taint.
//
// The decisions are pure (Matcher.Decide, injected now); Runner applies them
// on the leader, with every write fenced by the leader's election key and
// conditional on the pod's ModRevision and on the ModRevisions of the node's
// records the decision was made from (markAndDelete). The same decisions
// put a pod's fate in words for ExplainPod and ExplainNode (explain.go):
// the leader's schedule where it has one, a prediction elsewhere.
//
// Failover. Schedules live in the leader's memory, as upstream. A new leader
// rebuilds them from what it can prove, which is never earlier than what
// the old leader would have done:
//   - a pod that carries DisruptionTarget=True/DeletionByTaintManager set no
//     earlier than the oldest current NoExecute taint of its node was already
//     being deleted by a previous leader (its wait had run out), so it is
//     deleted at once — that is how a deletion interrupted by a failover
//     completes, and it can only happen once because deletion is conditional
//     on the pod's revision and UID;
//   - every other pod is processed afresh: the new leader's own processing
//     time starts the toleration, exactly as a restarted upstream
//     controller does. The old leader processed the taint earlier, so the
//     deletion can come later than it would have (by at most the time the
//     old leader had already waited) but never earlier.
//
// The taint's timeAdded is deliberately not used as the start: the old
// leader may have processed it later than it was added (or never), and the
// delay counts from processing.
//
// Rate. Evictions follow NoExecute taints only, and those are added by the
// lifecycle controller at each zone's rate (spec §6.6): a zone that is
// partially disrupted stops tainting, and master disruption removes the
// taints, which cancels every pending deletion. The evictor itself adds no
// second limiter, as upstream.
//
// Deletion is graceful, as upstream's taint manager (spec §12.3): the pod
// gets DisruptionTarget=True/DeletionByTaintManager, then a delete without
// a grace period of its own (services/podlife), so it turns Terminating with
// deletion_timestamp = now + its terminationGracePeriodSeconds and stays
// stored. Only its node's reporter confirming, pod GC (node deleted, or
// out-of-service and not Ready) or a forced delete remove it. A pod that is
// already Terminating is never evicted again. The owner (a ReplicaSet-like
// orchestrator) sees the MODIFIED pod with a deletion timestamp and may
// replace it at once; a StatefulSet-like owner waits for DELETED.
package eviction

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
	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// Leader is what the runner needs from the lifecycle controller.
type Leader interface {
	leadership.Leader
	// Paused is why judgement is paused ("" when it is not): the leader's
	// view is stale, so nothing is deleted until it is fresh again.
	Paused() string
}

// Event strings (spec §7).
const (
	EventSource = "taint-eviction-controller"
	EventReason = "TaintManagerEviction"
	// eventTTL: events about pods live in the pod's namespace for an hour.
	eventTTL = time.Hour
)

// Config of the runner.
type Config struct {
	Matcher Matcher
	// Retries and RetryWait of one deletion (upstream: 5 tries, 10ms apart).
	Retries   int
	RetryWait time.Duration
	// Resync reprocesses every pod on a tainted node this often, so a
	// missed change or a deletion that failed all its tries is picked up.
	Resync time.Duration
	// PausedRetry: how often to look again while judgement is paused.
	PausedRetry time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Election is the election the lifecycle controller campaigns in: a
	// follower's explanations name its leader ("" leaves it unnamed).
	Election string
}

// DefaultConfig returns upstream's retry policy and a 30s resync.
func DefaultConfig() Config {
	return Config{Retries: 5, RetryWait: 10 * time.Millisecond, Resync: 30 * time.Second, PausedRetry: time.Second}
}

// Runner runs the evictor on the leader.
type Runner struct {
	cfg    Config
	store  nodestore.Store
	cache  *cache.Cache
	leader Leader
	lg     *zap.Logger
	m      *metrics

	mu         sync.Mutex
	leading    bool
	fence      nodestore.Fence
	q          *timedQueue
	nodeTaints map[string][]*nodev1.Taint
	gc         GC
}

// New builds a runner; call Run.
func New(cfg Config, store nodestore.Store, c *cache.Cache, leader Leader, lg *zap.Logger, reg prometheus.Registerer) (*Runner, error) {
	d := DefaultConfig()
	if cfg.Retries <= 0 {
		cfg.Retries = d.Retries
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = d.RetryWait
	}
	if cfg.Resync <= 0 {
		cfg.Resync = d.Resync
	}
	if cfg.PausedRetry <= 0 {
		cfg.PausedRetry = d.PausedRetry
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Runner{cfg: cfg, store: store, cache: c, leader: leader, lg: lg.Named("evictor"), m: newMetrics()}
	if err := r.m.register(reg); err != nil {
		return nil, fmt.Errorf("register evictor metrics: %w", err)
	}
	return r, nil
}

var errLost = errors.New("leadership lost")

// Run follows the controller's leadership until ctx ends: while this
// replica leads, it evicts. A fenced write ends lead early (errLost); the
// controller steps down too, and Follow waits for that before looking again.
func (r *Runner) Run(ctx context.Context) error {
	leadership.Follow(ctx, r.leader, func(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) {
		_ = r.lead(ctx, fence, done)
	})
	return nil
}

func (r *Runner) begin(f nodestore.Fence) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leading, r.fence = true, f
	r.q = newTimedQueue()
	r.nodeTaints = map[string][]*nodev1.Taint{}
	r.m.depth.Set(0)
}

func (r *Runner) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leading = false
	r.q, r.nodeTaints = nil, nil
	r.m.depth.Set(0)
}

func (r *Runner) lead(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) error {
	r.begin(fence)
	defer r.end()
	r.lg.Info("evictor started on the leader; schedules are rebuilt from this leader's own processing time")
	_, nodeCur := r.cache.Nodes()
	podCur := r.cache.PodVersion()
	r.resync(ctx)
	fireT := time.NewTimer(time.Hour)
	defer fireT.Stop()
	resyncT := time.NewTicker(r.cfg.Resync)
	defer resyncT.Stop()
	for {
		r.resetTimer(fireT)
		changed := r.cache.Changed()
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-changed:
			nodeCur, podCur = r.sync(ctx, nodeCur, podCur)
		case <-resyncT.C:
			nodeCur, podCur = r.sync(ctx, nodeCur, podCur)
			r.resync(ctx)
		case <-fireT.C:
			// Apply every change already delivered first, so a taint that
			// went away cancels before anything fires.
			nodeCur, podCur = r.sync(ctx, nodeCur, podCur)
			if err := r.fireDue(ctx); err != nil {
				return err
			}
		}
	}
}

func (r *Runner) resetTimer(t *time.Timer) {
	r.mu.Lock()
	next, ok := r.q.next()
	r.mu.Unlock()
	d := time.Hour
	if ok {
		d = max(next.Sub(r.cfg.Now()), 0)
	}
	if r.leader.Paused() != "" && ok {
		d = max(d, r.cfg.PausedRetry)
	}
	t.Reset(d)
}

// sync processes the node and pod changes after the cursors.
func (r *Runner) sync(ctx context.Context, nodeCur, podCur cache.Version) (cache.Version, cache.Version) {
	now := r.cfg.Now()
	nch, _, err := r.cache.ChangesAfter(nodeCur, 10000)
	if err != nil {
		_, nodeCur = r.cache.Nodes()
		r.resync(ctx)
	} else if len(nch) > 0 {
		nodeCur = nch[len(nch)-1].Version
		for _, ch := range nch {
			r.nodeChanged(ctx, now, ch)
		}
	}
	pch, _, err := r.cache.PodChangesAfter(podCur, 10000)
	if err != nil {
		podCur = r.cache.PodVersion()
		r.resync(ctx)
	} else if len(pch) > 0 {
		podCur = pch[len(pch)-1].Version
		for _, ch := range pch {
			r.podChanged(ctx, now, ch)
		}
	}
	return nodeCur, podCur
}

// resync reprocesses every pod of every node with NoExecute taints, and
// cancels schedules of pods whose node has none any more.
func (r *Runner) resync(ctx context.Context) {
	now := r.cfg.Now()
	nodes, _ := r.cache.Nodes()
	r.mu.Lock()
	defer r.mu.Unlock()
	tainted := map[string]bool{}
	for _, n := range nodes {
		name := n.GetMetadata().GetName()
		if len(NoExecuteTaints(n.GetSpec().GetTaints())) == 0 {
			r.nodeTaints[name] = nil
			continue
		}
		v := r.view(name) // the node with its records' revisions
		r.nodeTaints[name] = v.taints
		if len(v.taints) == 0 {
			continue
		}
		tainted[name] = true
		for _, pe := range r.cache.PodsOnNode(name) {
			r.processLocked(ctx, now, pe.Pod, name, v)
		}
	}
	for _, it := range r.q.all() {
		if !tainted[it.s.Node] {
			if pe, ok := r.podByKey(it.key); ok {
				r.processLocked(ctx, now, pe.Pod, it.s.Node, nodeView{})
			}
		}
	}
}

func (r *Runner) podByKey(key string) (cache.PodEntry, bool) {
	ns, name := splitKey(key)
	return r.cache.Pod(ns, name)
}

func splitKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

func (r *Runner) nodeChanged(ctx context.Context, now time.Time, ch cache.Change) {
	name := ch.Node.GetMetadata().GetName()
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch.Type == cache.Deleted {
		// As upstream: a deleted node's pods keep their schedules (they
		// are orphans; the owner replaces them).
		delete(r.nodeTaints, name)
		return
	}
	taints := NoExecuteTaints(ch.Node.GetSpec().GetTaints())
	if old, ok := r.nodeTaints[name]; ok && taintsEqual(old, taints) {
		return
	}
	// Decide on the node as the cache holds it now (never older than the
	// change), with the revisions of its records that the deletion will
	// be conditional on.
	v := r.view(name)
	r.nodeTaints[name] = v.taints
	for _, pe := range r.cache.PodsOnNode(name) {
		r.processLocked(ctx, now, pe.Pod, name, v)
	}
}

// nodeView is what an eviction decision reads of a node: its NoExecute
// taints and the revisions of the records they came from.
type nodeView struct {
	taints             []*nodev1.Taint
	metaRev, healthRev int64
}

// view returns the cached view of node (no taints when it is not cached).
func (r *Runner) view(node string) nodeView {
	e, ok := r.cache.Entry(node)
	if !ok {
		return nodeView{}
	}
	return nodeView{taints: NoExecuteTaints(e.Node.GetSpec().GetTaints()), metaRev: e.MetaRev, healthRev: e.HealthRev}
}

func taintsEqual(a, b []*nodev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func (r *Runner) podChanged(ctx context.Context, now time.Time, ch cache.PodChange) {
	md := ch.Pod.GetMetadata()
	key := cache.PodKey(md.GetNamespace(), md.GetName())
	r.mu.Lock()
	defer r.mu.Unlock()
	// Decide from the pod as it is now, not as it was at the change: the
	// evictor's own DisruptionTarget write is followed by the delete, and
	// deciding on the intermediate state would only schedule in vain.
	pe, ok := r.cache.Pod(md.GetNamespace(), md.GetName())
	if !ok {
		if _, ok := r.q.remove(key); ok {
			r.m.depth.Set(float64(r.q.Len()))
		}
		return
	}
	p := pe.Pod
	node := p.GetSpec().GetNodeName()
	if node == "" {
		r.cancelLocked(ctx, now, key, p, "pod is not bound to a node")
		return
	}
	r.processLocked(ctx, now, p, node, r.view(node))
}

// processLocked decides for one pod and updates its schedule.
func (r *Runner) processLocked(ctx context.Context, now time.Time, p *podv1.Pod, node string, v nodeView) {
	taints := v.taints
	md := p.GetMetadata()
	key := cache.PodKey(md.GetNamespace(), md.GetName())
	var prev *Scheduled
	if s, ok := r.q.get(key); ok {
		prev = &s
	}
	if podlife.IsTerminating(p) {
		// Already being deleted (by this evictor or anyone): a second
		// delete would change nothing (pending graceful), so drop it.
		if prev != nil {
			r.q.remove(key)
			r.m.depth.Set(float64(r.q.Len()))
		}
		return
	}
	d := r.cfg.Matcher.Decide(now, md.GetUid(), node, taints, p.GetSpec().GetTolerations(), prev)
	if d.Action == DeleteNow || d.Action == Schedule {
		d.Next.MetaRev, d.Next.HealthRev = v.metaRev, v.healthRev
	}
	switch d.Action {
	case Nothing, Keep:
	case Cancel:
		r.cancelLocked(ctx, now, key, p, d.Why)
	case DeleteNow:
		r.q.set(key, d.Next)
		r.m.scheduled.Inc()
		r.lg.Info("pod will be deleted now", zap.String("pod", key), zap.String("node", node), zap.String("why", d.Why))
	case Schedule:
		next := d.Next
		if prev == nil && decidedBefore(p, taints) {
			// A previous leader's wait had run out and it had started the
			// deletion (DisruptionTarget is set): finish it now.
			next.FireAt = now
			r.lg.Info("pod was already being deleted by a previous leader; deleting it now", zap.String("pod", key), zap.String("node", node))
		} else if prev == nil {
			r.lg.Info("pod deletion scheduled", zap.String("pod", key), zap.String("node", node),
				zap.Time("at", next.FireAt), zap.String("why", d.Why))
		}
		r.q.set(key, next)
		r.m.scheduled.Inc()
	}
	r.m.depth.Set(float64(r.q.Len()))
}

// decidedBefore: the pod carries the evictor's DisruptionTarget set no
// earlier than the oldest current NoExecute taint, i.e. in this taint
// episode an evictor already fired for it.
func decidedBefore(p *podv1.Pod, taints []*nodev1.Taint) bool {
	c := podutil.FindCondition(p.GetStatus(), podutil.DisruptionTarget)
	if c == nil || c.GetStatus() != nodemodel.True || c.GetReason() != podutil.ReasonTaintManager || c.GetLastTransitionTime() == nil {
		return false
	}
	var oldest time.Time
	for _, t := range taints {
		if t.GetTimeAdded() == nil {
			return false // cannot tell which episode the mark belongs to
		}
		if ta := t.GetTimeAdded().AsTime(); oldest.IsZero() || ta.Before(oldest) {
			oldest = ta
		}
	}
	return !oldest.IsZero() && !c.GetLastTransitionTime().AsTime().Before(oldest)
}

func (r *Runner) cancelLocked(ctx context.Context, now time.Time, key string, p *podv1.Pod, why string) {
	if _, ok := r.q.remove(key); !ok {
		return
	}
	r.m.cancelled.Inc()
	r.m.depth.Set(float64(r.q.Len()))
	r.lg.Info("pod deletion cancelled", zap.String("pod", key), zap.String("why", why))
	r.eventLocked(ctx, now, p, "Normal", "Cancelling deletion of Pod "+key)
}

// fireDue deletes every pod whose time has come (not while paused).
func (r *Runner) fireDue(ctx context.Context) error {
	if reason := r.leader.Paused(); reason != "" {
		return nil // later is never early; resetTimer looks again
	}
	now := r.cfg.Now()
	r.mu.Lock()
	due := r.q.popDue(now)
	r.m.depth.Set(float64(r.q.Len()))
	r.mu.Unlock()
	for _, it := range due {
		if err := r.evict(ctx, it.key, it.s); err != nil {
			return err
		}
	}
	return nil
}

// evict records the event and deletes the pod: DisruptionTarget first, then
// the delete, each fenced and conditional on the pod's revision and on the
// revisions of its node's records the decision was made from; up to
// Retries tries, RetryWait apart (upstream deletePodHandler).
func (r *Runner) evict(ctx context.Context, key string, s Scheduled) error {
	pe, ok := r.podByKey(key)
	if !ok || pe.Pod.GetMetadata().GetUid() != s.UID {
		return nil // gone or replaced meanwhile
	}
	zone := "unknown"
	if n, ok := r.cache.Node(s.Node); ok {
		zone = nodemodel.ZoneName(nodemodel.ZoneKey(n.GetMetadata().GetLabels()))
	}
	r.mu.Lock()
	r.eventLocked(ctx, r.cfg.Now(), pe.Pod, "Normal", "Marking for deletion Pod "+key)
	r.mu.Unlock()
	var err error
	for try := range r.cfg.Retries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.cfg.RetryWait):
			}
		}
		var res outcome
		res, s, err = r.markAndDelete(ctx, key, s)
		if errors.Is(err, nodestore.ErrFenced) {
			r.m.failed.Inc()
			r.lg.Warn("eviction rejected: no longer the leader", zap.String("pod", key))
			return errLost
		}
		if err != nil {
			continue
		}
		switch res {
		case podGone:
			r.lg.Info("pod to evict is already gone", zap.String("pod", key))
		case evicted:
			r.m.executed.WithLabelValues(zone).Inc()
			r.lg.Info("pod evicted", zap.String("pod", key), zap.String("node", s.Node), zap.Time("scheduledAt", s.FireAt),
				zap.Duration("late", r.cfg.Now().Sub(s.FireAt)))
		}
		return nil
	}
	r.m.failed.Inc()
	r.lg.Error("cannot evict pod; retrying at the next resync", zap.String("pod", key), zap.Int("tries", r.cfg.Retries), zap.Error(err))
	return nil
}

// outcome of one eviction try.
type outcome int

const (
	evicted     outcome = iota
	podGone             // gone, replaced or already terminating
	withdrawn           // the node's current taints no longer call for it
	rescheduled         // decided again: the deletion is due later
)

// markAndDelete does one try. The delete is podlife's graceful one with the
// pod's own grace, preconditioned on the UID and revision read here, so a
// pod that moved or changed meanwhile is looked at again rather than
// deleted on stale grounds; and checked on the node's records at the
// revisions s was decided from. Those come from the cache, which can lag
// the store (its watch may be on a frozen etcd member, short of the
// stale-watch pause): if they changed, etcd refuses the delete, and the
// node is read from the store itself — which holds every write of this
// leader, among them a taint it has just lifted — and the pod decided
// again. It returns the schedule a further try should use.
func (r *Runner) markAndDelete(ctx context.Context, key string, s Scheduled) (outcome, Scheduled, error) {
	o, err := r.store.Get(ctx, nodestore.Pods, key)
	if errors.Is(err, nodestore.ErrNotFound) {
		return podGone, s, nil
	}
	if err != nil {
		return 0, s, err
	}
	p := o.Value.(*podv1.Pod)
	if p.GetMetadata().GetUid() != s.UID || p.GetSpec().GetNodeName() != s.Node || podlife.IsTerminating(p) {
		return podGone, s, nil
	}
	err = r.delete(ctx, key, o.ModRevision, s)
	if errors.Is(err, podlife.ErrStale) {
		r.m.stale.Inc()
		var res outcome
		var again bool
		res, s, again, err = r.redecide(ctx, key, p, s)
		if err != nil || !again {
			return res, s, err
		}
		// Still due on the node as it is: delete, checked on the
		// revisions just read.
		err = r.delete(ctx, key, o.ModRevision, s)
	}
	if errors.Is(err, nodestore.ErrNotFound) {
		return podGone, s, nil
	}
	return evicted, s, err
}

func (r *Runner) delete(ctx context.Context, key string, podRev int64, s Scheduled) error {
	r.mu.Lock()
	fence := r.fence
	r.mu.Unlock()
	ns, name := splitKey(key)
	cond := &podv1.PodCondition{Type: podutil.DisruptionTarget, Status: nodemodel.True, Reason: podutil.ReasonTaintManager, Message: podutil.MessageTaintManager}
	_, _, err := podlife.Delete(ctx, r.store, ns, name, podlife.DeleteOptions{
		UID: s.UID, ResourceVersion: strconv.FormatInt(podRev, 10), Fence: &fence, Condition: cond,
		Unchanged: []nodestore.Op{
			nodestore.Unchanged(nodestore.Nodes, s.Node, s.MetaRev),
			nodestore.Unchanged(nodestore.Health, s.Node, s.HealthRev),
		},
	}, r.cfg.Now())
	return err
}

// redecide decides for pod p again on its node as the store holds it now.
// The toleration keeps counting from the schedule's start only while the
// taint it was decided on is still there (same key, effect and time
// added); a taint lifted and added again since restarts it from now, as a
// cancel and a fresh schedule would have, had the view kept up. again
// reports that the pod is to be deleted now, with the returned schedule.
func (r *Runner) redecide(ctx context.Context, key string, p *podv1.Pod, s Scheduled) (res outcome, next Scheduled, again bool, err error) {
	v, err := r.readView(ctx, s.Node)
	if err != nil {
		return 0, s, false, err
	}
	now := r.cfg.Now()
	var prev *Scheduled
	if s.Taint != nil && slices.ContainsFunc(v.taints, func(t *nodev1.Taint) bool { return proto.Equal(t, s.Taint) }) {
		prev = &s
	}
	d := r.cfg.Matcher.Decide(now, s.UID, s.Node, v.taints, p.GetSpec().GetTolerations(), prev)
	if d.Action == Nothing || d.Action == Cancel {
		r.m.cancelled.Inc()
		// Warn: the cache lagged etcd by a taint change, which only a
		// slow or frozen watch explains.
		r.lg.Warn("eviction withdrawn: the node changed after the decision (the cache lagged etcd)", zap.String("pod", key), zap.String("node", s.Node),
			zap.Int64("decidedAtHealthRev", s.HealthRev), zap.Int64("healthRev", v.healthRev), zap.String("why", d.Why))
		r.mu.Lock()
		r.eventLocked(ctx, now, p, "Normal", "Cancelling deletion of Pod "+key)
		r.mu.Unlock()
		return withdrawn, s, false, nil
	}
	next = d.Next
	next.MetaRev, next.HealthRev = v.metaRev, v.healthRev
	if next.FireAt.After(now) {
		r.mu.Lock()
		if r.q != nil {
			r.q.set(key, next)
			r.m.scheduled.Inc()
			r.m.depth.Set(float64(r.q.Len()))
		}
		r.mu.Unlock()
		r.lg.Warn("eviction postponed: the node changed after the decision (the cache lagged etcd)", zap.String("pod", key), zap.String("node", s.Node),
			zap.Int64("decidedAtHealthRev", s.HealthRev), zap.Int64("healthRev", v.healthRev), zap.Time("at", next.FireAt), zap.String("why", d.Why))
		return rescheduled, next, false, nil
	}
	r.lg.Info("node records changed after the decision; the pod is still due", zap.String("pod", key), zap.String("node", s.Node),
		zap.Int64("decidedAtHealthRev", s.HealthRev), zap.Int64("healthRev", v.healthRev), zap.String("why", d.Why))
	return evicted, next, true, nil
}

// readView reads node's records from the store (not the cache).
func (r *Runner) readView(ctx context.Context, node string) (nodeView, error) {
	var v nodeView
	var all []*nodev1.Taint
	o, err := r.store.Get(ctx, nodestore.Nodes, node)
	switch {
	case err == nil:
		v.metaRev = o.ModRevision
		all = append(all, o.Value.(*nodev1.Node).GetSpec().GetTaints()...)
	case !errors.Is(err, nodestore.ErrNotFound):
		return v, fmt.Errorf("read node %s: %w", node, err)
	}
	o, err = r.store.Get(ctx, nodestore.Health, node)
	switch {
	case err == nil:
		v.healthRev = o.ModRevision
		all = append(all, o.Value.(*nodev1.NodeHealth).GetTaints()...)
	case !errors.Is(err, nodestore.ErrNotFound):
		return v, fmt.Errorf("read health of %s: %w", node, err)
	}
	v.taints = NoExecuteTaints(all) // in the cache's order: the node's own, then the monitor's
	return v, nil
}

// eventLocked records an event about a pod (best effort, fenced).
func (r *Runner) eventLocked(ctx context.Context, now time.Time, p *podv1.Pod, typ, msg string) {
	md := p.GetMetadata()
	ts := nodemodel.Timestamp(now)
	name := md.GetName() + "." + strconv.FormatInt(now.UnixNano(), 16)
	ev := &nodev1.Event{
		Metadata:       &nodev1.ObjectMeta{Name: name, Namespace: md.GetNamespace(), CreationTimestamp: ts},
		InvolvedObject: &nodev1.ObjectReference{Kind: "Pod", Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid()},
		Reason:         EventReason, Message: msg, Type: typ, Source: EventSource,
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
	}
	fence := r.fence
	if _, err := r.store.Apply(ctx, &fence, nodestore.Op{Kind: nodestore.Events, Name: md.GetNamespace() + "/" + name, Value: ev, TTL: eventTTL}); err != nil {
		r.lg.Warn("cannot record event", zap.String("pod", md.GetNamespace()+"/"+md.GetName()), zap.String("message", msg), zap.Error(err))
	}
}

// PodSchedule is one pending deletion, for explanations.
type PodSchedule struct {
	Namespace, Name string
	Scheduled
}

// Leading reports whether the runner is evicting on this replica.
func (r *Runner) Leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading
}

// Lookup returns the pending deletion of a pod, if this replica leads and
// one is scheduled.
func (r *Runner) Lookup(namespace, name string) (Scheduled, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leading {
		return Scheduled{}, false
	}
	return r.q.get(cache.PodKey(namespace, name))
}

// OnNode returns the pending deletions of pods on node, earliest first.
func (r *Runner) OnNode(node string) []PodSchedule {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leading {
		return nil
	}
	var out []PodSchedule
	for _, it := range r.q.all() {
		if it.s.Node == node {
			ns, name := splitKey(it.key)
			out = append(out, PodSchedule{Namespace: ns, Name: name, Scheduled: it.s})
		}
	}
	sortSchedules(out)
	return out
}
