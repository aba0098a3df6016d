// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package robustness

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// podsPerReporter: pods kept on every reporter node. Evicted ones are
// replaced before the next fault, so every long enough kill has pods to
// evict.
const podsPerReporter = 2

// podWrite is one write of pods/<ns>/<name>.
type podWrite struct {
	rev         int64
	at          time.Time
	key         string
	uid         string
	node        string
	terminating bool // deletionTimestamp set: a graceful deletion (an eviction here) began
	deleted     bool
}

// podPool creates pods on the reporter nodes through a monitor's PodService.
type podPool struct {
	addrs   []string
	next    int
	created int
}

// fill creates pods until each reporter node has podsPerReporter live
// (not terminating) ones, counted from the recorder's view of etcd.
func (p *podPool) fill(ctx context.Context, rec *recorder, reporters int) error {
	live := map[string]int{}
	rec.mu.Lock()
	state := map[string]podWrite{}
	for _, w := range rec.pods {
		state[w.key] = w
	}
	rec.mu.Unlock()
	for _, w := range state {
		if !w.deleted && !w.terminating {
			live[w.node]++
		}
	}
	var last error
	for i := range reporters {
		node := fmt.Sprintf("r-%d", i)
		for k := live[node]; k < podsPerReporter; k++ {
			p.next++
			pod := &podv1.Pod{
				Metadata: &nodev1.ObjectMeta{Namespace: "robustness", Name: fmt.Sprintf("p-%s-%d", node, p.next),
					OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs-" + node, Controller: true}}},
				Spec: &podv1.PodSpec{NodeName: node},
			}
			if err := p.create(ctx, pod); err != nil {
				last = err
				continue
			}
			p.created++
		}
	}
	return last
}

// create tries each monitor in turn (one may be down: any replica serves
// PodService).
func (p *podPool) create(ctx context.Context, pod *podv1.Pod) error {
	var last error
	for _, a := range p.addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = podv1.NewPodServiceClient(cc).CreatePod(cctx, &podv1.CreatePodRequest{Pod: pod})
		cancel()
		cc.Close()
		if err == nil {
			return nil
		}
		last = err
	}
	return fmt.Errorf("create pod %s: %w", pod.GetMetadata().GetName(), last)
}

// checkPods: a pod's graceful deletion (set by the taint eviction, the
// only deleter in the suite) begins at most once per pod; only while its
// node is marked Unknown or still carries the NoExecute taint in etcd at
// that revision (the taint is lifted a pass after the node recovers, and a
// pod bound in between is evicted when its toleration runs out there, as
// upstream's taint manager does); and no earlier than the toleration after
// the mark. A pod deleted is never written again.
func checkPods(h *history, s *Summary) {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	s.PodsCreated = h.podsCreated
	terminating := map[string]bool{}
	evictions := map[string]int{}
	gone := map[string]bool{}
	health := h.rec.health
	hi := 0
	unknown := map[string]bool{}
	tainted := map[string]bool{}
	markedAt := map[string]time.Time{}
	for _, w := range h.rec.pods {
		// The node's health as of this pod write's revision.
		for hi < len(health) && health[hi].rev < w.rev {
			x := health[hi]
			if x.unknown && !unknown[x.node] {
				markedAt[x.node] = x.at
			}
			unknown[x.node] = x.unknown
			tainted[x.node] = x.noExecute
			hi++
		}
		if gone[w.uid] {
			s.violate(InvPodEvictedOnce, "pod %s (uid %s) written at revision %d after it was deleted", w.key, w.uid, w.rev)
		}
		if w.deleted {
			gone[w.uid] = true
			continue
		}
		was := terminating[w.uid]
		terminating[w.uid] = w.terminating
		if !w.terminating || was {
			continue
		}
		evictions[w.uid]++
		s.Evictions++
		s.check(InvPodEvictedOnce)
		if evictions[w.uid] > 1 {
			s.violate(InvPodEvictedOnce, "pod %s (uid %s) evicted again at revision %d", w.key, w.uid, w.rev)
		}
		s.check(InvPodEvictedUnhealthy)
		if !unknown[w.node] && !tainted[w.node] {
			s.violate(InvPodEvictedUnhealthy, "pod %s evicted at revision %d while its node %s was neither marked Unknown nor tainted NoExecute", w.key, w.rev, w.node)
			continue
		}
		s.check(InvPodNotEvictedEarly)
		// Both the mark and the eviction are seen no earlier than they
		// were written; allow 1 s of the recorder's skew between them.
		if d := w.at.Sub(markedAt[w.node]); d < h.cfg.Toleration-time.Second {
			s.violate(InvPodNotEvictedEarly, "pod %s evicted %s after its node %s was marked Unknown, toleration %s", w.key, d.Round(time.Millisecond), w.node, h.cfg.Toleration)
		}
	}
}

// podEvent records one write of a pod; r.mu is held.
func (r *recorder) podEvent(key string, rev int64, at time.Time, deleted bool, p *podv1.Pod) {
	r.pods = append(r.pods, podWrite{rev: rev, at: at, key: key, deleted: deleted, uid: p.GetMetadata().GetUid(),
		node: p.GetSpec().GetNodeName(), terminating: p.GetMetadata().GetDeletionTimestamp() != nil})
}
