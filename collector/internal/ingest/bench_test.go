// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/validation"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkRenewalServerPath is the collector's own work per renewal,
// without gRPC: validation (skew, monotonic renewTime, duration) and the
// in-memory table update that also queues the feed event. ns/op × 1000 is
// the CPU per 1,000 renewals.
func BenchmarkRenewalServerPath(b *testing.B) {
	table := live.New(1 << 20)
	const nodes = 10000
	refs := make([]live.Ref, nodes)
	for i := range refs {
		name := fmt.Sprintf("node-%06d", i)
		refs[i], _ = table.Ref(name, table.Attach(name, "uid", time.Now()))
	}
	lim := validation.DefaultLimits()
	now := time.Now()
	r := &collectorv1.LeaseRenewal{RenewTime: timestamppb.New(now), LeaseDurationSeconds: 40}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var taken []live.Event // reused, as the feed does
	for i := range b.N {
		n := i % nodes
		if l := validation.LeaseRenewal(r, lim); len(l) > 0 {
			b.Fatal(l)
		}
		if !refs[n].Renew(now, 40) {
			b.Fatal("renewal refused")
		}
		if n == nodes-1 {
			taken, _, _ = table.Take(taken, false, time.Now()) // the feed flusher drains events every batch interval
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRenewalGRPC is the full path over loopback gRPC: 100 streams, each
// sending renewals and waiting for their acks, server and client in this
// process (so CPU per op counts both ends).
func BenchmarkRenewalGRPC(b *testing.B) {
	h := newHarness(b, nil)
	const streams = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*client, streams)
	for i := range clients {
		s, err := h.client.Report(ctx)
		if err != nil {
			b.Fatal(err)
		}
		c := &client{t: b, s: s}
		if err := s.Send(register(fmt.Sprintf("bench-%03d", i))); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var wg sync.WaitGroup
	per := b.N/streams + 1
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range per {
				if err := c.s.Send(lease(uint64(2+j), time.Now())); err != nil {
					return
				}
				if _, err := c.s.Recv(); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(per*streams), "cpu-ns/op")
}

// cpuTime is the process's user+system CPU time in ns: with 100 streams on
// two cores, wall time per op understates the CPU each renewal costs.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStatusReportChecks is the collector's own work per status report
// before it knows whether anything changed: validation and the digest it
// compares with the stored one. Every reporter sends one after each
// (re-)registration, so after a collector restart this runs for the whole
// fleet within a minute.
func BenchmarkStatusReportChecks(b *testing.B) {
	st := digestStatus()
	now := time.Unix(1700000100, 0)
	lim := validation.DefaultLimits()
	b.ReportAllocs()
	for b.Loop() {
		if l := validation.StatusReport(&collectorv1.StatusReport{Status: st}, now, lim); len(l) > 0 {
			b.Fatal(l)
		}
		if _, ok := digestOf(st); !ok {
			b.Fatal("no digest")
		}
	}
}
