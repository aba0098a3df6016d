// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package live

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

const (
	attached = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_ATTACHED
	renewed  = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_RENEWED
	detached = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_DETACHED
	waiting  = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_WAITING
)

// Renewals racing with Takes: every event comes out exactly once, each
// node's in the order it happened, whichever shard it lives in.
func TestTakeKeepsEachNodesOrder(t *testing.T) {
	tbl := New(1 << 20)
	t0 := time.Unix(1_700_000_000, 0)
	const nodes, renewals = 200, 50
	gens := make([]uint64, nodes)
	for i := range nodes {
		gens[i] = tbl.Attach(fmt.Sprintf("n-%03d", i), "uid", t0)
	}
	var all []Event
	done := make(chan struct{})
	var takes sync.WaitGroup
	takes.Add(1)
	go func() {
		defer takes.Done()
		var buf []Event // reused, as the feed does
		for {
			select {
			case <-done:
				return
			default:
			}
			ev, _, overflow := tbl.Take(buf, false, t0)
			if overflow {
				t.Error("overflow with a 1 Mi buffer")
			}
			all = append(all, ev...)
			buf = ev
		}
	}()
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= renewals; r++ {
				if !tbl.Renew(fmt.Sprintf("n-%03d", i), gens[i], t0.Add(time.Duration(r)*time.Second), 40) {
					t.Errorf("renewal %d of n-%03d refused", r, i)
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	takes.Wait()
	ev, _, _ := tbl.Take(nil, false, t0)
	all = append(all, ev...)

	next := map[string]int{}
	for _, e := range all {
		switch e.Kind {
		case attached:
			if next[e.Name] != 0 {
				t.Fatalf("%s attached after its renewals", e.Name)
			}
			next[e.Name] = 1
		case renewed:
			want := t0.Add(time.Duration(next[e.Name]) * time.Second)
			if !e.RenewTime.Equal(want) {
				t.Fatalf("%s: renewal %v out of order, want %v", e.Name, e.RenewTime, want)
			}
			next[e.Name]++
		}
	}
	if len(next) != nodes {
		t.Fatalf("events of %d nodes, want %d", len(next), nodes)
	}
	for name, n := range next {
		if n != renewals+1 {
			t.Fatalf("%s: %d renewals taken, want %d", name, n-1, renewals)
		}
	}
	if got := tbl.Unpersisted(); got != nodes {
		t.Fatalf("Unpersisted = %d, want %d", got, nodes)
	}
}

// A snapshot lists every attached node with its latest renewal and the nodes
// heard waiting, and only those.
func TestSnapshot(t *testing.T) {
	tbl := New(1 << 10)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		name := fmt.Sprintf("a-%02d", i)
		g := tbl.Attach(name, "uid", t0)
		tbl.Renew(name, g, t0.Add(time.Second), 40)
		if i%10 == 0 {
			tbl.Detach(name, g)
		}
	}
	tbl.Waiting("w-1", t0.Add(2*time.Second), 15*time.Second) // refused, told to stay away
	tbl.Waiting("a-01", t0, 0)                                // then attached: no longer waiting
	tbl.Attach("a-01", "uid", t0.Add(3*time.Second))

	_, snap, _ := tbl.Take(nil, true, t0.Add(5*time.Second))
	got := map[string]Event{}
	for _, e := range snap {
		got[e.Name] = e
	}
	if len(got) != 91 || len(snap) != 91 {
		t.Fatalf("snapshot of %d events (%d names), want 90 attached + 1 waiting", len(snap), len(got))
	}
	if e := got["w-1"]; e.RetryWithin != 15*time.Second {
		t.Fatalf("w-1 snapshot RetryWithin = %s, want the 15s it was told", e.RetryWithin)
	}
	if e := got["a-05"]; e.Kind != attached || !e.RenewTime.Equal(t0.Add(time.Second)) {
		t.Fatalf("a-05 = %+v", e)
	}
	if e := got["w-1"]; e.Kind != waiting || !e.RenewTime.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("w-1 = %+v", e)
	}
	if _, ok := got["a-10"]; ok {
		t.Fatal("a detached node is in the snapshot")
	}
	if tbl.Len() != 90 {
		t.Fatalf("Len %d, want 90", tbl.Len())
	}

	// Waiting nodes are forgotten WaitingMemory after they were heard.
	_, snap, _ = tbl.Take(nil, true, t0.Add(2*time.Second+WaitingMemory+time.Millisecond))
	for _, e := range snap {
		if e.Kind == waiting {
			t.Fatalf("%s still waiting past WaitingMemory", e.Name)
		}
	}
}

// Events beyond the buffer are dropped, and the next Take says so and
// brings a snapshot of every shard.
func TestOverflowBringsSnapshot(t *testing.T) {
	tbl := New(numShards) // one event per shard
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 1000 {
		tbl.Attach(fmt.Sprintf("n-%04d", i), "uid", t0)
	}
	ev, snap, overflow := tbl.Take(nil, false, t0)
	if !overflow {
		t.Fatal("no overflow after 1,000 events in a 64-event buffer")
	}
	if len(ev) > numShards {
		t.Fatalf("%d events kept, buffer is %d", len(ev), numShards)
	}
	if len(snap) != 1000 {
		t.Fatalf("snapshot of %d nodes, want 1,000", len(snap))
	}
	if _, _, overflow := tbl.Take(nil, false, t0); overflow {
		t.Fatal("overflow reported twice")
	}
}

// A renewal of a replaced attachment is refused, and the old attachment's
// Detach does not remove the new one.
func TestGenerations(t *testing.T) {
	tbl := New(1 << 10)
	t0 := time.Unix(1_700_000_000, 0)
	g1 := tbl.Attach("n", "uid", t0)
	g2 := tbl.Attach("n", "uid", t0)
	if g2 <= g1 {
		t.Fatalf("generations %d then %d", g1, g2)
	}
	if tbl.Renew("n", g1, t0, 40) {
		t.Fatal("renewal of a replaced attachment accepted")
	}
	if tbl.Detach("n", g1) {
		t.Fatal("detach of a replaced attachment accepted")
	}
	if !tbl.Renew("n", g2, t0.Add(time.Second), 40) {
		t.Fatal("renewal of the current attachment refused")
	}
	tbl.MarkPersisted("n", g2, t0.Add(time.Second), time.Time{})
	if e, ok := tbl.Get("n", g2); !ok || e.Dirty || !e.Persisted || tbl.Unpersisted() != 0 {
		t.Fatalf("after MarkPersisted: %+v, unpersisted %d", e, tbl.Unpersisted())
	}
	if !tbl.Detach("n", g2) || tbl.Len() != 0 {
		t.Fatal("current attachment not detached")
	}
	ev, _, _ := tbl.Take(nil, false, t0)
	if n := len(ev); n != 4 || ev[3].Kind != detached {
		t.Fatalf("events %+v", ev)
	}
}

// BenchmarkRenewContended: renewals from 10,000 goroutines at once, as the
// collector's stream goroutines make them, each yielding between renewals
// (a stream goroutine waits for its next message), with the feed taking
// events every 250 ms: one lock against the shards.
func BenchmarkRenewContended(b *testing.B) {
	for _, shards := range []int{1, numShards} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			tbl := newTable(1<<24, shards)
			t0 := time.Unix(1_700_000_000, 0)
			const streams = 10_000
			names := make([]string, streams)
			gens := make([]uint64, streams)
			for i := range names {
				names[i] = fmt.Sprintf("node-%05d", i)
				gens[i] = tbl.Attach(names[i], "uid", t0)
			}
			stop := make(chan struct{})
			go func() {
				t := time.NewTicker(250 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						tbl.Take(nil, false, t0)
					}
				}
			}()
			defer close(stop)
			per := max(1, b.N/streams) // ns/op is per renewal when b.N ≥ streams
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range per {
						tbl.Renew(names[i], gens[i], t0.Add(time.Duration(r+1)), 40)
						runtime.Gosched()
					}
				}()
			}
			wg.Wait()
		})
	}
}

// Once its buffers have grown, a round of renewals and the Take that
// drains it allocate nothing.
func TestRenewAndTakeAllocateNothing(t *testing.T) {
	tbl := New(1 << 20)
	t0 := time.Unix(1_700_000_000, 0)
	names := make([]string, 1000)
	gens := make([]uint64, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("n-%04d", i)
		gens[i] = tbl.Attach(names[i], "uid", t0)
	}
	buf, _, _ := tbl.Take(nil, false, t0) // the ATTACHED events
	round := func() {
		for i, n := range names {
			tbl.Renew(n, gens[i], t0, 40)
		}
		buf, _, _ = tbl.Take(buf, false, t0)
		if len(buf) != len(names) {
			t.Fatalf("took %d events, want %d", len(buf), len(names))
		}
	}
	round()
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Fatalf("%v allocations per round of %d renewals", n, len(names))
	}
}

// A Ref renews its own attachment only: once the node attached again, or
// detached, renewals through the old Ref are refused and change nothing.
func TestRefRenewsItsAttachmentOnly(t *testing.T) {
	tbl := New(1 << 10)
	t0 := time.Unix(1_700_000_000, 0)
	g1 := tbl.Attach("n", "uid", t0)
	r1, ok := tbl.Ref("n", g1)
	if !ok || !r1.Renew(t0.Add(time.Second), 40) {
		t.Fatal("renewal through a current Ref refused")
	}
	if e, _ := tbl.Get("n", g1); !e.RenewTime.Equal(t0.Add(time.Second)) || e.Renewals != 1 || !e.Dirty || tbl.Unpersisted() != 1 {
		t.Fatalf("after a Ref renewal: %+v, unpersisted %d", e, tbl.Unpersisted())
	}
	g2 := tbl.Attach("n", "uid", t0.Add(2*time.Second))
	if r1.Renew(t0.Add(3*time.Second), 40) {
		t.Fatal("the replaced attachment's Ref renewed")
	}
	if _, ok := tbl.Ref("n", g1); ok {
		t.Fatal("Ref of a replaced attachment")
	}
	r2, _ := tbl.Ref("n", g2)
	if !r2.Renew(t0.Add(4*time.Second), 40) {
		t.Fatal("renewal through the new Ref refused")
	}
	if e, _ := tbl.Get("n", g2); e.Renewals != 1 || !e.RenewTime.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("new attachment after renewals: %+v", e)
	}
	tbl.Detach("n", g2)
	if r2.Renew(t0.Add(5*time.Second), 40) || (Ref{}).Renew(t0, 40) || tbl.Unpersisted() != 0 {
		t.Fatal("renewal after detach, or through the zero Ref")
	}
	ev, _, _ := tbl.Take(nil, false, t0)
	var renewals int
	for _, e := range ev {
		if e.Kind == renewed {
			renewals++
		}
	}
	if renewals != 2 {
		t.Fatalf("%d RENEWED events, want 2", renewals)
	}
}

// A status report acknowledged as stored is a STATUS_REPORTED event with
// its heartbeat and its receipt time, once per heartbeat that changed (an
// earlier one is a clock stepped back, still news); the node's latest one
// follows its ATTACHED in snapshots, and a replaced attachment reports
// nothing.
func TestStatusReported(t *testing.T) {
	const reported = collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED
	tbl := New(1 << 10)
	t0 := time.Unix(1_700_000_000, 0)
	g := tbl.Attach("n", "uid", t0)
	r, _ := tbl.Ref("n", g)
	tbl.Attach("quiet", "uid", t0)
	tbl.Take(nil, false, t0)

	// The report, the same one again (a resend), an older one (the
	// node's clock stepped back), each received a second later.
	for i, hb := range []time.Time{t0.Add(time.Second), t0.Add(time.Second), t0} {
		if !r.StatusReported(hb, t0.Add(time.Duration(i+1)*time.Second)) {
			t.Fatal("a current attachment's report refused")
		}
	}
	ev, _, _ := tbl.Take(nil, false, t0)
	if len(ev) != 2 || ev[0].Kind != reported || ev[0].Name != "n" || !ev[0].RenewTime.Equal(t0.Add(time.Second)) || ev[0].Received != t0.Add(time.Second).UnixNano() ||
		!ev[1].RenewTime.Equal(t0) || ev[1].Received != t0.Add(3*time.Second).UnixNano() {
		t.Fatalf("events %+v, want STATUS_REPORTED at t0+1s received at t0+1s, then at t0 received at t0+3s (a resend is no news)", ev)
	}
	if e, _ := tbl.Get("n", g); !e.StatusHeartbeat.Equal(t0) || !e.StatusReceived.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("entry heartbeat %v received %v", e.StatusHeartbeat, e.StatusReceived)
	}

	_, snap, _ := tbl.Take(nil, true, t0)
	var kinds []string
	for _, e := range snap {
		if e.Name == "n" {
			kinds = append(kinds, e.Kind.String())
		}
		if e.Name == "quiet" && e.Kind == reported {
			t.Fatal("a node that reported no status has a STATUS_REPORTED in the snapshot")
		}
	}
	if len(kinds) != 2 || kinds[0] != attached.String() || kinds[1] != reported.String() {
		t.Fatalf("snapshot of n: %v, want ATTACHED then STATUS_REPORTED", kinds)
	}

	tbl.Attach("n", "uid", t0) // replaced
	if r.StatusReported(t0.Add(2*time.Second), t0) {
		t.Fatal("a replaced attachment's report accepted")
	}
}
