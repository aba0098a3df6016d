// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/leadership"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// DefaultPeriod between two passes of the controller. Upstream reacts to
// informer events; a pass every second over the budgets (few) and the
// cached pods keeps a drain's wait for a replacement to about a second.
const DefaultPeriod = time.Second

// Pods lists the pods the controller counts (the monitor's watch cache;
// the store in tests).
type Pods func(ctx context.Context) ([]*podv1.Pod, error)

// StorePods lists the pods from the store itself.
func StorePods(st nodestore.Reader) Pods {
	return func(ctx context.Context) ([]*podv1.Pod, error) {
		objs, _, err := st.List(ctx, nodestore.Pods, nodestore.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := make([]*podv1.Pod, 0, len(objs))
		for _, o := range objs {
			p := o.Value.(*podv1.Pod)
			if p.Metadata == nil {
				p.Metadata = &nodev1.ObjectMeta{}
			}
			if ns, name, ok := strings.Cut(o.Name, "/"); ok {
				p.Metadata.Namespace, p.Metadata.Name = ns, name
			}
			out = append(out, p)
		}
		return out, nil
	}
}

// Config of the controller.
type Config struct {
	// Period between passes; zero means DefaultPeriod.
	Period time.Duration
	// Now is the clock; After waits (tests inject both).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Controller keeps every budget's status on the leader.
type Controller struct {
	cfg    Config
	store  nodestore.Store
	pods   Pods
	leader leadership.Leader
	lg     *zap.Logger
}

// New builds the controller; call Run.
func New(cfg Config, store nodestore.Store, pods Pods, leader leadership.Leader, lg *zap.Logger) *Controller {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	return &Controller{cfg: cfg, store: store, pods: pods, leader: leader, lg: lg.Named("disruption")}
}

// Run follows the controller's leadership until ctx ends; while this
// replica leads it recomputes every budget each Period.
func (c *Controller) Run(ctx context.Context) error {
	leadership.Follow(ctx, c.leader, func(ctx context.Context, fence nodestore.Fence, done <-chan struct{}) {
		for {
			if err := c.Pass(ctx, fence); errors.Is(err, nodestore.ErrFenced) {
				c.lg.Warn("disruption controller stopped: no longer the leader")
				return
			} else if err != nil && ctx.Err() == nil {
				c.lg.Warn("disruption pass failed; retrying", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-c.cfg.After(c.cfg.Period):
			}
		}
	})
	return nil
}

// Pass recomputes every budget once and writes the statuses that changed,
// fenced and conditional on the revision read: an eviction that spent a
// disruption in between makes this write fail, and the next pass sees its
// disruptedPods entry (which is how a new leader keeps the evictions of
// the old one: they are in the stored status, not in memory).
func (c *Controller) Pass(ctx context.Context, fence nodestore.Fence) error {
	budgets, _, err := c.store.List(ctx, nodestore.PodDisruptionBudgets, nodestore.ListOptions{})
	if err != nil || len(budgets) == 0 {
		return err
	}
	pods, err := c.pods(ctx)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	scale := c.scale(ctx)
	for _, o := range budgets {
		pdb := o.Value.(*policyv1.PodDisruptionBudget)
		identify(pdb, o.Name)
		st, err := Compute(pdb, pods, scale, now)
		if err != nil {
			c.lg.Warn("disruption budget cannot be computed; it allows no disruption", zap.String("pdb", o.Name), zap.Error(err))
			st = FailSafe(pdb, err, now)
		}
		if proto.Equal(st, pdb.GetStatus()) {
			continue
		}
		np := proto.CloneOf(pdb)
		np.Status = st
		_, err = c.store.Apply(ctx, &fence, nodestore.Op{Kind: nodestore.PodDisruptionBudgets, Name: o.Name, Value: np, IfModRevision: o.ModRevision})
		switch {
		case errors.Is(err, nodestore.ErrFenced):
			return err
		case errors.Is(err, nodestore.ErrConflict):
			// An eviction or an edit came first: the next pass reads it.
		case err != nil:
			return fmt.Errorf("write status of disruption budget %s: %w", o.Name, err)
		}
	}
	return nil
}

// scale is the finders of upstream getExpectedScale: a ReplicaSet's and a
// StatefulSet's spec.replicas (1 when unset). A DaemonSet has no scale
// subresource upstream, so a percentage or maxUnavailable budget over its
// pods fails to sync there as here.
func (c *Controller) scale(ctx context.Context) Scale {
	return func(ns string, ref *nodev1.OwnerReference) (int32, bool, error) {
		var kind nodestore.Kind
		switch ref.GetKind() {
		case "ReplicaSet":
			kind = nodestore.ReplicaSets
		case "StatefulSet":
			kind = nodestore.StatefulSets
		default:
			return 0, false, nil
		}
		o, err := c.store.Get(ctx, kind, ns+"/"+ref.GetName())
		if errors.Is(err, nodestore.ErrNotFound) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		var replicas *int32
		var uid string
		switch v := o.Value.(type) {
		case *appsv1.ReplicaSet:
			replicas, uid = v.GetSpec().Replicas, v.GetMetadata().GetUid()
		case *appsv1.StatefulSet:
			replicas, uid = v.GetSpec().Replicas, v.GetMetadata().GetUid()
		}
		if ref.GetUid() != "" && uid != "" && uid != ref.GetUid() {
			return 0, false, nil // another object under the name
		}
		if replicas == nil {
			return 1, true, nil
		}
		return *replicas, true, nil
	}
}
