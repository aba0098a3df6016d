// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
)

// NodeLease is one node's lease: the stored record (nil when none) and
// what the feeds said, with the node's name and creation time (a lease
// never stored has no creation time of its own). Response is what GetLease
// answers; a lease watch compares Stored and Live without building it.
type NodeLease struct {
	Name        string
	NodeCreated time.Time
	Stored      *nodev1.Lease
	Live        liveness.Node
}

// Response is GetLease's answer for l.
func (l *NodeLease) Response() *nodev1.GetLeaseResponse {
	resp, _ := leaseResponse(l.Stored, l.Live)
	return resp
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
			if lv := s.live.Node(e.Name); e.Lease != nil || !lv.RenewTime.IsZero() {
				out = append(out, NodeLease{Name: e.Name, NodeCreated: e.Node.GetMetadata().GetCreationTimestamp().AsTime(), Stored: e.Lease, Live: lv})
			}
			after = e.Name
		}
		if !more {
			return out, ver, ""
		}
	}
}
