// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"maps"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/validation"
)

// maxAnnotationBytes bounds the annotations of one node (keys and values
// together), as kube-apiserver's TotalAnnotationSizeLimitB.
const maxAnnotationBytes = 256 << 10

// SetNodeMetadata replaces the labels and annotations an operator keeps on
// nodes/<name> (the monitor's API is that key's only writer after the
// collector created it). nil leaves that map as it is. ifVersion, when set,
// must equal the node's served resource version (409 otherwise). It is the
// write behind `kubectl label` and `kubectl annotate` on the
// Kubernetes-compatible API, with the same compare-and-swap as a cordon.
func (s *Server) SetNodeMetadata(ctx context.Context, name string, labels, annotations map[string]string, ifVersion string) (*nodev1.Node, error) {
	if labels != nil {
		if err := validation.Labels("metadata.labels", labels, validation.DefaultLimits().MaxLabels).Err(); err != nil {
			return nil, validation.Status(err)
		}
	}
	size := 0
	for k, v := range annotations {
		if fe := validation.QualifiedName("metadata.annotations["+k+"]", k); fe != nil {
			return nil, validation.Status(fe)
		}
		size += len(k) + len(v)
	}
	if size > maxAnnotationBytes {
		return nil, status.Errorf(codes.InvalidArgument, "metadata.annotations: may not be more than %d bytes (got %d)", maxAnnotationBytes, size)
	}
	if ifVersion != "" {
		if cur, ok := s.cache.Node(name); ok && cur.GetMetadata().GetResourceVersion() != ifVersion {
			return nil, status.Errorf(codes.Aborted, "node %q: resourceVersion %s does not match the current %s", name, ifVersion, cur.GetMetadata().GetResourceVersion())
		}
	}
	n, err := s.update(ctx, name, func(n *nodev1.Node) (bool, error) {
		if n.Metadata == nil {
			n.Metadata = &nodev1.ObjectMeta{}
		}
		changed := false
		if labels != nil && !maps.Equal(labels, n.Metadata.Labels) {
			n.Metadata.Labels, changed = maps.Clone(labels), true
		}
		if annotations != nil && !maps.Equal(annotations, n.Metadata.Annotations) {
			n.Metadata.Annotations, changed = maps.Clone(annotations), true
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "node", "metadata set", name, zap.Int("labels", len(labels)), zap.Int("annotations", len(annotations)))
	return n, nil
}
