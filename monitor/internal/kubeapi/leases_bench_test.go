// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/selectors"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/admission"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// fleet serves n nodes, each with a stored lease, from a synced cache.
func fleet(tb testing.TB, n int) *Server {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ms := memstore.New(memstore.Config{})
	now := time.Now()
	var ops []nodestore.Op
	flush := func() {
		if _, err := ms.Apply(ctx, nil, ops...); err != nil {
			tb.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := range n {
		name := fmt.Sprintf("node-%06d", i)
		ops = append(ops,
			nodestore.Put(nodestore.Nodes, name, &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name, CreationTimestamp: nodemodel.Timestamp(now.Add(-time.Hour))}, Spec: &nodev1.NodeSpec{}}),
			nodestore.Put(nodestore.Leases, name, &nodev1.Lease{Metadata: &nodev1.ObjectMeta{Name: name},
				Spec: &nodev1.LeaseSpec{HolderIdentity: name, LeaseDurationSeconds: 40, RenewTime: nodemodel.Timestamp(now)}}))
		if len(ops) >= 128 {
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
	c := cache.New(ms, cache.Config{ProgressInterval: time.Second}, zap.NewNop())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done; _ = ms.Close() })
	for !c.Synced() {
		time.Sleep(time.Millisecond)
	}
	b := Backends{
		Nodes: api.New(ms, c, follower{}, &fakeLive{}, zap.NewNop(), nil),
		Pods:  api.NewPodServer(ms, c, nil, admission.DefaultConfig(), zap.NewNop(), nil),
		Auth:  api.Authorizer{Plaintext: true, Log: zap.NewNop()},
	}
	return New(b, zap.NewNop(), "127.0.0.1")
}

// BenchmarkLeaseSnapshot100k is what a lease watch pays each second at
// 100,000 nodes: one snapshot of fingerprints (poll.go), nothing converted.
func BenchmarkLeaseSnapshot100k(b *testing.B) {
	s := fleet(b, 100_000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sn, err := s.leaseSnapshot(ctx, "kube-node-lease")
		if err != nil || len(sn.items) != 100_000 {
			b.Fatalf("%d leases, %v", len(sn.items), err)
		}
	}
}

// BenchmarkListLeases100k lists the leases of 100,000 nodes: kubectl's
// first page of 500, and the whole list in one answer (no limit).
func BenchmarkListLeases100k(b *testing.B) {
	s := fleet(b, 100_000)
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		limit int
		want  int
	}{{"page500", 500, 500}, {"all", 0, 100_000}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := s.listLeases(ctx, "kube-node-lease", selectors.Selectors{}, bc.limit, "")
				if err != nil || len(p.items) != bc.want {
					b.Fatalf("%d leases, %v", len(p.items), err)
				}
			}
		})
	}
}
