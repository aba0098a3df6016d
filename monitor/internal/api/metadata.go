// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// maxAnnotationBytes bounds the annotations of one node (keys and values
// together), as kube-apiserver's TotalAnnotationSizeLimitB.
const maxAnnotationBytes = 256 << 10

// NodeUpdate is several operator changes of one node made together: what
// a Kubernetes PATCH of a node amounts to. nil fields change nothing.
type NodeUpdate struct {
	// Unschedulable cordons (true) or uncordons (false).
	Unschedulable *bool
	// RemoveTaints names user taints to remove (key and effect; value
	// ignored); AddTaints are added or, for an existing key and effect,
	// given their value.
	RemoveTaints, AddTaints []*nodev1.Taint
	// SetTaints replaces the user taints with Taints, in their order (a
	// Kubernetes PATCH or PUT of spec.taints, which is an atomic list:
	// kubectl taint puts a new taint first). The lifecycle controller's
	// taints stay: those in Taints keep their place and time, those absent
	// follow the list; RemoveTaints and AddTaints are then ignored.
	SetTaints bool
	Taints    []*nodev1.Taint
	// Labels and Annotations replace the node's maps (nodes/<name> holds
	// them; the monitor's API is that key's only writer after the
	// collector created it).
	Labels, Annotations map[string]string
	// ManagedFields, when not nil, replace the node's (the Kubernetes
	// API's server-side apply bookkeeping; empty clears them).
	ManagedFields []*nodev1.ManagedFieldsEntry
}

// UpdateNode makes every change of u in one compare-and-swap of
// nodes/<name>: each part is checked first (the rules of CordonNode,
// AddTaint and RemoveTaint, and kube-apiserver's for labels and
// annotations) and the first refusal leaves the node untouched. Done as
// those calls one after another, a patch that cordoned and then set a
// refused taint stayed cordoned.
func (s *Server) UpdateNode(ctx context.Context, name string, u NodeUpdate) (*nodev1.Node, error) {
	now := s.now()
	adds := u.AddTaints
	if u.SetTaints {
		adds = u.Taints
		if lim := validation.DefaultLimits().MaxTaints; len(u.Taints) > lim {
			return nil, status.Errorf(codes.InvalidArgument, "spec.taints: must have at most %d items", lim)
		}
	}
	for i, t := range adds {
		if u.SetTaints && lifecycle.IsControllerManaged(t.GetKey(), t.GetEffect()) {
			continue // checked against the node below
		}
		if u.SetTaints && slices.ContainsFunc(adds[:i], func(o *nodev1.Taint) bool { return o.GetKey() == t.GetKey() && o.GetEffect() == t.GetEffect() }) {
			return nil, status.Errorf(codes.InvalidArgument, "spec.taints[%d]: taints must be unique by key and effect pair (%s:%s)", i, t.GetKey(), t.GetEffect())
		}
		if err := validation.Taint("spec.taints", t, now, validation.DefaultLimits()).Err(); err != nil {
			return nil, validation.Status(err)
		}
		if lifecycle.IsControllerManaged(t.GetKey(), t.GetEffect()) {
			return nil, status.Errorf(codes.InvalidArgument, "spec.taints: %s:%s is managed by the node lifecycle controller and cannot be set by hand (cordon with spec.unschedulable instead of the unschedulable taint)", t.GetKey(), t.GetEffect())
		}
	}
	for _, t := range u.RemoveTaints {
		if fe := validation.QualifiedName("spec.taints.key", t.GetKey()); fe != nil {
			return nil, validation.Status(fe)
		}
	}
	if err := checkMetadata(u.Labels, u.Annotations); err != nil {
		return nil, err
	}
	n, err := s.update(ctx, name, func(n *nodev1.Node) (bool, error) {
		changed := false
		if u.Unschedulable != nil && n.Spec.Unschedulable != *u.Unschedulable {
			n.Spec.Unschedulable, changed = *u.Unschedulable, true
		}
		if u.SetTaints {
			next, err := orderedTaints(n.Spec.Taints, u.Taints, now)
			if err != nil {
				return false, err
			}
			if !slices.EqualFunc(next, n.Spec.Taints, func(a, b *nodev1.Taint) bool { return proto.Equal(a, b) }) {
				n.Spec.Taints, changed = next, true
			}
		}
		for _, r := range u.RemoveTaints {
			if u.SetTaints {
				break
			}
			i := slices.IndexFunc(n.Spec.Taints, func(t *nodev1.Taint) bool { return t.GetKey() == r.GetKey() && t.GetEffect() == r.GetEffect() })
			if i < 0 {
				if lifecycle.IsControllerManaged(r.GetKey(), r.GetEffect()) {
					return false, status.Errorf(codes.FailedPrecondition, "spec.taints: %s:%s is managed by the node lifecycle controller; it goes away when the condition behind it does", r.GetKey(), r.GetEffect())
				}
				return false, status.Errorf(codes.NotFound, "spec.taints: node %q has no user taint %s%s", name, r.GetKey(), effectSuffix(r.GetEffect()))
			}
			n.Spec.Taints, changed = slices.Delete(slices.Clone(n.Spec.Taints), i, i+1), true
		}
		for _, t := range u.AddTaints {
			if u.SetTaints {
				break
			}
			nt := proto.CloneOf(t)
			if nt.GetEffect() == nodemodel.NoExecute {
				nt.TimeAdded = nodemodel.Timestamp(now)
			} else {
				nt.TimeAdded = nil
			}
			i := slices.IndexFunc(n.Spec.Taints, func(o *nodev1.Taint) bool { return o.GetKey() == nt.GetKey() && o.GetEffect() == nt.GetEffect() })
			switch {
			case i >= 0 && n.Spec.Taints[i].GetValue() == nt.GetValue():
			case i >= 0:
				n.Spec.Taints = slices.Clone(n.Spec.Taints)
				n.Spec.Taints[i], changed = nt, true
			default:
				if lim := validation.DefaultLimits().MaxTaints; len(n.Spec.Taints) >= lim {
					return false, status.Errorf(codes.InvalidArgument, "spec.taints: node already has %d taints, the most allowed", lim)
				}
				n.Spec.Taints, changed = append(n.Spec.Taints, nt), true
			}
		}
		if u.Labels != nil || u.Annotations != nil || u.ManagedFields != nil {
			if n.Metadata == nil {
				n.Metadata = &nodev1.ObjectMeta{}
			}
			if u.ManagedFields != nil && !slices.EqualFunc(u.ManagedFields, n.Metadata.ManagedFields, func(a, b *nodev1.ManagedFieldsEntry) bool { return proto.Equal(a, b) }) {
				n.Metadata.ManagedFields, changed = u.ManagedFields, true
			}
			if u.Labels != nil && !maps.Equal(u.Labels, n.Metadata.Labels) {
				n.Metadata.Labels, changed = maps.Clone(u.Labels), true
			}
			if u.Annotations != nil && !maps.Equal(u.Annotations, n.Metadata.Annotations) {
				n.Metadata.Annotations, changed = maps.Clone(u.Annotations), true
			}
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "node", "node updated", name, zap.Boolp("unschedulable", u.Unschedulable), zap.Int("taints added", len(u.AddTaints)),
		zap.Int("taints removed", len(u.RemoveTaints)), zap.Bool("metadata", u.Labels != nil || u.Annotations != nil))
	return n, nil
}

// orderedTaints is the taint list want asks for over the node's cur: user
// taints in want's order (an unchanged one keeps its timeAdded; a new
// NoExecute one is stamped now), a lifecycle-controller taint kept where
// want puts it and refused when the node does not have it, and the
// controller's taints that want lacks (added since the client read the
// node) kept after the rest.
func orderedTaints(cur, want []*nodev1.Taint, now time.Time) ([]*nodev1.Taint, error) {
	find := func(ts []*nodev1.Taint, t *nodev1.Taint) int {
		return slices.IndexFunc(ts, func(o *nodev1.Taint) bool { return o.GetKey() == t.GetKey() && o.GetEffect() == t.GetEffect() })
	}
	out := make([]*nodev1.Taint, 0, len(want))
	for _, t := range want {
		i := find(cur, t)
		switch {
		case lifecycle.IsControllerManaged(t.GetKey(), t.GetEffect()):
			if i < 0 {
				if t.GetKey() == nodemodel.TaintUnschedulable {
					continue // follows spec.unschedulable
				}
				return nil, status.Errorf(codes.InvalidArgument, "spec.taints: %s:%s is managed by the node lifecycle controller and cannot be set by hand", t.GetKey(), t.GetEffect())
			}
			out = append(out, cur[i])
		case i >= 0 && cur[i].GetValue() == t.GetValue():
			out = append(out, cur[i])
		default:
			nt := proto.CloneOf(t)
			nt.TimeAdded = nil
			if nt.GetEffect() == nodemodel.NoExecute {
				nt.TimeAdded = nodemodel.Timestamp(now)
			}
			out = append(out, nt)
		}
	}
	for _, c := range cur {
		if lifecycle.IsControllerManaged(c.GetKey(), c.GetEffect()) && find(out, c) < 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// checkMetadata validates labels and annotations
// (nil maps are not checked).
func checkMetadata(labels, annotations map[string]string) error {
	if labels != nil {
		if err := validation.Labels("metadata.labels", labels, validation.DefaultLimits().MaxLabels).Err(); err != nil {
			return validation.Status(err)
		}
	}
	size := 0
	for k, v := range annotations {
		if fe := validation.QualifiedName("metadata.annotations["+k+"]", k); fe != nil {
			return validation.Status(fe)
		}
		size += len(k) + len(v)
	}
	if size > maxAnnotationBytes {
		return status.Errorf(codes.InvalidArgument, "metadata.annotations: may not be more than %d bytes (got %d)", maxAnnotationBytes, size)
	}
	return nil
}

// CreateNode stores a node an operator registers ahead of its reporter
// (a Kubernetes POST of a Node): its metadata and operator spec only; the
// status is the reporter's. Until the node reports, the lifecycle
// controller sees a node that never posted a status and marks it Unknown
// a grace period after its creation, as upstream does. The reporter's
// registration later keeps what is stored (the collector creates
// nodes/<name> only when absent).
func (s *Server) CreateNode(ctx context.Context, n *nodev1.Node) (*nodev1.Node, error) {
	name := n.GetMetadata().GetName()
	if err := checkName("metadata.name", name); err != nil {
		return nil, err
	}
	now := s.now()
	in := &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, Uid: newUID(), CreationTimestamp: nodemodel.Timestamp(now),
		Labels: maps.Clone(n.GetMetadata().GetLabels()), Annotations: maps.Clone(n.GetMetadata().GetAnnotations()),
		ManagedFields: n.GetMetadata().GetManagedFields()},
		Spec: &nodev1.NodeSpec{Unschedulable: n.GetSpec().GetUnschedulable()}}
	if err := checkMetadata(in.Metadata.Labels, in.Metadata.Annotations); err != nil {
		return nil, err
	}
	for i, t := range n.GetSpec().GetTaints() {
		if err := validation.Taint(fmt.Sprintf("spec.taints[%d]", i), t, now, validation.DefaultLimits()).Err(); err != nil {
			return nil, validation.Status(err)
		}
		if lifecycle.IsControllerManaged(t.GetKey(), t.GetEffect()) {
			return nil, status.Errorf(codes.InvalidArgument, "spec.taints[%d]: %s:%s is managed by the node lifecycle controller and cannot be set by hand", i, t.GetKey(), t.GetEffect())
		}
		nt := proto.CloneOf(t)
		nt.TimeAdded = nil
		if nt.GetEffect() == nodemodel.NoExecute {
			nt.TimeAdded = nodemodel.Timestamp(now)
		}
		in.Spec.Taints = append(in.Spec.Taints, nt)
	}
	rev, err := s.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Nodes, Name: name, Value: in, IfAbsent: true})
	if errors.Is(err, nodestore.ErrConflict) {
		return nil, status.Errorf(codes.AlreadyExists, "metadata.name: node %q already exists", name)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "store node %q: %v", name, err)
	}
	s.waitCache(ctx, rev)
	s.audit(ctx, "node", "node created", name)
	return s.served(name, in), nil
}
