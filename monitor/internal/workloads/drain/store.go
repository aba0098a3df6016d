// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package drain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/disruption"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// StoreCluster is a Cluster over the store itself: evictions are
// disruption.Evict, deletions podlife.Delete, both with optimistic
// concurrency, so any monitor replica can serve a drain (no fence: a
// leadership change in the middle of a drain changes nothing here).
type StoreCluster struct {
	Store interface {
		nodestore.Reader
		nodestore.Writer
	}
	// Now is the clock of the writes.
	Now func() time.Time
	// Evicted, when set, is told of every eviction that spent a budget's
	// disruption (tests count them).
	Evicted func(ns, name, budget string)
}

// Cordon implements Cluster with a compare-and-swap of nodes/<node>.
func (c StoreCluster) Cordon(ctx context.Context, node string) (bool, error) {
	for range 8 {
		o, err := c.Store.Get(ctx, nodestore.Nodes, node)
		if errors.Is(err, nodestore.ErrNotFound) {
			return false, fmt.Errorf("nodes %q not found", node)
		}
		if err != nil {
			return false, err
		}
		n := proto.CloneOf(o.Value.(*nodev1.Node))
		if n.Spec == nil {
			n.Spec = &nodev1.NodeSpec{}
		}
		if n.Spec.Unschedulable {
			return true, nil
		}
		n.Spec.Unschedulable = true
		_, err = c.Store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Nodes, Name: node, Value: n, IfModRevision: o.ModRevision})
		if errors.Is(err, nodestore.ErrConflict) {
			continue
		}
		return false, err
	}
	return false, fmt.Errorf("cordon node %q: %w", node, nodestore.ErrConflict)
}

// Pods implements Cluster: every pod bound to node, in key order.
func (c StoreCluster) Pods(ctx context.Context, node string) ([]*podv1.Pod, error) {
	objs, _, err := c.Store.List(ctx, nodestore.Pods, nodestore.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*podv1.Pod
	for _, o := range objs {
		p := identified(o)
		if p.GetSpec().GetNodeName() == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func identified(o nodestore.Object) *podv1.Pod {
	p := proto.CloneOf(o.Value.(*podv1.Pod))
	if p.Metadata == nil {
		p.Metadata = &nodev1.ObjectMeta{}
	}
	if ns, name, ok := strings.Cut(o.Name, "/"); ok {
		p.Metadata.Namespace, p.Metadata.Name = ns, name
	}
	return p
}

// DaemonSetExists implements Cluster.
func (c StoreCluster) DaemonSetExists(ctx context.Context, ns, name string) (bool, error) {
	_, err := c.Store.Get(ctx, nodestore.DaemonSets, ns+"/"+name)
	if errors.Is(err, nodestore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Evict implements Cluster.
func (c StoreCluster) Evict(ctx context.Context, ns, name, uid string, grace *int64) error {
	r, err := disruption.Evict(ctx, c.Store, ns, name, disruption.EvictOptions{GracePeriodSeconds: grace, UID: uid}, c.Now())
	return c.mapErr(err, func() {
		if r.Budget != "" && c.Evicted != nil {
			c.Evicted(ns, name, r.Budget)
		}
	})
}

// Delete implements Cluster.
func (c StoreCluster) Delete(ctx context.Context, ns, name, uid string, grace *int64) error {
	_, _, err := podlife.Delete(ctx, c.Store, ns, name, podlife.DeleteOptions{GracePeriodSeconds: grace, UID: uid}, c.Now())
	return c.mapErr(err, nil)
}

func (c StoreCluster) mapErr(err error, ok func()) error {
	var ref *disruption.Refusal
	switch {
	case err == nil:
		if ok != nil {
			ok()
		}
		return nil
	case errors.Is(err, nodestore.ErrNotFound):
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	case errors.Is(err, podlife.ErrPrecondition):
		return fmt.Errorf("%w: %v", ErrReplaced, err)
	case errors.As(err, &ref) && ref.Kind == disruption.TooManyRequests:
		return &RetryError{Message: ref.Error()}
	}
	return err
}

// Pod implements Cluster.
func (c StoreCluster) Pod(ctx context.Context, ns, name string) (*podv1.Pod, error) {
	o, err := c.Store.Get(ctx, nodestore.Pods, ns+"/"+name)
	if errors.Is(err, nodestore.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return identified(o), nil
}
