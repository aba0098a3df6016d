// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package defrag

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/monitor/internal/leadership/leadertest"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

const mib = 1 << 20

func TestDue(t *testing.T) {
	c := DefaultConfig() // 64 MiB, 25 % free, 5 % growth over 5 steady looks, 15 m
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := func(size, inUse int64) nodestore.MemberStatus {
		return nodestore.MemberStatus{DBSize: size * mib, DBSizeInUse: inUse * mib}
	}
	// looks builds what a member's looks left: the floor, then sizes.
	looks := func(floor int64, sizes ...int64) memberState {
		var ms memberState
		ms.look(floor*mib, c.PlateauRounds)
		for _, s := range sizes {
			ms.look(s*mib, c.PlateauRounds)
		}
		return ms
	}
	steady := looks(80, 84, 84, 84, 84, 84, 84)
	for _, tc := range []struct {
		name   string
		st     nodestore.MemberStatus
		ms     memberState
		reason string
	}{
		{"small file, mostly free", st(40, 10), looks(10), ""},
		{"a quarter free", st(100, 75), looks(75), ReasonFree},
		{"less than a quarter free", st(100, 76), looks(76), ""},
		{"in use 5 % above its floor, steady", st(90, 84), steady, ReasonGrowth},
		{"in use 4 % above its floor, steady", st(90, 83), looks(80, 83, 83, 83, 83, 83, 83), ""},
		{"in use 5 % above its floor, still growing", st(90, 84), looks(80, 81, 82, 83, 83, 84, 84), ""},
		{"steady for fewer looks than a plateau", st(90, 84), looks(80, 84, 84, 84, 84), ""},
		{"due, but defragmented 14 minutes ago", st(90, 84), func() memberState { m := steady; m.last = now.Add(-14 * time.Minute); return m }(), ""},
		{"due, defragmented 15 minutes ago", st(90, 84), func() memberState { m := steady; m.last = now.Add(-15 * time.Minute); return m }(), ReasonGrowth},
		{"empty file", st(0, 0), memberState{}, ""},
	} {
		reason, ok := c.due(tc.st, tc.ms, now)
		if reason != tc.reason || ok != (tc.reason != "") {
			t.Errorf("%s: due = %q, %v; want %q", tc.name, reason, ok, tc.reason)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Config)
		flag string
	}{
		{func(c *Config) { c.MinSize = -1 }, "--etcd.defrag-min-size-mib"},
		{func(c *Config) { c.FreePercent = 0 }, "--etcd.defrag-free-percent"},
		{func(c *Config) { c.FreePercent = 100 }, "--etcd.defrag-free-percent"},
		{func(c *Config) { c.GrowthPercent = 0 }, "--etcd.defrag-growth-percent"},
		{func(c *Config) { c.MinInterval = -time.Second }, "--etcd.defrag-min-interval"},
		{func(c *Config) { c.Timeout = 0 }, "timeout"},
	} {
		c := DefaultConfig()
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.flag)
		}
		if _, err := New(c, nil, nil, zap.NewNop(), nil); err == nil {
			t.Errorf("New accepted an invalid config (%s)", tc.flag)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// fakeStore is a cluster whose members report scripted sizes; a
// defragmentation sets a member's file to its bytes in use less what is
// empty inside its pages (frag).
type fakeStore struct {
	mu        sync.Mutex
	members   []nodestore.Member
	leader    uint64
	status    map[string]nodestore.MemberStatus
	frag      map[string]int64
	failing   map[string]error
	defragged []string
}

func newStore(n int) *fakeStore {
	s := &fakeStore{status: map[string]nodestore.MemberStatus{}, frag: map[string]int64{}, failing: map[string]error{}}
	for i := 1; i <= n; i++ {
		s.members = append(s.members, nodestore.Member{ID: uint64(i), Name: fmt.Sprintf("etcd-%d", i), Endpoint: fmt.Sprintf("http://etcd-%d:2379", i)})
	}
	s.leader = 1
	return s
}

func (s *fakeStore) set(endpoint string, size, inUse, frag int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[endpoint] = nodestore.MemberStatus{DBSize: size * mib, DBSizeInUse: inUse * mib}
	s.frag[endpoint] = frag * mib
}

func (s *fakeStore) Members(context.Context) ([]nodestore.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]nodestore.Member(nil), s.members...), nil
}

func (s *fakeStore) MemberStatus(_ context.Context, ep string) (nodestore.MemberStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.status[ep]
	if !ok {
		return st, fmt.Errorf("no member at %s", ep)
	}
	st.Leader = s.leader
	return st, nil
}

func (s *fakeStore) Defragment(_ context.Context, ep string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defragged = append(s.defragged, ep)
	if err := s.failing[ep]; err != nil {
		return err
	}
	st := s.status[ep]
	dense := st.DBSizeInUse - s.frag[ep]
	s.status[ep] = nodestore.MemberStatus{DBSize: dense, DBSizeInUse: dense}
	s.frag[ep] = 0
	return nil
}

func (s *fakeStore) takeDefragged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.defragged
	s.defragged = nil
	return out
}

// run starts Run in the synctest bubble and stops it at cleanup.
func run(t *testing.T, d *Defragmenter) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// compaction tells d of a compaction and lets the fake minutes pass until
// the round is over.
func compaction(d *Defragmenter, after time.Duration) {
	d.Compacted()
	time.Sleep(after)
	synctest.Wait()
}

// A registration storm's replay: three members, the leader etcd-1, a look
// a minute after each compaction. The files grow while the storm's lease
// copies are superseded and compacted (not due, however far above the
// floor), then stop: etcd-2 has a quarter of its file free and is due at
// once; etcd-1 and etcd-3, whose holes only show as bytes in use above the
// floor, are due once their size held for five looks after it stopped
// growing. The followers go first, the etcd leader last, a pause apart,
// and each member's floor becomes its size after its defragmentation, so
// what compaction keeps on top of it afterwards is not due.
func TestDefragmentsFollowersFirstOnceGrowthStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(3)
		l := &leadertest.Leader{}
		l.Set(true)
		reg := prometheus.NewRegistry()
		cfg := DefaultConfig()
		d, err := New(cfg, s, l, zap.NewNop(), reg)
		if err != nil {
			t.Fatal(err)
		}
		run(t, d)
		eps := []string{s.members[0].Endpoint, s.members[1].Endpoint, s.members[2].Endpoint}
		look := func(want ...string) {
			t.Helper()
			compaction(d, cfg.Settle+time.Second)
			if got := s.takeDefragged(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("defragmented %v, want %v", got, want)
			}
		}
		for _, size := range []int64{85, 88, 91, 94} {
			for _, ep := range eps {
				s.set(ep, size, size, 0)
			}
			look()
		}
		s.set(eps[0], 96, 96, 6)
		s.set(eps[1], 110, 80, 6)
		s.set(eps[2], 96, 96, 6)
		look(eps[1])
		look()
		look()
		look()
		look()
		// The sixth look at 96, as much as five looks before: the plateau.
		// etcd-3 at once, then the leader.
		compaction(d, cfg.Settle+time.Second)
		if got := s.takeDefragged(); fmt.Sprint(got) != fmt.Sprint(eps[2:3]) {
			t.Fatalf("right after the look defragmented %v, want the follower %v only", got, eps[2])
		}
		time.Sleep(cfg.Pause)
		synctest.Wait()
		if got := s.takeDefragged(); fmt.Sprint(got) != fmt.Sprint(eps[0:1]) {
			t.Fatalf("then defragmented %v, want the leader %v", got, eps[0])
		}
		if n := testutil.ToFloat64(d.rounds.WithLabelValues(ResultDefragmented)); n != 3 {
			t.Fatalf("%s{result=defragmented} = %v, want 3", MetricDefrags, n)
		}
		if got, want := testutil.ToFloat64(d.reclaimed), float64((96-90+110-74+96-90)*mib); got != want {
			t.Fatalf("%s = %v, want %v", MetricReclaimed, got, want)
		}

		// Past the minimum interval, history on top of the dense files
		// (4 % above the new floors, 90 and 74) is not due; a hole that
		// takes etcd-2 5 % above its floor is, once it held.
		time.Sleep(cfg.MinInterval)
		s.set(eps[0], 93, 93, 0)
		s.set(eps[1], 77, 77, 0)
		s.set(eps[2], 93, 93, 0)
		for range cfg.PlateauRounds + 1 {
			look()
		}
		s.set(eps[1], 78, 78, 2)
		for range cfg.PlateauRounds {
			look()
		}
		look(eps[1])
	})
}

// Only a leader defragments; a new leadership starts from nothing, so its
// first round sets the floors rather than comparing with the old ones; and
// a failed defragmentation waits the minimum interval like a good one.
func TestLeadershipAndFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(1)
		ep := s.members[0].Endpoint
		l := &leadertest.Leader{}
		d, err := New(DefaultConfig(), s, l, zap.NewNop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		run(t, d)
		s.set(ep, 200, 100, 0) // half free
		compaction(d, 2*time.Minute)
		if got := s.takeDefragged(); len(got) != 0 {
			t.Fatalf("a follower defragmented %v", got)
		}

		l.Set(true)
		s.set(ep, 100, 100, 0)
		compaction(d, 2*time.Minute) // floor 100
		s.set(ep, 120, 120, 20)
		l.Set(false)
		l.Set(true) // a new leadership: floor unknown again
		compaction(d, 2*time.Minute)
		if got := s.takeDefragged(); len(got) != 0 {
			t.Fatalf("the new leadership defragmented %v against its predecessor's floor", got)
		}

		s.mu.Lock()
		s.failing[ep] = errors.New("context deadline exceeded")
		s.mu.Unlock()
		s.set(ep, 200, 100, 0)
		compaction(d, 2*time.Minute)
		if got := s.takeDefragged(); len(got) != 1 {
			t.Fatalf("defragmented %v, want one failed attempt", got)
		}
		if n := testutil.ToFloat64(d.rounds.WithLabelValues(ResultError)); n != 1 {
			t.Fatalf("%s{result=error} = %v, want 1", MetricDefrags, n)
		}
		s.mu.Lock()
		delete(s.failing, ep)
		s.mu.Unlock()
		compaction(d, 5*time.Minute)
		if got := s.takeDefragged(); len(got) != 0 {
			t.Fatalf("retried %v within the minimum interval", got)
		}
		time.Sleep(15 * time.Minute)
		compaction(d, 2*time.Minute)
		if got := s.takeDefragged(); len(got) != 1 {
			t.Fatalf("defragmented %v once the minimum interval passed, want one", got)
		}
	})
}

// Disabled, or on a store that cannot defragment, Run only waits.
func TestDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(1)
		s.set(s.members[0].Endpoint, 200, 100, 0)
		l := &leadertest.Leader{}
		l.Set(true)
		c := DefaultConfig()
		c.Enabled = false
		d, err := New(c, s, l, zap.NewNop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		run(t, d)
		compaction(d, 2*time.Minute)
		if got := s.takeDefragged(); len(got) != 0 {
			t.Fatalf("disabled, yet defragmented %v", got)
		}
	})
}
