// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Spec §6.3: pods on a node that turned unhealthy are marked Ready=False at
// the flip (endpoints drop them long before any eviction), a failed marking
// is retried on later passes while the node stays not-Ready, and a pod newly
// bound to a node whose last-seen Ready is not True is marked at once.
//
// Exactly upstream MarkPodsNotReady: only pods that already have a Ready
// condition; Ready → False with its reason, message and probe time kept and
// the transition time moved only when the status changes; nothing else of
// the pod (phase stays Running, no NodeLost reason); a pod event Warning
// NodeNotReady "Node is not ready" after each successful write. The flip is
// the controller's own observed True → current not True: a node whose
// reporter itself reports Ready=False never triggers it (observed False).

// markPodsNotReadyLocked sets Ready=False on every pod bound to node that
// has a Ready condition not already False (upstream MarkPodsNotReady). It
// tries every pod and returns the first error; errLost when fenced.
func (c *Controller) markPodsNotReadyLocked(ctx context.Context, now time.Time, node string) error {
	var first error
	for _, pe := range c.cache.PodsOnNode(node) {
		err := c.markPodNotReadyLocked(ctx, now, node, pe)
		if errors.Is(err, errLost) {
			return err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// markPodNotReadyLocked marks one pod, fenced and conditional on the pod
// being exactly the one read (its ModRevision): a concurrent change (the
// orchestrator, a deletion) is never overwritten; the node is retried.
func (c *Controller) markPodNotReadyLocked(ctx context.Context, now time.Time, node string, pe cache.PodEntry) error {
	p := pe.Pod
	if p.GetSpec().GetNodeName() != node {
		return nil
	}
	ready := podutil.FindCondition(p.GetStatus(), podutil.Ready)
	if ready == nil || ready.GetStatus() == nodemodel.False {
		return nil
	}
	np := podutil.Stored(p)
	cond := podutil.FindCondition(np.Status, podutil.Ready)
	nc := &podv1.PodCondition{Type: podutil.Ready, Status: nodemodel.False, LastProbeTime: cond.GetLastProbeTime(),
		Reason: cond.GetReason(), Message: cond.GetMessage()}
	if !podutil.SetCondition(np.Status, nc, now) {
		return nil
	}
	key := cache.PodKey(p.GetMetadata().GetNamespace(), p.GetMetadata().GetName())
	_, err := c.store.Apply(ctx, &c.fence, nodestore.Op{Kind: nodestore.Pods, Name: key, Value: np, IfModRevision: pe.ModRevision})
	switch {
	case err == nil:
		c.m.podsNotReady.Inc()
		c.lg.Info("pod marked not ready: its node is not ready", zap.String("pod", key), zap.String("node", node))
		// After the write, as upstream: the event is only for a pod that
		// still existed.
		c.podEventLocked(now, p, "Warning", "NodeNotReady", "Node is not ready")
		return nil
	case errors.Is(err, nodestore.ErrFenced):
		c.m.fenced.Inc()
		return errLost
	case errors.Is(err, nodestore.ErrConflict):
		return fmt.Errorf("mark pod %s not ready: changed meanwhile: %w", key, err)
	}
	return fmt.Errorf("mark pod %s not ready: %w", key, err)
}

// podsAfterPassLocked runs the §6.3 marking for one node after its health
// pass: at the True → not-True flip, and on later passes while an earlier
// marking failed and the node is still not Ready.
func (c *Controller) podsAfterPassLocked(ctx context.Context, now time.Time, node, observed, current string) error {
	flip := observed == nodemodel.True && current != nodemodel.True
	// Upstream retries while the node as read (observed) is not Ready.
	if !flip && !(c.podRetry[node] && observed != nodemodel.True) {
		delete(c.podRetry, node)
		return nil
	}
	err := c.markPodsNotReadyLocked(ctx, now, node)
	if errors.Is(err, errLost) {
		return err
	}
	if err != nil {
		if !c.podRetry[node] {
			c.lg.Warn("cannot mark every pod of a not-ready node not ready; retrying on later passes", zap.String("node", node), zap.Error(err))
		}
		c.podRetry[node] = true
		return nil
	}
	delete(c.podRetry, node)
	return nil
}

// PodUpdates marks pods newly bound to a node whose last-seen Ready is not
// True (upstream podUpdated/processPod), for every pod change after cursor,
// and returns the new cursor. Exported for tests.
func (c *Controller) PodUpdates(ctx context.Context, cursor cache.Version) (cache.Version, error) {
	changes, _, err := c.cache.PodChangesAfter(cursor, 10000)
	if err != nil {
		// Fell behind the history: every not-ready node's pods are marked
		// again at the next pass through the retry set.
		c.mu.Lock()
		for n, st := range c.nodes { // nil when not leading: no-op
			if st.ready != "" && st.ready != nodemodel.True {
				c.podRetry[n] = true
			}
		}
		c.mu.Unlock()
		return c.cache.PodVersion(), nil
	}
	if len(changes) == 0 {
		return cursor, nil
	}
	cursor = changes[len(changes)-1].Version
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading || c.paused != "" {
		return cursor, nil
	}
	now := c.cfg.Now()
	for _, ch := range changes {
		if ch.Type == cache.Deleted {
			continue
		}
		node := ch.Pod.GetSpec().GetNodeName()
		if node == "" || (ch.Old != nil && ch.Old.GetSpec().GetNodeName() == node) {
			continue // not newly bound
		}
		if st := c.nodes[node]; st == nil || st.ready == "" || st.ready == nodemodel.True {
			continue // node not judged yet, no Ready, or Ready
		}
		md := ch.Pod.GetMetadata()
		pe, ok := c.cache.Pod(md.GetNamespace(), md.GetName())
		if !ok || pe.Pod.GetMetadata().GetUid() != md.GetUid() {
			continue
		}
		err := c.markPodNotReadyLocked(ctx, now, node, pe)
		if errors.Is(err, errLost) {
			return cursor, err
		}
		if err != nil {
			c.podRetry[node] = true
		}
	}
	return cursor, nil
}
