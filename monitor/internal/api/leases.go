// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
)

// NodeLease is one node's lease as GetLease serves it, with the node's
// name and creation time (a lease never stored has no creation time of
// its own).
type NodeLease struct {
	Name        string
	NodeCreated time.Time
	Lease       *nodev1.GetLeaseResponse
}

// Leases reads the leases of the served nodes named after after, in name
// order, until limit leases (0: all) are found, in one pass over the watch
// cache's entries and the feed tracker: the kube API's lease list at
// 100,000 nodes was two service calls (a lease, then its node) per node.
// A node the monitor knows no lease of is skipped. It returns the cache
// version the page reflects and the name to continue after ("" at the
// end).
func (s *Server) Leases(after string, limit int) ([]NodeLease, string, string) {
	var out []NodeLease
	var buf []cache.Entry
	ver := ""
	for {
		// Pages of the cache's entries, so a limited page reads little
		// more than it answers and a full list never holds every entry.
		want := 500
		if limit > 0 {
			want = min(500, limit-len(out)+1)
		}
		entries, v, more := s.cache.EntriesAfter(buf[:0], after, want)
		if ver == "" {
			ver = v.String()
		}
		buf = entries
		for _, e := range entries {
			if e.Node == nil {
				continue
			}
			if limit > 0 && len(out) == limit {
				return out, ver, out[len(out)-1].Name
			}
			if resp, ok := leaseResponse(e.Lease, s.live.Node(e.Name)); ok {
				out = append(out, NodeLease{Name: e.Name, NodeCreated: e.Node.GetMetadata().GetCreationTimestamp().AsTime(), Lease: resp})
			}
			after = e.Name
		}
		if !more {
			return out, ver, ""
		}
	}
}
