// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// binDeviation is the largest deviation from the mean of the phases'
// counts in 100 equal bins of the interval (100 ms bins of 10 s).
func binDeviation(ph []float64) float64 {
	var bins [100]float64
	for _, p := range ph {
		bins[int(p*100)%100]++
	}
	mean, worst := float64(len(ph))/100, 0.0
	for _, b := range bins {
		worst = max(worst, math.Abs(b-mean)/mean)
	}
	return worst
}

// Phases spread evenly over the interval, whether a fleet has one stream
// per connection or many (the benchmark's 1,000 connections of 100 nodes,
// and the 900 left after a tenth of them went), and the streams of one
// connection fall in renewGroups groups a tenth of an interval apart.
func TestPhasesAreEvenAndGroupedByConnection(t *testing.T) {
	for _, c := range []struct{ conns, per int }{{100_000, 1}, {10_000, 1}, {1000, 100}, {900, 100}, {300, 100}} {
		p := newPhases()
		var all []float64
		for k := range c.conns {
			conn := fmt.Sprintf("10.0.%d.%d:4%04d", k/250, k%250, k)
			groups := map[float64]int{}
			for range c.per {
				ph := p.acquire(conn)
				if ph < 0 || ph >= 1 {
					t.Fatalf("phase %v outside [0, 1)", ph)
				}
				groups[ph]++
				all = append(all, ph)
			}
			if want := min(c.per, renewGroups); len(groups) != want {
				t.Fatalf("%d streams on one connection in %d groups, want %d", c.per, len(groups), want)
			}
		}
		// Within 10 % (a burst of 10 is 3 % of a bin at 300 connections):
		// the benchmark's flatness goal allows 20 % per bin.
		if d := binDeviation(all); d > 0.10 {
			t.Errorf("%d connections × %d streams: a 100 ms bin deviates %.1f %% from the mean", c.conns, c.per, 100*d)
		}
	}
}

// Lone connections share phaseSlots slots, so their renewals arrive in
// company (one wakeup of the collector for a slot's worth of them).
func TestLoneConnectionsShareSlots(t *testing.T) {
	p := newPhases()
	slots := map[float64]int{}
	for k := range 10_000 {
		slots[p.acquire(fmt.Sprintf("10.1.%d.%d:5%04d", k/250, k%250, k))]++
	}
	if len(slots) != phaseSlots {
		t.Fatalf("10,000 lone connections on %d distinct phases, want the %d slots", len(slots), phaseSlots)
	}
	for ph, n := range slots {
		if n < 10_000/phaseSlots*8/10 || n > 10_000/phaseSlots*12/10 {
			t.Errorf("slot %v holds %d connections, want about %d", ph, n, 10_000/phaseSlots)
		}
	}
}

func TestPhaseEntriesGoWithTheirLastStream(t *testing.T) {
	p := newPhases()
	a1, a2 := p.acquire("a"), p.acquire("a")
	if d := math.Abs(a2 - a1); math.Abs(d-1.0/renewGroups) > 1e-9 && math.Abs(d-(1-1.0/renewGroups)) > 1e-9 {
		t.Fatalf("two streams of one connection: phases %v and %v, want a group apart", a1, a2)
	}
	p.release("a")
	if len(p.conns) != 1 {
		t.Fatal("entry gone with a stream still attached")
	}
	p.release("a")
	p.release("never-seen")
	if len(p.conns) != 0 {
		t.Fatalf("%d entries left after every stream went", len(p.conns))
	}
}

// Over real gRPC: Register acks carry a phase; streams of one client
// connection share their connection's groups, another connection gets
// another base; with --lease.renew-phases=false acks carry none.
func TestRegisterAckCarriesRenewPhase(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first []float64
	for i := range renewGroups + 1 {
		_, ack := h.open(t, ctx, fmt.Sprintf("node-%02d", i))
		if ack.RenewPhase == nil {
			t.Fatalf("register ack %v without a renewal phase", ack)
		}
		first = append(first, ack.GetRenewPhase())
	}
	if first[renewGroups] != first[0] {
		t.Errorf("the %d-th stream of a connection: phase %v, want its first group's %v", renewGroups+1, first[renewGroups], first[0])
	}
	for g := 1; g < renewGroups; g++ {
		if d := math.Mod(first[g]-first[0]+1, 1); math.Abs(d-float64(g)/renewGroups) > 1e-9 {
			t.Errorf("group %d at phase %v, %v after the first; want %v", g, first[g], d, float64(g)/renewGroups)
		}
	}
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	other := &harness{client: collectorv1.NewCollectorServiceClient(conn)}
	_, ack := other.open(t, ctx, "node-other")
	if d := math.Mod(ack.GetRenewPhase()-first[0]+1, 1/float64(renewGroups)); d < 1e-9 || d > 1/float64(renewGroups)-1e-9 {
		t.Errorf("another connection's phase %v falls in the first connection's groups (base %v)", ack.GetRenewPhase(), first[0])
	}

	off := newHarness(t, func(c *Config, _ *persist.Config) { c.RenewPhases = false })
	if _, ack := off.open(t, ctx, "node-off"); ack.RenewPhase != nil {
		t.Errorf("--lease.renew-phases=false: ack carries phase %v", ack.GetRenewPhase())
	}
}
