// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"maps"
	"slices"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
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
	// Labels and Annotations replace the node's maps (nodes/<name> holds
	// them; the monitor's API is that key's only writer after the
	// collector created it).
	Labels, Annotations map[string]string
}

// UpdateNode makes every change of u in one compare-and-swap of
// nodes/<name>: each part is checked first (the rules of CordonNode,
// AddTaint and RemoveTaint, and kube-apiserver's for labels and
// annotations) and the first refusal leaves the node untouched. Done as
// those calls one after another, a patch that cordoned and then set a
// refused taint stayed cordoned.
func (s *Server) UpdateNode(ctx context.Context, name string, u NodeUpdate) (*nodev1.Node, error) {
	now := s.now()
	for _, t := range u.AddTaints {
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
		for _, r := range u.RemoveTaints {
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
		if u.Labels != nil || u.Annotations != nil {
			if n.Metadata == nil {
				n.Metadata = &nodev1.ObjectMeta{}
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
