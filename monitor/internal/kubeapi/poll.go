// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/convert"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/selectors"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/watch"
)

// Leases and events have no change history to follow: most lease renewals
// are never stored (they arrive on the collectors' live feeds), and events
// are kept in the cache without one. Their watches compare snapshots of
// what the monitor holds instead, every pollEvery: a cheap fingerprint per
// object (the stored record's pointer, which the cache replaces on every
// change, and the newest renewal; an event's count, last time and message)
// finds what changed, and only that is converted and sent.

// fingerprint tells two states of an object apart cheaply: ptr is a
// pointer the cache replaces on every change (a stored lease), the rest
// scalars (a renewal's time; an event's count, last time and message).
// Comparable, and pointer-shaped where it is boxed, so taking 100,000 of
// them a second allocates little.
type fingerprint struct {
	ptr   any
	n     int64
	count int32
	text  string
}

// polled is one object of a snapshot: its fingerprint and its source
// (a pointer, converted by the resource's fromSnapshot when sent).
type polled struct {
	fp  fingerprint
	src any
}

// snapshot is every object of a resource in a namespace, by key, and the
// cache version it was taken at.
type snapshot struct {
	rv    string
	items map[string]polled
}

func unixNano(t *timestamppb.Timestamp) int64 {
	if t == nil {
		return 0
	}
	return t.AsTime().UnixNano()
}

// leaseSnapshot keys leases by node name (their namespace is fixed).
func (s *Server) leaseSnapshot(_ context.Context, ns string) (snapshot, error) {
	if ns != "" && ns != convert.NodeLeaseNamespace {
		return snapshot{rv: s.nodesVersion(context.Background())}, nil
	}
	leases, rv, _ := s.b.Nodes.Leases("", 0)
	sn := snapshot{rv: rv, items: make(map[string]polled, len(leases))}
	for i := range leases {
		l := &leases[i]
		fp := fingerprint{ptr: l.Stored, n: l.Live.RenewTime.UnixNano()}
		if l.Live.RenewTime.IsZero() {
			fp.n = 0
		}
		sn.items[l.Name] = polled{fp: fp, src: l}
	}
	return sn, nil
}

func leaseFromSnapshot(src any) (object, error) {
	l := src.(*api.NodeLease)
	return leaseObject(l, l.Response())
}

func (s *Server) eventSnapshot(ctx context.Context, ns string) (snapshot, error) {
	rv := s.nodesVersion(ctx)
	resp, err := s.b.Nodes.ListEvents(ctx, &nodev1.ListEventsRequest{Limit: math.MaxInt32})
	if err != nil {
		return snapshot{}, fromGRPC("events", "", err)
	}
	sn := snapshot{rv: rv, items: make(map[string]polled, len(resp.GetEvents()))}
	for _, e := range resp.GetEvents() {
		evNS := e.GetMetadata().GetNamespace()
		if evNS == "" {
			evNS = convert.EventNamespace
		}
		if ns != "" && evNS != ns {
			continue
		}
		sn.items[evNS+"/"+e.GetMetadata().GetName()] = polled{
			fp:  fingerprint{n: unixNano(e.GetLastTimestamp()), count: e.GetCount(), text: e.GetType() + "/" + e.GetMessage()},
			src: e,
		}
	}
	return sn, nil
}

func eventFromSnapshot(src any) (object, error) {
	k, err := convert.Event(src.(*nodev1.Event))
	if err != nil {
		return object{}, err
	}
	return object{obj: k, meta: &k.ObjectMeta, fields: selectors.EventFields(k)}, nil
}

// pollWatch sends the difference between successive snapshots, starting
// from base, until ctx ends: ADDED for a new object, MODIFIED for one
// whose fingerprint changed, DELETED (with its last state) for one gone.
// Each event carries the version of the snapshot that found it.
func (s *Server) pollWatch(ctx context.Context, res *resource, ns string, base snapshot, send func(typ string, o object, rv string) error) error {
	wait := s.pollEvery
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		took := time.Now()
		cur, err := res.snapshot(ctx, ns)
		if err != nil {
			return err
		}
		// A snapshot of 100,000 leases takes about 0.2 s: spacing them by
		// four times that bounds what one watcher costs to a fifth of a
		// core, however large the fleet.
		wait = max(s.pollEvery, 4*time.Since(took))
		keys := make([]string, 0, len(cur.items))
		for k := range cur.items {
			keys = append(keys, k)
		}
		for k := range base.items {
			if _, ok := cur.items[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			now, ok := cur.items[k]
			was, had := base.items[k]
			typ := watch.Modified
			switch {
			case !ok:
				typ, now = watch.Deleted, was
			case !had:
				typ = watch.Added
			case now.fp == was.fp:
				continue
			}
			o, err := res.fromSnapshot(now.src)
			if err != nil {
				return err
			}
			if err := send(typ, o, cur.rv); err != nil {
				return err
			}
		}
		base = cur
	}
}
