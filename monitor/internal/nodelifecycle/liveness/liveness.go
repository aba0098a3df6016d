// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package liveness follows the collectors' live liveness feeds: every
// collector registered under collectors/ is followed through
// FeedService.WatchLiveness, and every RENEWED, ATTACHED or WAITING event
// counts as a heartbeat of its node on the monitor's own clock, as does a
// STATUS_REPORTED whose status heartbeat advanced (it also carries the
// heartbeat of unchanged status reports, which etcd never sees, for the
// API to serve). It also tells the
// controller when it must not judge a node: while the feed of the collector
// the node was last seen on is stale (the monitor cannot see renewals it may
// be missing). It counts how long the monitor was blind to each node, so
// the controller can stop the node's clock for exactly that long instead of
// restarting its grace period, and it grants a fresh grace period to the
// nodes of a collector that vanished (they are reconnecting to another one).
//
// It owns the answer to "when did this monitor last hear from node X, and
// may X be judged now": Merge combines the feed's view with the lease and
// status the cache holds from etcd into one Heartbeat, the only liveness
// input of the lifecycle rules.
package liveness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Collectors is the source of registered collectors (the watch cache).
type Collectors interface {
	Collectors() map[string]*collectorv1.CollectorInfo
	Changed() <-chan struct{}
}

// Config of the tracker.
type Config struct {
	// Client dials the feeds; Addresses is ignored (taken from collectors/).
	Client grpcclient.Config
	// Watcher names this monitor in the collectors' logs.
	Watcher string
	// StaleBatches: a feed is stale after this many heartbeat intervals
	// without a batch (contract: 3).
	StaleBatches int
	// DefaultHeartbeat is assumed until a feed states its interval.
	DefaultHeartbeat time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Node is what the tracker knows about one node.
type Node struct {
	// Renewals counts live renewals seen (any collector); the controller
	// only checks that it grew.
	Renewals uint64
	// RenewTime is the reporter's renewTime of the newest renewal.
	RenewTime time.Time
	// ObservedAt is the monitor clock when that renewal arrived.
	ObservedAt time.Time
	// Collector the node was last seen attached to ("" after a detach).
	Collector string
	// Epoch increments when the node is owed a fresh grace period.
	Epoch uint64
	// Paused: the node's collector feed is stale.
	Paused bool
	// Blind is the total time the monitor was blind to the node's feeds:
	// every gap between two batches of the feed the node was attached to
	// that made the feed stale, counted in full when the feed resumed. It
	// only grows; a gap still open is not in it yet (Paused covers that).
	Blind time.Duration
	// QuietUntil: a collector refused the node's registration for
	// capacity and told its reporter to stay away until then (WAITING
	// with retry_within, dated on the monitor's clock). Zero once the node
	// attached or renewed since: from then on its silence is its own.
	QuietUntil time.Time
	// StatusHeartbeat is the newest status heartbeat seen on a feed
	// (STATUS_REPORTED; reporter clock), StatusObservedAt the monitor's
	// clock when it arrived.
	StatusHeartbeat  time.Time
	StatusObservedAt time.Time
	// ClockSkew is how far the node's clock was from its collector's at
	// its latest status report: the report's heartbeat minus the
	// collector's receipt time (positive: the node's clock is ahead).
	// Shown, never judged by. ClockSkewAt is the monitor's clock when it
	// was measured; zero: never (no report since this monitor started,
	// or a collector that does not send received_time).
	ClockSkew   time.Duration
	ClockSkewAt time.Time
}

// FeedState describes one followed feed.
type FeedState struct {
	ID, Address string
	Connected   bool
	LastBatch   time.Time
	Stale       bool
	Nodes       int
}

type feed struct {
	info      *collectorv1.CollectorInfo
	cancel    context.CancelFunc
	conn      *grpc.ClientConn
	lastBatch time.Time
	interval  time.Duration
	connected bool
	// blind: the sum of this feed's stale gaps so far (see Node.Blind).
	blind time.Duration
}

type node struct {
	// ref is the record's index in Tracker.refs.
	ref        Ref
	renewals   uint64
	renewTime  time.Time
	observedAt time.Time
	collector  string
	// detachedFrom: the collector the node last detached from, while it
	// is not attached anywhere ("" once attached again).
	detachedFrom string
	epoch        uint64
	quietUntil   time.Time
	// statusHB, statusAt: Node.StatusHeartbeat, Node.StatusObservedAt.
	statusHB, statusAt time.Time
	// skew, skewAt: Node.ClockSkew, Node.ClockSkewAt.
	skew   time.Duration
	skewAt time.Time
	// blind is what Node.Blind was when the node last changed feeds;
	// blindBase the current feed's blind counter at that moment. The
	// node's total is blind + (feed.blind - blindBase): O(1) per gap, not
	// a walk over the fleet.
	blind, blindBase time.Duration
}

// Tracker follows the feeds.
type Tracker struct {
	cfg     Config
	src     Collectors
	lg      *zap.Logger
	metrics *grpcprom.ClientMetrics

	mu    sync.Mutex
	feeds map[string]*feed
	nodes map[string]*node
	// refs holds every node record in the order they were made: a Ref is
	// an index into it. Records are never removed (a node's liveness
	// outlives its records in etcd for as long as the monitor runs).
	refs []*node
	wg   sync.WaitGroup

	batches *prometheus.CounterVec
}

// New returns a tracker; call Run.
func New(cfg Config, src Collectors, lg *zap.Logger, reg prometheus.Registerer, metrics *grpcprom.ClientMetrics) (*Tracker, error) {
	if cfg.StaleBatches <= 0 {
		cfg.StaleBatches = 3
	}
	if cfg.DefaultHeartbeat <= 0 {
		cfg.DefaultHeartbeat = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Tracker{cfg: cfg, src: src, lg: lg.Named("liveness"), metrics: metrics,
		feeds: map[string]*feed{}, nodes: map[string]*node{}}
	t.batches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepulse_monitor_feed_batches_total", Help: "Liveness feed batches received, by collector.",
	}, []string{"collector"})
	stale := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "nodepulse_monitor_feeds_stale", Help: "Collector liveness feeds followed that are currently stale (no batch for 3 heartbeat intervals).",
	}, func() float64 {
		n := 0
		for _, f := range t.Feeds() {
			if f.Stale {
				n++
			}
		}
		return float64(n)
	})
	followed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "nodepulse_monitor_feeds", Help: "Collector liveness feeds followed.",
	}, func() float64 { return float64(len(t.Feeds())) })
	if reg != nil {
		for _, c := range []prometheus.Collector{t.batches, stale, followed} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register liveness metrics: %w", err)
			}
		}
	}
	return t, nil
}

// Run follows the collectors listed by src until ctx ends.
func (t *Tracker) Run(ctx context.Context) error {
	defer func() {
		t.mu.Lock()
		for id, f := range t.feeds {
			f.cancel()
			delete(t.feeds, id)
		}
		t.mu.Unlock()
		t.wg.Wait()
	}()
	for {
		ch := t.src.Changed()
		t.reconcile(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// reconcile starts feeds for new collectors and stops those of vanished ones.
func (t *Tracker) reconcile(ctx context.Context) {
	want := t.src.Collectors()
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	for id, f := range t.feeds {
		if info, ok := want[id]; ok && info.GetFeedAddress() == f.info.GetFeedAddress() {
			f.info = info
			continue
		}
		f.cancel()
		// Its nodes are reconnecting elsewhere: give them a fresh grace
		// period rather than judging them on a renewal gap they did not cause.
		n := 0
		// That includes the nodes it sent away while draining and that have
		// not attached anywhere yet: with one collector (or all of them
		// restarting) they cannot attach before a replacement listens, and
		// the gap is the rollout's, not theirs.
		for _, nd := range t.nodes {
			if nd.collector == id || nd.collector == "" && nd.detachedFrom == id {
				t.attachLocked(nd, "")
				nd.detachedFrom = ""
				nd.epoch++
				n++
			}
		}
		delete(t.feeds, id) // after its nodes settled their blind time on it
		t.lg.Info("collector gone; its nodes get a fresh grace period", zap.String("collector", id), zap.Int("nodes", n))
	}
	for id, info := range want {
		if _, ok := t.feeds[id]; ok || info.GetFeedAddress() == "" {
			continue
		}
		cc := t.cfg.Client
		cc.Addresses = info.GetFeedAddress()
		conn, err := grpcclient.Dial(cc, t.metrics)
		if err != nil {
			t.lg.Error("cannot dial collector feed", zap.String("collector", id), zap.String("address", info.GetFeedAddress()), zap.Error(err))
			continue
		}
		fctx, cancel := context.WithCancel(ctx)
		f := &feed{info: info, cancel: cancel, conn: conn, lastBatch: now, interval: t.cfg.DefaultHeartbeat}
		t.feeds[id] = f
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer conn.Close()
			t.follow(fctx, id, f)
		}()
		t.lg.Info("following collector feed", zap.String("collector", id), zap.String("address", info.GetFeedAddress()))
	}
}

// follow keeps one feed open, reconnecting with backoff.
func (t *Tracker) follow(ctx context.Context, id string, f *feed) {
	cli := collectorv1.NewFeedServiceClient(f.conn)
	backoff := feedBackoff
	for ctx.Err() == nil {
		err := t.stream(ctx, id, cli, f)
		if ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		f.connected = false
		t.mu.Unlock()
		d := backoff.Step()
		t.lg.Warn("collector feed broken; reconnecting", zap.String("collector", id), zap.Error(err), zap.Duration("backoff", d))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// feedBackoff spaces reconnects to one collector's feed: 100ms doubling up
// to 5s.
var feedBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt32}

func (t *Tracker) stream(ctx context.Context, id string, cli collectorv1.FeedServiceClient, f *feed) error {
	s, err := cli.WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: t.cfg.Watcher})
	if err != nil {
		return err
	}
	for {
		b, err := s.Recv()
		if err != nil {
			return err
		}
		if got := b.GetCollectorId(); got != "" && got != id {
			// Another collector now listens at the address (a restart
			// on the same host and port, before the old one's session
			// expired): its events are not this feed's, and applied
			// under this id they would tie nodes to a collector that is
			// gone. The new one is followed under its own id.
			return fmt.Errorf("the feed at %s is collector %q's, not %q's", f.info.GetFeedAddress(), got, id)
		}
		t.batch(id, f, b)
	}
}

// batch applies one feed batch.
func (t *Tracker) batch(id string, f *feed, b *collectorv1.WatchLivenessResponse) {
	now := t.cfg.Now()
	t.batches.WithLabelValues(id).Inc()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.feeds[id] != f {
		return // the collector was removed meanwhile
	}
	if gap := now.Sub(f.lastBatch); t.staleLocked(f, now) {
		// The monitor could not see this feed's renewals for the whole
		// gap, not just past the stale bound: its nodes get it back.
		f.blind += gap
	}
	f.lastBatch, f.connected = now, true
	if d := b.GetHeartbeatInterval().AsDuration(); d > 0 {
		f.interval = d
	}
	for _, ev := range b.GetEvents() {
		name := ev.GetNodeName()
		if name == "" {
			continue
		}
		nd := t.nodeLocked(name)
		switch ev.GetKind() {
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED, collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED:
			// Collectors keep renewTimes advancing per stream only; across
			// streams they are the node's clock, which may have stepped
			// back any amount. So a new stream (an ATTACHED event, or a
			// renewal heard on a collector this record did not follow)
			// starts a new baseline rather than being compared with the
			// old stream's renewTimes: its renewals count whatever they
			// say. (An ATTACHED before the stream's first renewal carries
			// no renewTime: the baseline is then empty, and the stream's
			// first renewal is news whatever its time.)
			moved := nd.collector != id
			newStream := !b.GetSnapshot() && (moved || ev.GetKind() == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED)
			t.attachLocked(nd, id)
			nd.detachedFrom = ""
			var rt time.Time
			if ev.GetRenewTime() != nil {
				rt = ev.GetRenewTime().AsTime()
			}
			if !newStream {
				// A snapshot repeats renewals already seen; only a renewal
				// whose renewTime advanced is fresh evidence. A snapshot
				// of a collector this record did not follow sets the
				// baseline of the node's stream there.
				if ev.GetRenewTime() != nil && !rt.After(nd.renewTime) {
					if moved {
						nd.renewTime = rt
					}
					continue
				}
				if b.GetSnapshot() && nd.renewTime.IsZero() && nd.renewals == 0 {
					// First sight of the node: a baseline, not a heartbeat.
					nd.renewTime = rt
					continue
				}
			}
			nd.renewals++
			if newStream || rt.After(nd.renewTime) {
				nd.renewTime = rt
			}
			nd.observedAt = now
			nd.quietUntil = time.Time{}
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING:
			// Its reporter reached this collector and waits for (or was
			// refused) registration: alive, dated on arrival. Not
			// attached, but this feed is where it is heard now: while the
			// feed is stale the node is held like an attached one, and if
			// the collector vanishes it gets a fresh grace period. (Left
			// with no feed, a waiting node was judged through a stall of
			// the very collector it waited on: 828 Unknowns in a restart.)
			at := now
			if b.GetSnapshot() {
				// A snapshot repeats the nodes heard waiting over the last
				// 30 s, each with when (the collector's clock): dated that
				// long before this batch arrived, and ignored unless newer
				// than what the monitor heard already.
				if rt, sent := ev.GetRenewTime(), b.GetSentTime(); rt != nil && sent != nil {
					at = now.Add(-max(sent.AsTime().Sub(rt.AsTime()), 0))
				}
				if !at.After(nd.observedAt) {
					continue
				}
			}
			t.attachLocked(nd, id)
			nd.detachedFrom = ""
			nd.renewals++
			nd.observedAt = at
			// Refused and told to stay away: that silence is the
			// collector's doing. (A snapshot's event is dated by its
			// age, so the wait is counted from when it was said.)
			if w := ev.GetRetryWithin().AsDuration(); ev.GetRetryWithin() != nil && w > 0 {
				if until := at.Add(min(w, maxRetryWithin)); until.After(nd.quietUntil) {
					nd.quietUntil = until
				}
			}
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED:
			// A status report the collector stored (or found unchanged):
			// the node is attached there and alive. Dated by the
			// collector's receipt (its age when the batch was sent, taken
			// off this batch's arrival, so the two clocks need not agree),
			// not by this batch's arrival, which comes after the report's
			// etcd write: a report just before a node died would otherwise
			// put off its Unknown by that write's time.
			hbts := ev.GetStatusHeartbeatTime()
			if hbts == nil {
				continue
			}
			hb := hbts.AsTime()
			at := now
			rcv, sent := ev.GetReceivedTime(), b.GetSentTime()
			if rcv != nil && sent != nil {
				at = now.Add(-max(sent.AsTime().Sub(rcv.AsTime()), 0))
			}
			// A snapshot repeats the node's latest report: news only when
			// newer than what this monitor heard (a resync skipped its
			// event). An event is always a new report; its heartbeat may
			// be earlier than the last one's (the node's clock stepped
			// back), which is still a live node reporting.
			if b.GetSnapshot() && !hb.After(nd.statusHB) || !b.GetSnapshot() && hb.Equal(nd.statusHB) {
				if rcv != nil && nd.skewAt.IsZero() {
					nd.skew, nd.skewAt = hb.Sub(rcv.AsTime()), at
				}
				continue
			}
			t.attachLocked(nd, id)
			nd.detachedFrom = ""
			nd.statusHB, nd.statusAt = hb, at
			if rcv != nil {
				nd.skew, nd.skewAt = hb.Sub(rcv.AsTime()), at
			}
			nd.quietUntil = time.Time{}
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED, collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_LEAVING:
			if nd.collector == id {
				t.attachLocked(nd, "")
				nd.detachedFrom = id
			}
		}
	}
}

// attachLocked moves nd to the feed of collector id ("": none), keeping
// its blind total: what it accrued on the old feed is settled first.
func (t *Tracker) attachLocked(nd *node, id string) {
	if nd.collector == id {
		return
	}
	nd.blind = t.blindLocked(nd)
	nd.collector, nd.blindBase = id, 0
	if f := t.feeds[id]; f != nil {
		nd.blindBase = f.blind
	}
}

// blindLocked is nd's Node.Blind.
func (t *Tracker) blindLocked(nd *node) time.Duration {
	return blindIn(nd, t.feeds[nd.collector])
}

// blindIn is nd's Node.Blind given its collector's feed f (nil when not
// followed).
func blindIn(nd *node, f *feed) time.Duration {
	if f != nil && f.blind > nd.blindBase {
		return nd.blind + f.blind - nd.blindBase
	}
	return nd.blind
}

// maxRetryWithin bounds how long one WAITING can keep a node from being
// judged: the bound collectors announce within (nodemodel.MaxWaitingWithin).
const maxRetryWithin = nodemodel.MaxWaitingWithin

func (t *Tracker) staleLocked(f *feed, now time.Time) bool {
	return now.Sub(f.lastBatch) > time.Duration(t.cfg.StaleBatches)*f.interval
}

// nodeLocked returns name's record, made when absent.
func (t *Tracker) nodeLocked(name string) *node {
	nd := t.nodes[name]
	if nd == nil {
		nd = &node{ref: Ref(len(t.refs))}
		t.nodes[name] = nd
		t.refs = append(t.refs, nd)
	}
	return nd
}

// Ref is a handle on one node's record in a Tracker (Tracker.Ref).
type Ref int32

// Ref returns a handle on name's record, made when absent (an empty record
// reads as Node{}, as an unknown name does). The controller keeps one per
// node, so a health pass reads 100,000 records without looking up their
// names.
func (t *Tracker) Ref(name string) Ref {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodeLocked(name).ref
}

// NodeOf is Node for the record r refers to.
func (t *Tracker) NodeOf(r Ref) Node {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodeOfLocked(t.refs[r], now)
}

// Node returns what the tracker knows about a node.
func (t *Tracker) Node(name string) Node {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	nd := t.nodes[name]
	if nd == nil {
		return Node{}
	}
	return t.nodeOfLocked(nd, now)
}

func (t *Tracker) nodeOfLocked(nd *node, now time.Time) Node {
	// One lookup of the feed by its collector's name: a health pass asks
	// this of every node.
	f := t.feeds[nd.collector]
	out := Node{Renewals: nd.renewals, RenewTime: nd.renewTime, ObservedAt: nd.observedAt, Collector: nd.collector, Epoch: nd.epoch,
		Blind: blindIn(nd, f), QuietUntil: nd.quietUntil, StatusHeartbeat: nd.statusHB, StatusObservedAt: nd.statusAt,
		ClockSkew: nd.skew, ClockSkewAt: nd.skewAt}
	if f != nil && t.staleLocked(f, now) {
		out.Paused = true
	}
	return out
}

// Feeds describes every followed feed.
func (t *Tracker) Feeds() []FeedState {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	count := map[string]int{}
	for _, nd := range t.nodes {
		count[nd.collector]++
	}
	out := make([]FeedState, 0, len(t.feeds))
	for id, f := range t.feeds {
		out = append(out, FeedState{ID: id, Address: f.info.GetFeedAddress(), Connected: f.connected,
			LastBatch: f.lastBatch, Stale: t.staleLocked(f, now), Nodes: count[id]})
	}
	return out
}

// AllStale reports whether at least one feed is followed and every one is
// stale: the monitor is then probably cut off from the collectors.
//
// It is called on every deadline sweep (several times a second), so it
// looks at the feeds only, never at the nodes (Feeds counts nodes per feed,
// a walk over the whole fleet).
func (t *Tracker) AllStale() bool {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.feeds) == 0 {
		return false
	}
	for _, f := range t.feeds {
		if !t.staleLocked(f, now) {
			return false
		}
	}
	return true
}

// ErrNotAttached: no followed collector holds the node's stream.
var ErrNotAttached = errors.New("node is not attached to any known collector")

// SendCommand asks the collector holding the node to have it report its
// status now; it returns the collector id and whether it was delivered.
func (t *Tracker) SendCommand(ctx context.Context, name, reason string) (string, bool, error) {
	t.mu.Lock()
	var order []string
	if nd := t.nodes[name]; nd != nil && nd.collector != "" {
		order = append(order, nd.collector)
	}
	for id := range t.feeds {
		if len(order) == 0 || order[0] != id {
			order = append(order, id)
		}
	}
	conns := map[string]*grpc.ClientConn{}
	for _, id := range order {
		if f := t.feeds[id]; f != nil {
			conns[id] = f.conn
		}
	}
	t.mu.Unlock()
	var lastErr error = ErrNotAttached
	for _, id := range order {
		conn := conns[id]
		if conn == nil {
			continue
		}
		resp, err := collectorv1.NewFeedServiceClient(conn).SendNodeCommand(ctx, &collectorv1.SendNodeCommandRequest{
			NodeName: name, Command: &collectorv1.SendNodeCommandRequest_ReportStatusReason{ReportStatusReason: reason},
		})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			lastErr = fmt.Errorf("collector %s: %w", id, err)
			continue
		}
		return id, resp.GetDelivered(), nil
	}
	return "", false, lastErr
}
