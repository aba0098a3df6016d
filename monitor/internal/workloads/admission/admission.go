// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package admission applies the pod defaults Kubernetes applies on the way
// into the API (spec §8), so that pods stored through PodService carry the
// same tolerations they would carry in a Kubernetes cluster:
//
//   - every pod: DefaultTolerationSeconds — NoExecute tolerations of the
//     not-ready and unreachable taints for 300 s (configurable), unless a
//     toleration already covers them;
//   - DaemonSet pods (the daemon controller's AddOrUpdateDaemonPodTolerations):
//     not-ready and unreachable NoExecute tolerated for ever, and the
//     NoSchedule condition taints (disk/memory/pid pressure, unschedulable,
//     network-unavailable for host-network pods);
//   - static pods (owner kind "Node", the kubelet's mirror pods): one
//     {operator: Exists, effect: NoExecute} toleration, i.e. every NoExecute
//     taint for ever.
//
// Order matters as upstream: the owner's tolerations are added first (the
// DaemonSet controller and the kubelet build them into the pod before it
// reaches the API server), then DefaultTolerationSeconds sees them as
// covering and adds nothing.
package admission

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/podutil"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Owner kinds that change the defaults.
const (
	KindDaemonSet = "DaemonSet"
	// KindNode owns static (mirror) pods.
	KindNode = "Node"
)

// DefaultTolerationSeconds is the Kubernetes default of
// --default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds.
const DefaultTolerationSeconds = 300

// Config of the defaults.
type Config struct {
	// NotReadySeconds and UnreachableSeconds are the tolerationSeconds of the
	// default NoExecute tolerations (kube-apiserver
	// --default-not-ready-toleration-seconds / --default-unreachable-...).
	NotReadySeconds    int64
	UnreachableSeconds int64
}

// DefaultConfig returns the Kubernetes defaults (300 s each).
func DefaultConfig() Config {
	return Config{NotReadySeconds: DefaultTolerationSeconds, UnreachableSeconds: DefaultTolerationSeconds}
}

// Admit returns the pod to store for a create of p (already validated): the
// stored form with a new UID, the creation time, an empty spec and status
// filled in, phase Pending unless given, terminationGracePeriodSeconds 30
// unless given, and the default tolerations. The
// defaults may push the tolerations over their bound, which the returned
// list says.
func (c Config) Admit(p *podv1.Pod, now time.Time, lim validation.Limits) (*podv1.Pod, validation.List) {
	s := podutil.Stored(p)
	s.Metadata.Uid = newUID()
	s.Metadata.CreationTimestamp = nodemodel.Timestamp(now)
	if s.Spec == nil {
		s.Spec = &podv1.PodSpec{}
	}
	if s.Status == nil {
		s.Status = &podv1.PodStatus{}
	}
	if s.Status.Phase == "" {
		s.Status.Phase = podutil.PhasePending
	}
	switch g := s.Spec.TerminationGracePeriodSeconds; {
	case g == nil:
		// The API default (SetDefaults_PodSpec): a graceful delete without a
		// grace period of its own gives the pod 30 s (spec §12.1).
		d := podlife.DefaultTerminationGracePeriodSeconds
		s.Spec.TerminationGracePeriodSeconds = &d
	case *g < 0:
		// Upstream's pod strategy stores a negative value as 1 (a negative
		// grace would put the deletion timestamp in the past).
		one := int64(1)
		s.Spec.TerminationGracePeriodSeconds = &one
	}
	c.Apply(s)
	return s, validation.Tolerations("pod.spec.tolerations", s.Spec.Tolerations, lim)
}

// newUID is a random (version 4) UUID, as Kubernetes gives every object.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40 // version 4
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Apply adds the defaults to p.Spec.Tolerations in place and reports
// whether it changed anything. It is idempotent, so it runs on create and
// on every update.
func (c Config) Apply(p *podv1.Pod) bool {
	if p.Spec == nil {
		p.Spec = &podv1.PodSpec{}
	}
	changed := false
	switch podutil.OwnerKind(p) {
	case KindDaemonSet:
		for _, t := range daemonSetTolerations(p.Spec.GetHostNetwork()) {
			changed = addOrUpdate(p.Spec, t) || changed
		}
	case KindNode:
		changed = addOrUpdate(p.Spec, &nodev1.Toleration{Operator: "Exists", Effect: nodemodel.NoExecute}) || changed
	}
	for _, d := range []struct {
		key  string
		secs int64
	}{{nodemodel.TaintNotReady, c.NotReadySeconds}, {nodemodel.TaintUnreachable, c.UnreachableSeconds}} {
		if covered(p.Spec.Tolerations, d.key) {
			continue
		}
		secs := d.secs
		p.Spec.Tolerations = append(p.Spec.Tolerations, &nodev1.Toleration{Key: d.key, Operator: "Exists", Effect: nodemodel.NoExecute, TolerationSeconds: &secs})
		changed = true
	}
	return changed
}

// covered is DefaultTolerationSeconds' test: some toleration has the key
// (or an empty key) and effect NoExecute (or an empty effect). The operator
// and value are not looked at, as upstream.
func covered(tols []*nodev1.Toleration, key string) bool {
	for _, t := range tols {
		if (t.GetKey() == key || t.GetKey() == "") && (t.GetEffect() == nodemodel.NoExecute || t.GetEffect() == "") {
			return true
		}
	}
	return false
}

// daemonSetTolerations are the tolerations the DaemonSet controller adds to
// its pods (pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations).
func daemonSetTolerations(hostNetwork bool) []*nodev1.Toleration {
	exists := func(key, effect string) *nodev1.Toleration {
		return &nodev1.Toleration{Key: key, Operator: "Exists", Effect: effect}
	}
	out := []*nodev1.Toleration{
		exists(nodemodel.TaintNotReady, nodemodel.NoExecute),
		exists(nodemodel.TaintUnreachable, nodemodel.NoExecute),
		exists(nodemodel.TaintDiskPressure, nodemodel.NoSchedule),
		exists(nodemodel.TaintMemoryPressure, nodemodel.NoSchedule),
		exists(nodemodel.TaintPIDPressure, nodemodel.NoSchedule),
		exists(nodemodel.TaintUnschedulable, nodemodel.NoSchedule),
	}
	if hostNetwork {
		out = append(out, exists(nodemodel.TaintNetworkUnavailable, nodemodel.NoSchedule))
	}
	return out
}

// addOrUpdate is upstream AddOrUpdateTolerationInPodSpec: a toleration with
// the same identity (key, operator, value, effect) is replaced when it
// differs (e.g. in tolerationSeconds), otherwise t is appended.
func addOrUpdate(spec *podv1.PodSpec, t *nodev1.Toleration) bool {
	for i, old := range spec.Tolerations {
		if sameIdentity(old, t) {
			if proto.Equal(old, t) {
				return false
			}
			spec.Tolerations[i] = t
			return true
		}
	}
	spec.Tolerations = append(spec.Tolerations, t)
	return true
}

func operator(t *nodev1.Toleration) string {
	if t.GetOperator() == "" {
		return "Equal"
	}
	return t.GetOperator()
}

// sameIdentity: key, effect, operator and value all equal (spec §9).
func sameIdentity(a, b *nodev1.Toleration) bool {
	return a.GetKey() == b.GetKey() && a.GetEffect() == b.GetEffect() && operator(a) == operator(b) && a.GetValue() == b.GetValue()
}
