// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podsync

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Refusal is a refused pod write: the gRPC code, the request field at
// fault and why (it becomes the write's Ack.error).
type Refusal struct {
	Code    codes.Code
	Field   string
	Message string
	// Retry: the write may succeed if sent again later (the store was
	// unavailable, or the pod changed under it).
	Retry bool
}

func (r *Refusal) Error() string { return r.Code.String() + " " + r.Field + ": " + r.Message }

func refuse(code codes.Code, field, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Writes are conditional on the revision read (and so on the uid), like
// every pod write in nodepulse; a conflict means the pod changed under the
// reporter, which is told to decide again from the PodSync that follows.
func (h *Hub) count(kind string, err error) error {
	result := "ok"
	var r *Refusal
	if errors.As(err, &r) {
		result = r.Code.String()
	}
	h.m.writes.WithLabelValues(kind, result).Inc()
	return err
}

func storeErr(field string, err error) *Refusal {
	if errors.Is(err, nodestore.ErrConflict) {
		return &Refusal{Code: codes.Aborted, Field: field, Message: "the pod changed while it was written: decide again from its new state", Retry: true}
	}
	return &Refusal{Code: codes.Unavailable, Field: "", Message: "pod not written: " + err.Error(), Retry: true}
}

// read reads pod ns/name and checks that it may be written by node's
// reporter for uid: it exists (NotFound), has that uid (Aborted, the UID
// precondition), and is bound to node (PermissionDenied, as NodeRestriction
// answers a kubelet writing another node's pod).
func (h *Hub) read(ctx context.Context, field, node, ns, name, uid string) (nodestore.Object, *podv1.Pod, *Refusal) {
	key := ns + "/" + name
	o, err := h.store.Get(ctx, nodestore.Pods, key)
	if errors.Is(err, nodestore.ErrNotFound) {
		return o, nil, refuse(codes.NotFound, field+".name", "pod %s does not exist", key)
	}
	if err != nil {
		return o, nil, storeErr(field, err)
	}
	p, _ := o.Value.(*podv1.Pod)
	if bound := p.GetSpec().GetNodeName(); bound != node {
		return o, nil, refuse(codes.PermissionDenied, field+".name",
			"node %q may not write pod %s: its spec.nodeName is %q, and a node writes only the pods bound to it", node, key, bound)
	}
	if got := p.GetMetadata().GetUid(); got != uid {
		return o, nil, refuse(codes.Aborted, field+".uid", "pod %s now has uid %s, not %s: it was replaced", key, got, uid)
	}
	return o, p, nil
}

// stored is p as written to pods/: no resource version in the value.
func stored(p *podv1.Pod) *podv1.Pod {
	s := proto.CloneOf(p)
	if s.Metadata != nil {
		s.Metadata.ResourceVersion = ""
	}
	return s
}

// WriteStatus stores r's status on the pod, conditional on the revision
// read. r has been validated; node is the stream's node.
func (h *Hub) WriteStatus(ctx context.Context, node string, r *collectorv1.PodStatusUpdate) error {
	o, p, ref := h.read(ctx, "podStatus", node, r.GetNamespace(), r.GetName(), r.GetUid())
	if ref != nil {
		return h.count("status", ref)
	}
	want := nodeStatus(p.GetStatus(), r.GetStatus())
	if proto.Equal(p.GetStatus(), want) {
		h.m.writes.WithLabelValues("status", "unchanged").Inc()
		return nil
	}
	np := stored(p)
	np.Status = want
	if _, err := h.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: o.Name, Value: np, IfModRevision: o.ModRevision}); err != nil {
		return h.count("status", storeErr("podStatus", err))
	}
	return h.count("status", nil)
}

// kubeletConditions are the pod conditions a node owns, as the kubelet
// (PodConditionsByKubelet in pkg/kubelet/types/pod_status.go).
var kubeletConditions = map[string]bool{
	"PodScheduled": true, nodemodel.Ready: true, "Initialized": true, "ContainersReady": true, "PodReadyToStartContainers": true,
}

// nodeStatus is the status a node's write leaves on the pod, merged as the
// kubelet's status manager merges before it patches (mergePodStatus in
// pkg/kubelet/status/status_manager.go): phase, reason, message and the
// conditions the kubelet owns come from the node; every other condition
// (DisruptionTarget from the evictor or pod GC) stays as stored. The
// reporter decides from the pods it was sent, and a copy older than the
// store (read late after a freeze) must not erase a controller's write.
// The node's order of conditions is kept; stored ones it lacks go last.
func nodeStatus(cur, sent *podv1.PodStatus) *podv1.PodStatus {
	out := proto.CloneOf(sent)
	if out == nil {
		out = &podv1.PodStatus{}
	}
	others := map[string]*podv1.PodCondition{}
	for _, c := range cur.GetConditions() {
		if !kubeletConditions[c.GetType()] {
			others[c.GetType()] = c
		}
	}
	conds := make([]*podv1.PodCondition, 0, len(out.Conditions)+len(others))
	take := func(t string) {
		if c, ok := others[t]; ok {
			conds = append(conds, proto.CloneOf(c))
			delete(others, t)
		}
	}
	for _, c := range out.GetConditions() {
		if kubeletConditions[c.GetType()] {
			conds = append(conds, c)
		} else {
			take(c.GetType())
		}
	}
	for _, c := range cur.GetConditions() {
		take(c.GetType())
	}
	out.Conditions = conds
	return out
}

// IsMirrorOf says whether p is a mirror pod of node: the mirror
// annotation and node as its controller owner.
func IsMirrorOf(p *podv1.Pod, node string) bool {
	if p.GetMetadata().GetAnnotations()[validation.MirrorPodAnnotation] == "" {
		return false
	}
	for _, r := range p.GetMetadata().GetOwnerReferences() {
		if r.GetController() {
			return r.GetKind() == validation.OwnerKindNode && r.GetName() == node
		}
	}
	return false
}

// FinishDeletion is the kubelet's last word on a pod (docs/spec.md, "The
// reporter as the node's kubelet"): the terminal status first, when r
// carries one, then the delete with grace 0, each conditional on the
// revision before it, so watchers see the pod Failed (or Succeeded) before
// it goes, and a pod replaced in between is never deleted. Only a
// terminating pod, or a mirror pod of this node (which its kubelet deletes
// to replace or because its static pod is gone), may be deleted by its
// node. The two store calls are those of the shared graceful-deletion rule
// (a grace-0 delete with a UID precondition).
func (h *Hub) FinishDeletion(ctx context.Context, node string, r *collectorv1.PodDelete) error {
	o, p, ref := h.read(ctx, "podDelete", node, r.GetNamespace(), r.GetName(), r.GetUid())
	if ref != nil {
		return h.count("delete", ref)
	}
	if p.GetMetadata().GetDeletionTimestamp() == nil && !IsMirrorOf(p, node) {
		return h.count("delete", refuse(codes.FailedPrecondition, "podDelete.name",
			"pod %s is not terminating (no deletionTimestamp): a node finishes deletions, it does not start them", o.Name))
	}
	rev := o.ModRevision
	if want := nodeStatus(p.GetStatus(), r.GetStatus()); r.Status != nil && !proto.Equal(p.GetStatus(), want) {
		np := stored(p)
		np.Status = want
		var err error
		if rev, err = h.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: o.Name, Value: np, IfModRevision: rev}); err != nil {
			return h.count("delete", storeErr("podDelete", err))
		}
	}
	if _, err := h.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: o.Name, IfModRevision: rev}); err != nil {
		return h.count("delete", storeErr("podDelete", err))
	}
	return h.count("delete", nil)
}

// EnsureMirror creates the mirror pod r asks for, or replaces the stored
// one when it is terminating or mirrors another version of the static pod
// (kubelet SyncPod for static pods: delete with grace 0 and a UID
// precondition, then create, which gives it a new uid). node and nodeUID
// are the stream's node as registered.
func (h *Hub) EnsureMirror(ctx context.Context, node, nodeUID string, r *collectorv1.MirrorPod, now time.Time) error {
	want := r.GetPod()
	md := want.GetMetadata()
	if ref := mirrorAuth(node, nodeUID, want); ref != nil {
		return h.count("mirror", ref)
	}
	key := md.GetNamespace() + "/" + md.GetName()
	o, err := h.store.Get(ctx, nodestore.Pods, key)
	switch {
	case errors.Is(err, nodestore.ErrNotFound):
	case err != nil:
		return h.count("mirror", storeErr("mirrorPod", err))
	default:
		cur, _ := o.Value.(*podv1.Pod)
		if !IsMirrorOf(cur, node) || cur.GetSpec().GetNodeName() != node {
			return h.count("mirror", refuse(codes.AlreadyExists, "mirrorPod.pod.metadata.name",
				"pod %s exists and is not a mirror pod of node %q: it is left alone", key, node))
		}
		if cur.GetMetadata().GetDeletionTimestamp() == nil && sameMirror(cur, want) {
			h.m.writes.WithLabelValues("mirror", "unchanged").Inc()
			return nil
		}
		if _, err := h.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: key, IfModRevision: o.ModRevision}); err != nil {
			return h.count("mirror", storeErr("mirrorPod", err))
		}
	}
	np := stored(want)
	np.Metadata.Uid = newUID()
	np.Metadata.CreationTimestamp = nodemodel.Timestamp(now)
	np.Metadata.Generation = 1
	if np.Spec.TerminationGracePeriodSeconds == nil {
		// As PodService's admission and Kubernetes default it.
		g := podlife.DefaultTerminationGracePeriodSeconds
		np.Spec.TerminationGracePeriodSeconds = &g
	}
	if _, err := h.store.Apply(ctx, nil, nodestore.Op{Kind: nodestore.Pods, Name: key, Value: np, IfAbsent: true}); err != nil {
		return h.count("mirror", storeErr("mirrorPod", err))
	}
	return h.count("mirror", nil)
}

// mirrorAuth checks that want is a mirror pod of node as registered now:
// bound to it, owned by it (name and uid), named "<static pod>-<node>".
func mirrorAuth(node, nodeUID string, want *podv1.Pod) *Refusal {
	md := want.GetMetadata()
	if n := want.GetSpec().GetNodeName(); n != node {
		return refuse(codes.PermissionDenied, "mirrorPod.pod.spec.nodeName", "node %q may not create a pod bound to node %q", node, n)
	}
	owner := md.GetOwnerReferences()[0] // validated: exactly one
	if owner.GetName() != node {
		return refuse(codes.PermissionDenied, "mirrorPod.pod.metadata.ownerReferences[0].name", "node %q may not create a mirror pod of node %q", node, owner.GetName())
	}
	if owner.GetUid() != nodeUID {
		return refuse(codes.FailedPrecondition, "mirrorPod.pod.metadata.ownerReferences[0].uid",
			"%s is not the uid of node %q as registered on this stream (%s)", owner.GetUid(), node, nodeUID)
	}
	if base, ok := strings.CutSuffix(md.GetName(), "-"+node); !ok || base == "" {
		return refuse(codes.InvalidArgument, "mirrorPod.pod.metadata.name", "%q is not <static pod name>-%s", md.GetName(), node)
	}
	return nil
}

// sameMirror: the stored mirror pod mirrors the same static pod as want
// (the hash in the mirror annotation) for the same node object (owner
// uid). The kubelet compares the hash alone; the owner uid changes when
// the node was registered again, and a mirror pod must name its node.
func sameMirror(cur, want *podv1.Pod) bool {
	a := validation.MirrorPodAnnotation
	return cur.GetMetadata().GetAnnotations()[a] == want.GetMetadata().GetAnnotations()[a] &&
		ownerUID(cur) == ownerUID(want)
}

func ownerUID(p *podv1.Pod) string {
	for _, r := range p.GetMetadata().GetOwnerReferences() {
		if r.GetController() {
			return r.GetUid()
		}
	}
	return ""
}

// newUID is a random (version 4) UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
