// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
)

const prefix = "/nodepulse/"

// statusWrite is one write of status/<node>.
type statusWrite struct {
	rev    int64
	at     time.Time
	status *nodev1.NodeStatus
}

// healthWrite is one write of health/<node>: whether it marks the node's
// Ready Unknown, and the leader identity it carries (ADR 0004).
type healthWrite struct {
	rev     int64
	at      time.Time
	node    string
	unknown bool
	// decided is when the leader decided the mark: the Ready override's
	// transition time (every process of the suite shares the machine's
	// clock; clock-step moves only the nodes' message times). Zero when
	// the write does not mark. A mark's write and its receipt (at) can
	// trail the decision by seconds on a starved machine.
	decided time.Time
	// noExecute: the record carries the not-ready or unreachable NoExecute
	// taint, which is what the taint eviction acts on.
	noExecute bool
	leader    string
}

// electionEvent is a put or delete under election/monitor/.
type electionEvent struct {
	rev       int64
	key       string
	createRev int64
	value     string
	deleted   bool
}

// monitorTransition is a change of a node's served Ready status seen on
// one monitor's WatchNodes.
type monitorTransition struct {
	monitor  int
	node     string
	from, to string
	at       time.Time
}

// recorder keeps what the suite saw happen, for the checker.
type recorder struct {
	mu         sync.Mutex
	status     map[string][]statusWrite
	health     []healthWrite
	election   []electionEvent
	nodes      map[string]bool
	transits   []monitorTransition
	pods       []podWrite
	watchErrs  int
	lastRev    int64
	decodeErrs int
	writes     int
}

func newRecorder() *recorder {
	return &recorder{status: map[string][]statusWrite{}, nodes: map[string]bool{}}
}

// watchEtcd records every write under the prefix from revision 1 until ctx
// ends. A broken watch (a member killed) resumes after the last revision
// seen on another member, so nothing is missed or seen twice.
func (r *recorder) watchEtcd(ctx context.Context, cli *clientv3.Client) {
	for ctx.Err() == nil {
		r.mu.Lock()
		from := r.lastRev + 1
		r.mu.Unlock()
		wch := cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			// A Txn's writes share one revision and come in one response:
			// events are deduplicated by revision per response, after a
			// resumed watch.
			now := time.Now()
			r.mu.Lock()
			done, top := r.lastRev, r.lastRev
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision > done {
					r.event(ev, now)
					top = max(top, ev.Kv.ModRevision)
				}
			}
			r.lastRev = top
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.watchErrs++
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// event records one write; r.mu is held.
func (r *recorder) event(ev *clientv3.Event, now time.Time) {
	kv := ev.Kv
	r.writes++
	key := string(kv.Key)
	deleted := ev.Type == clientv3.EventTypeDelete
	if rest, ok := strings.CutPrefix(key, prefix+"election/monitor/"); ok {
		r.election = append(r.election, electionEvent{rev: kv.ModRevision, key: rest, createRev: kv.CreateRevision,
			value: string(kv.Value), deleted: deleted})
		return
	}
	kind, name, ok := nodestore.ParseKey(prefix, key)
	if !ok {
		return
	}
	if kind == nodestore.Pods {
		// A deleted pod is named by its previous value.
		v := kv.Value
		if deleted {
			if ev.PrevKv == nil {
				r.decodeErrs++
				return
			}
			v = ev.PrevKv.Value
		}
		m, err := etcdstore.DecodeValue(kind, v)
		if err != nil {
			r.decodeErrs++
			return
		}
		r.podEvent(name, kv.ModRevision, now, deleted, m.(*podv1.Pod))
		return
	}
	if deleted {
		return
	}
	switch kind {
	case nodestore.Nodes:
		r.nodes[name] = true
	case nodestore.Statuses:
		m, err := etcdstore.DecodeValue(kind, kv.Value)
		if err != nil {
			r.decodeErrs++
			return
		}
		r.status[name] = append(r.status[name], statusWrite{rev: kv.ModRevision, at: now, status: m.(*nodev1.NodeStatus)})
	case nodestore.Health:
		m, err := etcdstore.DecodeValue(kind, kv.Value)
		if err != nil {
			r.decodeErrs++
			return
		}
		h := m.(*nodev1.NodeHealth)
		unknown := nodemodel.ConditionStatus(h.GetConditionOverrides(), nodemodel.Ready) == nodemodel.Unknown
		var decided time.Time
		if c := nodemodel.FindCondition(h.GetConditionOverrides(), nodemodel.Ready); unknown && c.GetLastTransitionTime() != nil {
			decided = c.GetLastTransitionTime().AsTime()
		}
		noExec := false
		for _, t := range h.GetTaints() {
			if t.GetEffect() == nodemodel.NoExecute && (t.GetKey() == nodemodel.TaintUnreachable || t.GetKey() == nodemodel.TaintNotReady) {
				noExec = true
			}
		}
		r.health = append(r.health, healthWrite{rev: kv.ModRevision, at: now, node: name, unknown: unknown, decided: decided, noExecute: noExec, leader: h.GetLeader()})
	}
}

// revision is the last revision recorded.
func (r *recorder) revision() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRev
}

// watchMonitor records the Ready transitions monitor i serves, reconnecting
// (with a fresh list) whenever the monitor restarts.
func (r *recorder) watchMonitor(ctx context.Context, i int, addr string) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return
	}
	defer cc.Close()
	client := nodev1.NewNodeServiceClient(cc)
	ready := map[string]string{}
	for ctx.Err() == nil {
		st, err := client.WatchNodes(ctx, &nodev1.WatchNodesRequest{})
		if err == nil {
			for {
				m, err := st.Recv()
				if err != nil {
					break
				}
				name := m.GetNode().GetMetadata().GetName()
				if name == "" {
					continue
				}
				to := nodemodel.ConditionStatus(m.GetNode().GetStatus().GetConditions(), nodemodel.Ready)
				if m.GetType() == "DELETED" {
					to = "Deleted"
				}
				if from := ready[name]; from != to {
					ready[name] = to
					r.mu.Lock()
					r.transits = append(r.transits, monitorTransition{monitor: i, node: name, from: from, to: to, at: time.Now()})
					r.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// served lists every node as monitor addr serves it now: name → Ready.
func served(ctx context.Context, addr string) (map[string]string, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := map[string]string{}
	token := ""
	for {
		resp, err := nodev1.NewNodeServiceClient(cc).ListNodes(ctx, &nodev1.ListNodesRequest{PageSize: 5000, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list nodes on %s: %w", addr, err)
		}
		for _, n := range resp.GetNodes() {
			out[n.GetMetadata().GetName()] = nodemodel.ConditionStatus(n.GetStatus().GetConditions(), nodemodel.Ready)
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}
