// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package owners

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// PolicyParallel is a StatefulSet's podManagementPolicy for per-ordinal
// handling; anything else is OrderedReady.
const PolicyParallel = "Parallel"

// StoreSource reads the owners from the store at each sync (a consistent
// list, so never older than the cache) and writes their status there,
// fenced and conditional on the revision read.
type StoreSource struct {
	Store interface {
		nodestore.Reader
		nodestore.Writer
	}
}

var ownerKinds = []nodestore.Kind{nodestore.ReplicaSets, nodestore.StatefulSets, nodestore.DaemonSets}

// Owners implements Source.
func (s StoreSource) Owners(ctx context.Context) ([]Owner, error) {
	var out []Owner
	for _, k := range ownerKinds {
		objs, _, err := s.Store.List(ctx, k, nodestore.ListOptions{})
		if err != nil {
			return out, fmt.Errorf("list %s: %w", k, err)
		}
		for _, o := range objs {
			out = append(out, FromStored(o))
		}
	}
	return out, nil
}

// FromStored converts a stored ReplicaSet, StatefulSet or DaemonSet.
func FromStored(o nodestore.Object) Owner {
	var (
		md       *nodev1.ObjectMeta
		replicas *int32
		sel      *nodev1.LabelSelector
		tmpl     *podv1.PodTemplateSpec
		ow       Owner
	)
	switch v := o.Value.(type) {
	case *appsv1.ReplicaSet:
		ow.Kind, md, replicas, sel, tmpl = KindReplicaSet, v.GetMetadata(), v.GetSpec().Replicas, v.GetSpec().GetSelector(), v.GetSpec().GetTemplate()
		if st := v.GetStatus(); st != nil {
			ow.Stored = &Status{ObservedGeneration: st.GetObservedGeneration(), Replicas: int(st.GetReplicas()), Ready: int(st.GetReadyReplicas()), Terminating: int(st.GetTerminatingReplicas())}
		}
	case *appsv1.StatefulSet:
		ow.Kind, md, replicas, sel, tmpl = KindStatefulSet, v.GetMetadata(), v.GetSpec().Replicas, v.GetSpec().GetSelector(), v.GetSpec().GetTemplate()
		ow.Parallel = v.GetSpec().GetPodManagementPolicy() == PolicyParallel
		if st := v.GetStatus(); st != nil {
			ow.Stored = &Status{ObservedGeneration: st.GetObservedGeneration(), Replicas: int(st.GetReplicas()), Ready: int(st.GetReadyReplicas())}
		}
	case *appsv1.DaemonSet:
		ow.Kind, md, sel, tmpl = KindDaemonSet, v.GetMetadata(), v.GetSpec().GetSelector(), v.GetSpec().GetTemplate()
		if st := v.GetStatus(); st != nil {
			ow.Stored = &Status{ObservedGeneration: st.GetObservedGeneration(), Desired: int(st.GetDesiredNumberScheduled()), Current: int(st.GetCurrentNumberScheduled()),
				Ready: int(st.GetNumberReady()), Misscheduled: int(st.GetNumberMisscheduled())}
		}
	}
	ns, name := splitKey(o.Name)
	ow.Namespace, ow.Name, ow.UID, ow.Generation = ns, name, md.GetUid(), md.GetGeneration()
	ow.Replicas = 1 // unset means 1, as in Kubernetes
	if replicas != nil {
		ow.Replicas = int(*replicas)
	}
	if sel != nil {
		ow.Selector = func(l map[string]string) bool { return Matches(sel, l) }
	}
	ow.Template = &podv1.Pod{Metadata: tmpl.GetMetadata(), Spec: tmpl.GetSpec()}
	return ow
}

func splitKey(key string) (string, string) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// Matches is Kubernetes' LabelSelector semantics: every match_labels pair
// and every expression holds. A nil selector matches nothing (an owner
// without one owns no pods; validation refuses it anyway).
func Matches(sel *nodev1.LabelSelector, labels map[string]string) bool {
	if sel == nil {
		return false
	}
	for k, v := range sel.GetMatchLabels() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range sel.GetMatchExpressions() {
		v, ok := labels[r.GetKey()]
		switch r.GetOperator() {
		case "In":
			if !ok || !slices.Contains(r.GetValues(), v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(r.GetValues(), v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// SetStatus implements Source: read, compare, write if changed (a CAS on
// the revision read, retried a few times when a spec write races it).
func (s StoreSource) SetStatus(ctx context.Context, fence *nodestore.Fence, o Owner, st Status) error {
	kind := map[string]nodestore.Kind{KindReplicaSet: nodestore.ReplicaSets, KindStatefulSet: nodestore.StatefulSets, KindDaemonSet: nodestore.DaemonSets}[o.Kind]
	key := o.Namespace + "/" + o.Name
	for range 4 {
		obj, err := s.Store.Get(ctx, kind, key)
		if errors.Is(err, nodestore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		nv := proto.Clone(obj.Value)
		switch v := nv.(type) {
		case *appsv1.ReplicaSet:
			if v.GetMetadata().GetUid() != o.UID {
				return nil
			}
			v.Status = &appsv1.ReplicaSetStatus{Replicas: int32(st.Replicas), ReadyReplicas: int32(st.Ready), AvailableReplicas: int32(st.Ready),
				TerminatingReplicas: int32(st.Terminating), ObservedGeneration: st.ObservedGeneration}
		case *appsv1.StatefulSet:
			if v.GetMetadata().GetUid() != o.UID {
				return nil
			}
			v.Status = &appsv1.StatefulSetStatus{Replicas: int32(st.Replicas), ReadyReplicas: int32(st.Ready), CurrentReplicas: int32(st.Replicas),
				ObservedGeneration: st.ObservedGeneration}
		case *appsv1.DaemonSet:
			if v.GetMetadata().GetUid() != o.UID {
				return nil
			}
			v.Status = &appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(st.Desired), CurrentNumberScheduled: int32(st.Current),
				NumberReady: int32(st.Ready), NumberAvailable: int32(st.Ready), NumberMisscheduled: int32(st.Misscheduled),
				UpdatedNumberScheduled: int32(st.Current), ObservedGeneration: st.ObservedGeneration}
		}
		if proto.Equal(nv, obj.Value) {
			return nil
		}
		_, err = s.Store.Apply(ctx, fence, nodestore.Op{Kind: kind, Name: key, Value: nv, IfModRevision: obj.ModRevision})
		if !errors.Is(err, nodestore.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("status of %s %s: %w", o.Kind, key, nodestore.ErrConflict)
}

// CacheSource reads the owners from the monitor's cache (no etcd read per
// sync) and writes their status through the store. The controller lists
// the cache's pods before the owners, so every pod's existing owner is in
// the list (what Orphans relies on), and the cache has seen the leader's
// own last write before a sync starts (spec §16.1).
type CacheSource struct {
	Cache *cache.Cache
	StoreSource
}

// Owners implements Source.
func (s CacheSource) Owners(context.Context) ([]Owner, error) {
	if !s.Cache.Synced() {
		return nil, errors.New("cache not synced")
	}
	entries, _ := s.Cache.Objects(ownerKinds...)
	out := make([]Owner, 0, len(entries))
	for _, e := range entries {
		md := e.Object.GetMetadata()
		out = append(out, FromStored(nodestore.Object{Kind: e.Kind, Name: md.GetNamespace() + "/" + md.GetName(), Value: e.Object, ModRevision: e.ModRevision}))
	}
	return out, nil
}
