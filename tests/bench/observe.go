// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// Ready states as the monitor serves them.
const (
	stNone uint8 = iota // not seen or no Ready condition
	stTrue
	stFalse
	stUnknown
)

type nodeState struct {
	// lastHeard: observer clock (unix ns) of the node's latest sign of life
	// on the feed: a RENEWED or ATTACHED when it arrived, or a
	// STATUS_REPORTED when the collector received the report (its age at
	// the batch's sent_time taken off the arrival). The monitor counts
	// status reports as liveness too (spec §6.7), so a node that reported
	// after its last renewal was alive until then.
	lastHeard int64
	lastWait  int64 // observer clock of the latest WAITING (the reporter was refused or queued)
	unknownAt int64 // observer clock of the latest turn to Unknown
	attached  bool
	ready     uint8
	everReady bool
}

// UnknownEvent is a node turning Unknown, as the monitor served it.
type UnknownEvent struct {
	Name string
	At   time.Time
	// SinceHeard: time since the node's latest sign of life on the
	// collector's feed (a renewal, or a status report's receipt).
	SinceHeard time.Duration
	// SinceWaiting: time since the observer last saw the node WAITING on
	// the feed (0: never), which tells a reporter the collector kept
	// refusing from one it never heard from.
	SinceWaiting time.Duration
	// MarkedAt: the served Ready condition's lastTransitionTime, the
	// monitor's clock when it marked the node (zero when absent). On one
	// host it splits a detection into the monitor's judgement and the way
	// from its mark to this observer (health write, etcd watch, cache,
	// WatchNodes).
	MarkedAt time.Time
}

// Observer follows the collector's liveness feed and the monitor's node
// watch, independently of the components under test: it sees every
// renewal (to count them and bin them per 100 ms by the reporter's
// renewTime) and every Ready change (to time detections and catch false
// Unknowns).
type Observer struct {
	start time.Time
	mu    sync.Mutex
	nodes map[string]*nodeState

	attached                      int
	ready, notReady, unknown      int
	renewals                      uint64
	bins                          []int32 // renewals per 100 ms of renewTime since start
	feedLatency                   Histogram
	unknownEvents                 []UnknownEvent
	feedConnected, watchConnected bool
	feedSnapshots                 int
	feedErrors, watchErrors       int
}

// NewObserver starts with an empty view.
func NewObserver(start time.Time) *Observer {
	return &Observer{start: start, nodes: map[string]*nodeState{}}
}

func (o *Observer) node(name string) *nodeState {
	n := o.nodes[name]
	if n == nil {
		n = &nodeState{}
		o.nodes[name] = n
	}
	return n
}

// FollowFeed follows collector addr's WatchLiveness until ctx ends,
// reconnecting (the collector restarts during the benchmark).
func (o *Observer) FollowFeed(ctx context.Context, addr string) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return
	}
	defer cc.Close()
	client := collectorv1.NewFeedServiceClient(cc)
	for ctx.Err() == nil {
		stream, err := client.WatchLiveness(ctx, &collectorv1.WatchLivenessRequest{Watcher: "nodepulse-bench"})
		if err == nil {
			for {
				m, err := stream.Recv()
				if err != nil {
					break
				}
				o.feedBatch(m, time.Now())
			}
		}
		o.mu.Lock()
		o.feedConnected = false
		o.feedErrors++
		o.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (o *Observer) feedBatch(m *collectorv1.WatchLivenessResponse, now time.Time) {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.feedConnected = true
	if m.GetSnapshot() {
		o.feedSnapshots++
		for _, n := range o.nodes {
			n.attached = false
		}
		o.attached = 0
	}
	for _, e := range m.GetEvents() {
		n := o.node(e.GetNodeName())
		switch e.GetKind() {
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED:
			if !n.attached {
				n.attached = true
				o.attached++
			}
			n.lastHeard = nowNs
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED:
			if !n.attached { // a renewal implies attachment (events after a partial snapshot)
				n.attached = true
				o.attached++
			}
			n.lastHeard = nowNs
			o.renewals++
			if rt := e.GetRenewTime(); rt != nil {
				t := rt.AsTime()
				o.feedLatency.Observe(now.Sub(t))
				if b := int(t.Sub(o.start) / (100 * time.Millisecond)); b >= 0 {
					for len(o.bins) <= b {
						o.bins = append(o.bins, 0)
					}
					o.bins[b]++
				}
			}
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED:
			if m.GetSnapshot() {
				break // a repetition of the latest report, not a new one
			}
			at := nowNs
			if rcv, sent := e.GetReceivedTime(), m.GetSentTime(); rcv != nil && sent != nil {
				at -= max(int64(sent.AsTime().Sub(rcv.AsTime())), 0)
			}
			n.lastHeard = max(n.lastHeard, at)
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING:
			n.lastWait = nowNs
		case collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED:
			if n.attached {
				n.attached = false
				o.attached--
			}
		}
	}
}

// WatchNodes follows monitor addr's WatchNodes until ctx ends.
func (o *Observer) WatchNodes(ctx context.Context, addr string) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return
	}
	defer cc.Close()
	client := nodev1.NewNodeServiceClient(cc)
	rv := ""
	for ctx.Err() == nil {
		stream, err := client.WatchNodes(ctx, &nodev1.WatchNodesRequest{ResourceVersion: rv})
		if err == nil {
			for {
				m, err := stream.Recv()
				if err != nil {
					if strings.Contains(err.Error(), "OutOfRange") || strings.Contains(err.Error(), "too old") {
						rv = "" // relist
					}
					break
				}
				rv = m.GetResourceVersion()
				o.nodeEvent(m, time.Now())
			}
		}
		o.mu.Lock()
		o.watchConnected = false
		o.watchErrors++
		o.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readyTransition is the Ready condition's lastTransitionTime (zero when
// there is none).
func readyTransition(n *nodev1.Node) time.Time {
	for _, c := range n.GetStatus().GetConditions() {
		if c.GetType() == "Ready" && c.GetLastTransitionTime() != nil {
			return c.GetLastTransitionTime().AsTime()
		}
	}
	return time.Time{}
}

func readyOf(n *nodev1.Node) uint8 {
	for _, c := range n.GetStatus().GetConditions() {
		if c.GetType() == "Ready" {
			switch c.GetStatus() {
			case "True":
				return stTrue
			case "False":
				return stFalse
			case "Unknown":
				return stUnknown
			}
		}
	}
	return stNone
}

func (o *Observer) count(st uint8, d int) {
	switch st {
	case stTrue:
		o.ready += d
	case stFalse:
		o.notReady += d
	case stUnknown:
		o.unknown += d
	}
}

func (o *Observer) nodeEvent(m *nodev1.WatchNodesResponse, now time.Time) {
	name := m.GetNode().GetMetadata().GetName()
	if name == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.watchConnected = true
	n := o.node(name)
	st := readyOf(m.GetNode())
	if m.GetType() == "DELETED" {
		st = stNone
	}
	if st == n.ready {
		return
	}
	o.count(n.ready, -1)
	o.count(st, +1)
	if st == stUnknown {
		n.unknownAt = now.UnixNano()
		ev := UnknownEvent{Name: name, At: now, MarkedAt: readyTransition(m.GetNode())}
		if n.lastHeard > 0 {
			ev.SinceHeard = time.Duration(now.UnixNano() - n.lastHeard)
		}
		if n.lastWait > 0 {
			ev.SinceWaiting = time.Duration(now.UnixNano() - n.lastWait)
		}
		o.unknownEvents = append(o.unknownEvents, ev)
	}
	if st == stTrue {
		n.everReady = true
	}
	n.ready = st
}

// View is a point-in-time summary of the observer.
type View struct {
	At                            time.Time
	Attached                      int
	Ready, NotReady, Unknown      int
	Renewals                      uint64
	FeedLatency                   HistSnapshot
	FeedConnected, WatchConnected bool
	UnknownEvents                 int
}

// Snapshot returns the current summary.
func (o *Observer) Snapshot() View {
	o.mu.Lock()
	defer o.mu.Unlock()
	return View{At: time.Now(), Attached: o.attached, Ready: o.ready, NotReady: o.notReady, Unknown: o.unknown,
		Renewals: o.renewals, FeedLatency: o.feedLatency.Snapshot(), FeedConnected: o.feedConnected,
		WatchConnected: o.watchConnected, UnknownEvents: len(o.unknownEvents)}
}

// CountAttached counts attached nodes whose name has prefix.
func (o *Observer) CountAttached(prefix string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := 0
	for name, n := range o.nodes {
		if n.attached && strings.HasPrefix(name, prefix) {
			c++
		}
	}
	return c
}

// CountReady counts nodes with prefix by Ready state.
func (o *Observer) CountReady(prefix string) (ready, unknown int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, n := range o.nodes {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		switch n.ready {
		case stTrue:
			ready++
		case stUnknown:
			unknown++
		}
	}
	return ready, unknown
}

// LastRenewals returns the observer clock of the latest sign of life on the
// feed (renewal or status report, see nodeState.lastHeard) of every node
// with prefix.
func (o *Observer) LastRenewals(prefix string) map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]time.Time{}
	for name, n := range o.nodes {
		if strings.HasPrefix(name, prefix) && n.lastHeard > 0 {
			out[name] = time.Unix(0, n.lastHeard)
		}
	}
	return out
}

// UnknownEvents since index from.
func (o *Observer) UnknownEvents(from int) []UnknownEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	if from >= len(o.unknownEvents) {
		return nil
	}
	return append([]UnknownEvent(nil), o.unknownEvents[from:]...)
}

// Bins returns the renewals per 100 ms whose renewTime lies in [from, to).
func (o *Observer) Bins(from, to time.Time) []float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := int(from.Sub(o.start) / (100 * time.Millisecond))
	b := int(to.Sub(o.start) / (100 * time.Millisecond))
	var out []float64
	for i := max(a, 0); i < b; i++ {
		v := 0.0
		if i < len(o.bins) {
			v = float64(o.bins[i])
		}
		out = append(out, v)
	}
	return out
}

func (o *Observer) feedSnapshotCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.feedSnapshots
}
