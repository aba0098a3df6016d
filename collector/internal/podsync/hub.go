// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package podsync is the collector's side of the reporter acting as its
// node's kubelet (docs/spec.md, "The reporter as the node's kubelet"): it
// serves every attached reporter that asked for it (Register.pod_sync) the
// pods bound to its node — a full list at attach, then each change — and
// applies that reporter's writes to them (pod status, finished deletions,
// mirror pods) after checking that they are its own. It also notices an
// attached node whose node object was deleted, so that its stream can be
// ended and the reporter register again.
//
// One list+watch of pods/ and one watch of node deletions per collector
// process, whatever the number of streams: the pods are indexed by
// spec.nodeName in memory, so an attach reads the index instead of listing
// the store (a registration storm of 100,000 nodes would otherwise list
// every pod 100,000 times). Streams whose reporter did not ask, and nodes
// without pods after their first sync, cost nothing here; lease renewals
// never pass through this package.
package podsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Store is what the hub needs from nodestore.
type Store interface {
	nodestore.Reader
	nodestore.Writer
	nodestore.Watcher
}

// Nodes is the collector's table of attached streams, as the hub needs it
// to end the stream of a node whose object was deleted.
type Nodes interface {
	// AttachedUID is the uid of the node attached here under name, if any.
	AttachedUID(name string) (uid string, ok bool)
	// AttachedNames lists the attached nodes (after a watch gap, to check
	// that their node objects still exist).
	AttachedNames() []string
	// NodeDeleted ends the stream of name if it is still attached with
	// uid: its node object is gone, or is another node's now.
	NodeDeleted(name, uid string)
}

// Target is one attached stream's way back to its reporter.
type Target interface {
	// SendPods sends a PodSync on the stream (blocking in flow control);
	// an error means the stream is ending.
	SendPods(*collectorv1.PodSync) error
}

// relistDelay is the wait before listing again after a failed list or a
// broken watch.
const relistDelay = time.Second

// Hub is the pod index and the subscriptions of one collector.
type Hub struct {
	store Store
	lg    *zap.Logger
	m     *metrics

	nodesMu sync.Mutex
	nodes   Nodes

	mu     sync.Mutex
	synced bool
	byNode map[string]map[string]*podv1.Pod // node → "ns/name" → pod as stored (resource_version set)
	nodeOf map[string]string                // "ns/name" → node, for deletions (which carry no value)
	subs   map[string]*Sub                  // node → its attached subscription
}

// New builds a hub; start it with Run.
func New(store Store, lg *zap.Logger, reg prometheus.Registerer) (*Hub, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Hub{store: store, lg: lg.Named("podsync"), m: m,
		byNode: map[string]map[string]*podv1.Pod{}, nodeOf: map[string]string{}, subs: map[string]*Sub{}}, nil
}

// SetNodes gives the hub the stream table (before Run).
func (h *Hub) SetNodes(n Nodes) {
	h.nodesMu.Lock()
	h.nodes = n
	h.nodesMu.Unlock()
}

func (h *Hub) getNodes() Nodes {
	h.nodesMu.Lock()
	defer h.nodesMu.Unlock()
	return h.nodes
}

// Sub is one attached stream's subscription to its node's pods.
type Sub struct {
	h    *Hub
	node string
	t    Target

	// Guarded by h.mu.
	pending map[string]change // latest change per pod, coalesced
	full    bool              // the next message is a full list
	sending bool              // a flush goroutine runs
	closed  bool
}

type change struct {
	pod *podv1.Pod          // the pod as stored now
	del *collectorv1.PodRef // or its deletion
}

// Attach subscribes node's stream: it is sent the node's pods at once (a
// full PodSync, possibly empty) and every change after. The newest attach
// of a node wins.
func (h *Hub) Attach(node string, t Target) *Sub {
	s := &Sub{h: h, node: node, t: t}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.subs[node]; old != nil {
		old.closeLocked()
	}
	h.subs[node] = s
	if h.synced {
		s.resyncLocked()
	}
	// Before the first list the sub waits: list() resyncs every sub.
	return s
}

// Detach ends the subscription.
func (s *Sub) Detach() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s.node] == s {
		delete(h.subs, s.node)
	}
	s.closeLocked()
}

func (s *Sub) closeLocked() {
	s.closed = true
	s.pending = nil
}

// resyncLocked queues a full list of the node's pods.
func (s *Sub) resyncLocked() {
	if s.closed {
		return
	}
	s.full = true
	s.pending = make(map[string]change, len(s.h.byNode[s.node]))
	for k, p := range s.h.byNode[s.node] {
		s.pending[k] = change{pod: p}
	}
	s.startLocked()
}

func (s *Sub) noteLocked(key string, c change) {
	if s.closed {
		return
	}
	if s.pending == nil {
		s.pending = map[string]change{}
	}
	s.pending[key] = c
	s.startLocked()
}

func (s *Sub) startLocked() {
	if !s.sending {
		s.sending = true
		go s.flush()
	}
}

// flush sends what is pending until nothing is: one goroutine per stream
// only while its reporter has pod news, so bursts of changes to one node's
// pods coalesce into few messages and memory stays bounded by the node's
// pods, whatever the reporter's read speed.
func (s *Sub) flush() {
	h := s.h
	for {
		h.mu.Lock()
		if s.closed || (len(s.pending) == 0 && !s.full) {
			s.sending = false
			h.mu.Unlock()
			return
		}
		msg := &collectorv1.PodSync{Full: s.full}
		keys := make([]string, 0, len(s.pending))
		for k := range s.pending {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			c := s.pending[k]
			switch {
			case c.pod != nil:
				msg.Pods = append(msg.Pods, c.pod)
			case !s.full:
				msg.Deleted = append(msg.Deleted, c.del)
			}
		}
		s.pending, s.full = nil, false
		h.mu.Unlock()
		if msg.Full {
			h.m.syncFull.Inc()
		} else {
			h.m.syncChanges.Inc()
		}
		if err := s.t.SendPods(msg); err != nil {
			h.mu.Lock()
			s.closeLocked()
			s.sending = false
			h.mu.Unlock()
			return
		}
	}
}

// Run lists and watches until ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	first := true
	for ctx.Err() == nil {
		rev, err := h.list(ctx)
		if err != nil {
			h.lg.Warn("cannot list pods; retrying", zap.Error(err))
			sleep(ctx, relistDelay)
			continue
		}
		if !first {
			// Deletions of nodes during the gap were not seen.
			h.checkAttached(ctx)
		}
		first = false
		err = h.follow(ctx, rev)
		if ctx.Err() != nil {
			return nil
		}
		h.lg.Warn("pod or node watch ended; listing again", zap.Error(err))
		h.m.relists.Inc()
		sleep(ctx, relistDelay)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// list rebuilds the index and sends every subscriber a full list.
func (h *Hub) list(ctx context.Context) (int64, error) {
	objs, rev, err := h.store.List(ctx, nodestore.Pods, nodestore.ListOptions{})
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byNode, h.nodeOf = map[string]map[string]*podv1.Pod{}, map[string]string{}
	for _, o := range objs {
		p := asPod(o)
		if n := p.GetSpec().GetNodeName(); n != "" {
			h.indexLocked(o.Name, n, p)
		}
	}
	h.synced = true
	for _, s := range h.subs {
		s.resyncLocked()
	}
	h.m.indexed.Set(float64(len(h.nodeOf)))
	return rev, nil
}

// asPod is the stored pod with its resource version, as served.
func asPod(o nodestore.Object) *podv1.Pod {
	p, _ := o.Value.(*podv1.Pod)
	if p == nil {
		p = &podv1.Pod{}
	}
	if p.Metadata == nil {
		p.Metadata = &nodev1.ObjectMeta{}
	}
	p.Metadata.ResourceVersion = fmt.Sprint(o.ModRevision)
	return p
}

func (h *Hub) indexLocked(key, node string, p *podv1.Pod) {
	m := h.byNode[node]
	if m == nil {
		m = map[string]*podv1.Pod{}
		h.byNode[node] = m
	}
	m[key] = p
	h.nodeOf[key] = node
}

// unindexLocked removes key from its node and tells that node's reporter.
func (h *Hub) unindexLocked(key string) {
	node, ok := h.nodeOf[key]
	if !ok {
		return
	}
	old := h.byNode[node][key]
	delete(h.byNode[node], key)
	if len(h.byNode[node]) == 0 {
		delete(h.byNode, node)
	}
	delete(h.nodeOf, key)
	if s := h.subs[node]; s != nil {
		s.noteLocked(key, change{del: &collectorv1.PodRef{Namespace: old.GetMetadata().GetNamespace(),
			Name: old.GetMetadata().GetName(), Uid: old.GetMetadata().GetUid()}})
	}
}

// follow applies the pod watch and the node-deletion watch from rev until
// one of them fails.
func (h *Hub) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods := nodestore.WatchKind(wctx, h.store, nodestore.Pods, rev, nodestore.KindWatchOptions{})
	nodes := nodestore.WatchKind(wctx, h.store, nodestore.Nodes, rev, nodestore.KindWatchOptions{DeletesOnly: true})
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-pods:
			if !ok {
				return errors.New("pod watch closed")
			}
			if b.Err != nil {
				return b.Err
			}
			h.applyPods(b.Events)
		case b, ok := <-nodes:
			if !ok {
				return errors.New("node watch closed")
			}
			if b.Err != nil {
				return b.Err
			}
			for _, e := range b.Events {
				if e.Type == nodestore.DeleteEvent {
					h.nodeDeleted(ctx, e.Object.Name)
				}
			}
		}
	}
}

func (h *Hub) applyPods(evs []nodestore.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		key := e.Object.Name
		if e.Type == nodestore.DeleteEvent {
			h.unindexLocked(key)
			continue
		}
		p := asPod(e.Object)
		node := p.GetSpec().GetNodeName()
		if old, ok := h.nodeOf[key]; ok && old != node {
			// Bound elsewhere (PodService binds at create, so only a pod
			// deleted and created again under the same name in one batch
			// gets here): gone for the old node.
			h.unindexLocked(key)
		}
		if node == "" {
			continue
		}
		h.indexLocked(key, node, p)
		if s := h.subs[node]; s != nil {
			s.noteLocked(key, change{pod: p})
		}
	}
	h.m.indexed.Set(float64(len(h.nodeOf)))
}

// nodeDeleted ends the stream of an attached node whose object is gone.
// The node is read again first: its own reporter may already have
// registered it again (a new uid) on this collector, and that stream must
// stay.
func (h *Hub) nodeDeleted(ctx context.Context, name string) {
	n := h.getNodes()
	if n == nil {
		return
	}
	uid, ok := n.AttachedUID(name)
	if !ok {
		return
	}
	cur, err := h.currentUID(ctx, name)
	if err != nil {
		h.lg.Warn("cannot read a deleted node's object again; ending its stream anyway", zap.String("node", name), zap.Error(err))
	} else if cur == uid {
		return
	}
	h.m.nodesDeleted.Inc()
	h.lg.Info("attached node's object was deleted: ending its stream so that it registers again", zap.String("node", name), zap.String("uid", uid))
	n.NodeDeleted(name, uid)
}

// currentUID is the uid of nodes/<name> now ("" when it does not exist).
func (h *Hub) currentUID(ctx context.Context, name string) (string, error) {
	o, err := h.store.Get(ctx, nodestore.Nodes, name)
	if errors.Is(err, nodestore.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	nd, _ := o.Value.(*nodev1.Node)
	return nd.GetMetadata().GetUid(), nil
}

// checkAttached ends the streams of attached nodes whose objects are gone
// (after a watch gap, in which their deletions may have been missed).
func (h *Hub) checkAttached(ctx context.Context) {
	n := h.getNodes()
	if n == nil {
		return
	}
	names := n.AttachedNames()
	refs := make([]nodestore.Ref, len(names))
	for i, name := range names {
		refs[i] = nodestore.Ref{Kind: nodestore.Nodes, Name: name}
	}
	got, err := nodestore.GetMany(ctx, h.store, h.store.MaxOps(), refs)
	if err != nil {
		h.lg.Warn("cannot check the attached nodes after a watch gap", zap.Error(err))
		return
	}
	for i, r := range got {
		uid, ok := n.AttachedUID(names[i])
		if !ok {
			continue
		}
		var cur string
		if r.Found {
			nd, _ := r.Object.Value.(*nodev1.Node)
			cur = nd.GetMetadata().GetUid()
		}
		if cur != uid {
			h.m.nodesDeleted.Inc()
			n.NodeDeleted(names[i], uid)
		}
	}
}

type metrics struct {
	syncFull, syncChanges, relists, nodesDeleted prometheus.Counter
	indexed                                      prometheus.Gauge
	writes                                       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	syncs := metric.CounterVec("nodepulse_collector_pod_syncs_total",
		"PodSync messages sent to reporters that act as their node's kubelet, by kind (full: at attach or after a relist; changes).", "kind")
	m := &metrics{
		relists: metric.Counter("nodepulse_collector_pod_relists_total",
			"Lists of pods/ after a broken pod or node watch (each sends every subscribed reporter a full PodSync)."),
		nodesDeleted: metric.Counter("nodepulse_collector_nodes_deleted_total",
			"Streams ended because their node object was deleted (the reporter registers again)."),
		indexed: metric.Gauge("nodepulse_collector_pods_indexed", "Pods bound to a node held in this collector's pod index."),
		writes: metric.CounterVec("nodepulse_collector_pod_writes_total",
			"Pod writes from reporters, by kind (status, delete, mirror) and result (ok, unchanged, or the gRPC code of the refusal).", "kind", "result"),
	}
	m.syncFull, m.syncChanges = syncs.WithLabelValues("full"), syncs.WithLabelValues("changes")
	if err := metric.Register(reg, syncs, m.relists, m.nodesDeleted, m.indexed, m.writes); err != nil {
		return nil, err
	}
	return m, nil
}
