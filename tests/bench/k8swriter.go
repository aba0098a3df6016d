// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodepulse/nodepulse/services/run"
)

// The Kubernetes write path, reduced to what reaches etcd: every node's
// kubelet renews its coordination.k8s.io/v1 Lease every 10 s (40 s lease,
// renewInterval = 0.25 × duration, jitter 0.04, timed from the end of the
// previous renewal), and the API server turns each renewal into one etcd
// Txn: If(mod_revision == known) Then(Put) Else(Get) (GuaranteedUpdate).
// The writer leaves out the API server itself (its CPU, its watch cache)
// and the kubelet's node-status writes every 5 minutes, so the baseline it
// measures is a lower bound of what Kubernetes costs.

// WriterConfig configures the baseline writer process.
type WriterConfig struct {
	Endpoints  string
	Listen     string
	Clients    int
	Workers    int
	Interval   time.Duration
	Jitter     float64
	RampRate   float64
	NamePrefix string
	KeyPrefix  string
	// CompactionInterval: compact etcd this often, as kube-apiserver does
	// (--etcd-compaction-interval, 5 min by default), to the revision of
	// the previous tick; 0 never.
	CompactionInterval time.Duration
}

func (c *WriterConfig) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoints, "etcd", "127.0.0.1:12379", "etcd client endpoint")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:19194", "control HTTP address (POST /target?n=, GET /stats, /debug/pprof)")
	fs.IntVar(&c.Clients, "clients", 8, "etcd client connections to multiplex the nodes' writes over")
	fs.IntVar(&c.Workers, "workers", 256, "concurrent in-flight Txns at most")
	fs.DurationVar(&c.Interval, "interval", 10*time.Second, "lease renew interval")
	fs.Float64Var(&c.Jitter, "jitter", 0.04, "renew interval jitter factor (kubelet: 0.04)")
	fs.Float64Var(&c.RampRate, "ramp-rate", 5000, "new nodes per second when the target grows")
	fs.DurationVar(&c.CompactionInterval, "compaction-interval", time.Minute, "compact etcd this often to the revision of the previous compaction tick, as kube-apiserver's --etcd-compaction-interval (0: never)")
	fs.StringVar(&c.NamePrefix, "name-prefix", "k8s-node-", "node names are <prefix><index>")
	fs.StringVar(&c.KeyPrefix, "key-prefix", "/registry/leases/kube-node-lease/", "etcd key prefix of the Lease objects")
}

// WriterStats is the cumulative state of the writer, served on /stats.
type WriterStats struct {
	Target    int    `json:"target"`
	Active    int    `json:"active"`
	Created   uint64 `json:"created"`
	Renewals  uint64 `json:"renewals"`
	Errors    uint64 `json:"errors"`
	Conflicts uint64 `json:"conflicts"`
	// Compactions done so far (CompactionInterval).
	Compactions uint64       `json:"compactions"`
	Bytes       uint64       `json:"bytes"`
	LeaseSize   int          `json:"leaseSize"`
	Latency     HistSnapshot `json:"latency"` // due time until the Txn answered
}

type wnode struct {
	rev     int64
	created bool
}

type dueNode struct {
	due int64
	idx int32
}

type dueNodes []dueNode

func (h dueNodes) Len() int           { return len(h) }
func (h dueNodes) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueNodes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueNodes) Push(x any)        { *h = append(*h, x.(dueNode)) }
func (h *dueNodes) Pop() any {
	o := *h
	x := o[len(o)-1]
	*h = o[:len(o)-1]
	return x
}

type writer struct {
	cfg                                       WriterConfig
	clients                                   []*clientv3.Client
	mu                                        sync.Mutex
	due                                       dueNodes
	nodes                                     []wnode
	target                                    atomic.Int64
	active                                    atomic.Int64
	wake                                      chan struct{}
	hist                                      Histogram
	created, renewals, errs, conflicts, bytes atomic.Uint64
	compactions                               atomic.Uint64
}

// leaseCodec encodes Leases as kube-apiserver stores built-in types in
// etcd: protobuf, in the "k8s\x00" envelope (a runtime.Unknown carrying the
// apiVersion and kind) that k8s.io/apimachinery's protobuf serializer
// writes. JSON (728 B) would flatter the comparison: the API server never
// stores a built-in type that way.
var leaseCodec = func() runtime.Encoder {
	sch := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(sch); err != nil {
		panic(err)
	}
	return protobuf.NewSerializer(sch, sch)
}()

// leaseProto renders a node's Lease as the API server stores it: metadata
// with uid, ownerReferences and the kubelet's managedFields, and the spec,
// in the protobuf envelope (leaseCodec).
func leaseProto(name string, idx int, now time.Time) []byte {
	created := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	renew := metav1.NewMicroTime(now)
	holder, dur := name, int32(40)
	l := &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease", CreationTimestamp: created,
			UID:             types.UID(fmt.Sprintf("%08x-5c1e-4b7a-9d2f-%012x", idx, idx)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(fmt.Sprintf("%08x-0f3a-4c55-8e21-%012x", idx+7, idx+7))}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "coordination.k8s.io/v1",
				Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:ownerReferences":{}},"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:renewTime":{}}}`)}},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &renew},
	}
	var b bytes.Buffer
	if err := leaseCodec.Encode(l, &b); err != nil {
		panic(fmt.Sprintf("encode lease: %v", err)) // a fixed, valid object: cannot fail
	}
	return b.Bytes()
}

// RunWriter is the "k8s-writer" subcommand of the bench tool.
func RunWriter(ctx context.Context, args []string) error {
	var cfg WriterConfig
	fs := flag.NewFlagSet("bench k8s-writer", flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	w := &writer{cfg: cfg, wake: make(chan struct{}, 1)}
	for range max(cfg.Clients, 1) {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Endpoints}, DialTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer c.Close()
		w.clients = append(w.clients, c)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	mux.HandleFunc("/stats", func(rw http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(rw).Encode(w.stats())
	})
	mux.HandleFunc("/target", func(rw http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 {
			http.Error(rw, "n must be a non-negative integer", http.StatusBadRequest)
			return
		}
		w.target.Store(int64(n))
		_, _ = fmt.Fprintf(rw, "target %d\n", n)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	work := make(chan dueNode, cfg.Workers)
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.work(ctx, w.clients[i%len(w.clients)], work) }()
	}
	go w.grow(ctx)
	go w.compact(ctx)
	w.schedule(ctx, work)
	close(work)
	wg.Wait()
	return nil
}

func (w *writer) stats() WriterStats {
	return WriterStats{Target: int(w.target.Load()), Active: int(w.active.Load()), Created: w.created.Load(), Renewals: w.renewals.Load(),
		Errors: w.errs.Load(), Conflicts: w.conflicts.Load(), Compactions: w.compactions.Load(), Bytes: w.bytes.Load(),
		LeaseSize: len(leaseProto(w.cfg.NamePrefix+"000000", 0, time.Now())), Latency: w.hist.Snapshot()}
}

// compact compacts etcd every CompactionInterval to the revision read at
// the previous tick, as the API server's compactor does, so a baseline
// stage pays for compactions as a Kubernetes control plane does.
func (w *writer) compact(ctx context.Context) {
	if w.cfg.CompactionInterval <= 0 {
		return
	}
	c := w.clients[0]
	var prev int64
	run.Every(ctx, w.cfg.CompactionInterval, func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := c.Get(rctx, "compact_rev_key")
		if err != nil {
			return
		}
		if prev > 0 {
			if _, err := c.Compact(rctx, prev); err == nil {
				w.compactions.Add(1)
			}
		}
		prev = resp.Header.Revision
	})
}

// grow activates nodes up to the target at the ramp rate; each is due at
// once (its first write creates the Lease).
func (w *writer) grow(ctx context.Context) {
	run.Every(ctx, 10*time.Millisecond, func() {
		target := int(w.target.Load())
		act := int(w.active.Load())
		if act >= target {
			return
		}
		add := min(target-act, max(int(w.cfg.RampRate/100), 1))
		now := time.Now().UnixNano()
		w.mu.Lock()
		for i := act; i < act+add; i++ {
			if i >= len(w.nodes) {
				w.nodes = append(w.nodes, wnode{})
			}
			heap.Push(&w.due, dueNode{due: now, idx: int32(i)})
		}
		// Before the scheduler can hand the new nodes out (it needs the lock).
		w.active.Store(int64(act + add))
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	})
}

// schedule hands due nodes to the workers in due order. When the workers
// cannot keep up, nodes wait here and their latency (measured from the due
// time) grows: that is the saturation the benchmark looks for.
func (w *writer) schedule(ctx context.Context, work chan<- dueNode) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		var next dueNode
		have := w.due.Len() > 0
		if have {
			next = w.due[0]
		}
		w.mu.Unlock()
		if have {
			if d := time.Duration(next.due - time.Now().UnixNano()); d <= 0 {
				w.mu.Lock()
				it := heap.Pop(&w.due).(dueNode)
				w.mu.Unlock()
				select {
				case work <- it:
				case <-ctx.Done():
					return
				}
				continue
			} else {
				timer.Reset(d)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
	}
}

func (w *writer) work(ctx context.Context, c *clientv3.Client, in <-chan dueNode) {
	for it := range in {
		idx := int(it.idx)
		if idx >= int(w.active.Load()) {
			continue // the target shrank
		}
		name := fmt.Sprintf("%s%06d", w.cfg.NamePrefix, idx)
		key := w.cfg.KeyPrefix + name
		val := leaseProto(name, idx, time.Now())
		w.mu.Lock()
		n := w.nodes[idx]
		w.mu.Unlock()
		var cmp clientv3.Cmp
		if n.created {
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", n.rev)
		} else {
			cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.Txn(rctx).If(cmp).Then(clientv3.OpPut(key, string(val))).Else(clientv3.OpGet(key)).Commit()
		cancel()
		ack := time.Now()
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return
			}
			w.errs.Add(1)
		} else {
			w.hist.Observe(time.Duration(ack.UnixNano() - it.due))
			if resp.Succeeded {
				if !n.created {
					w.created.Add(1)
				}
				n.rev, n.created = resp.Header.Revision, true
				w.renewals.Add(1)
				w.bytes.Add(uint64(len(key) + len(val)))
			} else {
				// Someone else wrote it (a previous run): adopt its revision,
				// as GuaranteedUpdate retries from fresh state.
				w.conflicts.Add(1)
				if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
					n.rev, n.created = kvs[0].ModRevision, true
				}
			}
		}
		w.mu.Lock()
		w.nodes[idx] = n
		jit := time.Duration(rand.Float64() * w.cfg.Jitter * float64(w.cfg.Interval))
		heap.Push(&w.due, dueNode{due: ack.Add(w.cfg.Interval + jit).UnixNano(), idx: it.idx})
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}
