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

// polled is one object of a snapshot: its fingerprint and how to build it.
type polled struct {
	fp   any
	conv func() (object, error)
}

// snapshot is every object of a resource in a namespace, by namespace/name,
// and the cache version it was taken at.
type snapshot struct {
	rv    string
	items map[string]polled
}

type leaseFP struct {
	stored *nodev1.Lease
	renew  int64
}

func unixNano(t *timestamppb.Timestamp) int64 {
	if t == nil {
		return 0
	}
	return t.AsTime().UnixNano()
}

func (s *Server) leaseSnapshot(_ context.Context, ns string) (snapshot, error) {
	leases, rv, _ := s.b.Nodes.Leases("", 0)
	sn := snapshot{rv: rv, items: make(map[string]polled, len(leases))}
	if ns != "" && ns != convert.NodeLeaseNamespace {
		return sn, nil
	}
	for _, l := range leases {
		sn.items[convert.NodeLeaseNamespace+"/"+l.Name] = polled{
			fp:   leaseFP{l.Lease.GetLease(), unixNano(l.Lease.GetObservedRenewTime())},
			conv: func() (object, error) { return leaseObject(l) },
		}
	}
	return sn, nil
}

type eventFP struct {
	count   int32
	last    int64
	message string
	typ     string
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
			fp: eventFP{e.GetCount(), unixNano(e.GetLastTimestamp()), e.GetMessage(), e.GetType()},
			conv: func() (object, error) {
				k, err := convert.Event(e)
				if err != nil {
					return object{}, err
				}
				return object{obj: k, meta: &k.ObjectMeta, fields: selectors.EventFields(k)}, nil
			},
		}
	}
	return sn, nil
}

// pollWatch sends the difference between successive snapshots, starting
// from base, until ctx ends: ADDED for a new object, MODIFIED for one
// whose fingerprint changed, DELETED (with its last state) for one gone.
// Each event carries the version of the snapshot that found it.
func (s *Server) pollWatch(ctx context.Context, res *resource, ns string, base snapshot, send func(typ string, o object, rv string) error) error {
	t := time.NewTicker(s.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := res.snapshot(ctx, ns)
		if err != nil {
			return err
		}
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
			o, err := now.conv()
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
