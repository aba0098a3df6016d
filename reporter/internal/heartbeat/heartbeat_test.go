// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/probe"
	"github.com/nodepulse/nodepulse/reporter/setters"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// memStream is an in-memory Report stream; the fake end is memCollector.
type memStream struct {
	ctx   context.Context
	reqs  chan *collectorv1.ReportRequest
	resps chan *collectorv1.ReportResponse
}

func (s *memStream) Send(m *collectorv1.ReportRequest) error {
	select {
	case s.reqs <- m:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *memStream) Recv() (*collectorv1.ReportResponse, error) {
	select {
	case m, ok := <-s.resps:
		if !ok {
			return nil, errors.New("stream closed by collector")
		}
		return m, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *memStream) CloseSend() error { return nil }

// record is one request as the fake saw it, stamped with the bubble clock.
type record struct {
	at   time.Time
	kind string
	req  *collectorv1.ReportRequest
}

// memCollector acks everything and records it; it can push commands.
type memCollector struct {
	mu      sync.Mutex
	records []record
	streams []*memStream
	node    *nodev1.Node
	refuse  func(*collectorv1.ReportRequest) *collectorv1.Ack
	// queue: answer each Register only after this long, telling the
	// reporter it is queued (Command.register_queued) at once and every
	// 10 s, as a busy collector does.
	queue time.Duration
	// phase: the Register ack's renew_phase, when set.
	phase *float64
	// empty: the Register ack's empty_renewals; an empty request is then
	// recorded as "empty" and acked with the seq after the previous one.
	empty bool
}

func (c *memCollector) dial(ctx context.Context) (Stream, error) {
	s := &memStream{ctx: ctx, reqs: make(chan *collectorv1.ReportRequest), resps: make(chan *collectorv1.ReportResponse, 16)}
	c.mu.Lock()
	c.streams = append(c.streams, s)
	c.mu.Unlock()
	go func() {
		var lastSeq uint64
		for {
			select {
			case <-ctx.Done():
				return
			case req := <-s.reqs:
				kind := "?"
				seq := req.GetSeq()
				if seq == 0 && req.GetMessage() == nil && c.empty {
					kind, seq = "empty", lastSeq+1
				}
				lastSeq = seq
				ack := &collectorv1.Ack{Seq: seq}
				switch req.GetMessage().(type) {
				case *collectorv1.ReportRequest_Register:
					kind, ack.Node, ack.RenewPhase, ack.EmptyRenewals = "register", c.node, c.phase, c.empty
				case *collectorv1.ReportRequest_Lease:
					kind = "lease"
				case *collectorv1.ReportRequest_Status:
					kind = "status"
				case *collectorv1.ReportRequest_Leaving:
					kind = "leaving"
				}
				c.mu.Lock()
				c.records = append(c.records, record{time.Now(), kind, req})
				refuse, queue := c.refuse, c.queue
				c.mu.Unlock()
				if kind == "register" && queue > 0 {
					if !queueRegister(ctx, s, queue) {
						return
					}
				}
				if refuse != nil && kind != "register" {
					if a := refuse(req); a != nil {
						a.Seq = req.GetSeq()
						ack = a
					}
				}
				select {
				case s.resps <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: ack}}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return s, nil
}

// queueRegister tells s its Register is queued, again every 10 s, until
// wait has passed; false when the stream ended meanwhile.
func queueRegister(ctx context.Context, s *memStream, wait time.Duration) bool {
	end := time.Now().Add(wait)
	for within := wait; within > 0; within = time.Until(end) {
		q := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{
			Command: &collectorv1.Command_RegisterQueued{RegisterQueued: &collectorv1.RegisterQueued{Within: durationpb.New(min(within, 10*time.Second))}}}}}
		select {
		case s.resps <- q:
		case <-ctx.Done():
			return false
		}
		select {
		case <-time.After(min(within, 10*time.Second)):
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (c *memCollector) command(cmd *collectorv1.Command) {
	c.mu.Lock()
	s := c.streams[len(c.streams)-1]
	c.mu.Unlock()
	s.resps <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: cmd}}
}

func (c *memCollector) times(kind string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, r := range c.records {
		if r.kind == kind {
			out = append(out, r.at)
		}
	}
	return out
}

// node is a status source built on the real setters; notReady flips Ready.
type node struct {
	notReady atomic.Bool
	cfg      setters.Config
}

func newNode() *node {
	th, _ := setters.ParseThresholds(setters.DefaultEvictionHard)
	return &node{cfg: setters.Config{NodeName: "n1", MaxPods: 110, EvictionHard: th, LocalStorageIsolation: true}}
}

func (n *node) status(now time.Time, old *nodev1.NodeStatus) *nodev1.NodeStatus {
	in := setters.Inputs{NodeIP: net.ParseIP("10.0.0.1"), Host: &probe.Snapshot{
		NumCPU: 2, MemTotalBytes: 4 << 30, MemAvailableBytes: 2 << 30, BootID: "b",
		NodeFS: probe.FS{CapacityBytes: 10 << 30, AvailableBytes: 5 << 30, Inodes: 100, InodesFree: 50}, PIDMax: 1000, Processes: 10}}
	if n.notReady.Load() {
		in.RuntimeErrs = []error{errors.New("container runtime is down")}
	}
	return setters.Apply(now, &n.cfg, in, old).Status
}

func testConfig() Config {
	c := DefaultConfig()
	c.Register = &collectorv1.Register{NodeName: "n1"}
	return c
}

// start runs a client in the bubble and returns a stop func that cancels
// it and waits for Run to return.
func start(t *testing.T, cfg Config, col *memCollector, n *node) (stop func()) {
	t.Helper()
	cl, err := New(cfg, zap.NewNop(), col.dial, n.status, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

func TestLeaseOncePerIntervalWithinJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{}, newNode()
		stop := start(t, testConfig(), col, n)
		time.Sleep(200 * time.Second)
		stop()
		leases := col.times("lease")
		if len(leases) < 19 || len(leases) > 21 {
			t.Fatalf("%d renewals in 200s, want ~20 (every 10s)", len(leases))
		}
		for i, g := range gaps(leases) {
			if g < 10*time.Second || g > 10*time.Second+400*time.Millisecond {
				t.Errorf("gap %d = %s, want within [10s, 10.4s]", i, g)
			}
		}
		for _, r := range col.records {
			if l := r.req.GetLease(); l != nil && (l.GetLeaseDurationSeconds() != 40 || !l.GetRenewTime().AsTime().Equal(r.at)) {
				t.Errorf("renewal %v at %v", l, r.at)
			}
		}
		if k := col.records[len(col.records)-1].kind; k != "leaving" {
			t.Errorf("last message %s, want leaving", k)
		}
	})
}

// Renewals after the stream's first are empty when the collector offers
// it (Ack.empty_renewals), and full LeaseRenewals when it does not (an
// older collector).
func TestEmptyRenewalsOnlyWhenOffered(t *testing.T) {
	for _, offered := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			col, n := &memCollector{empty: offered}, newNode()
			stop := start(t, testConfig(), col, n)
			time.Sleep(100 * time.Second)
			stop()
			full, empty := len(col.times("lease")), len(col.times("empty"))
			if len(col.streams) != 1 {
				t.Fatalf("offered %v: %d streams, want 1 (no renewal refused)", offered, len(col.streams))
			}
			switch {
			case offered && (full != 1 || empty < 9):
				t.Fatalf("offered: %d LeaseRenewals and %d empty renewals in 100 s, want 1 and ~10", full, empty)
			case !offered && (full < 10 || empty != 0):
				t.Fatalf("not offered: %d LeaseRenewals and %d empty renewals in 100 s, want ~10 and 0", full, empty)
			}
		})
	}
}

func TestStatusOnlyOnChangeOrReportFrequency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{}, newNode()
		stop := start(t, testConfig(), col, n)
		synctest.Wait()
		if got := len(col.times("status")); got != 1 {
			t.Fatalf("%d statuses at connect, want 1", got)
		}
		// Nothing changes for 2 minutes: the report interval is at least
		// 2.5m (5m - 50% jitter), so no status goes out.
		time.Sleep(2 * time.Minute)
		if got := len(col.times("status")); got != 1 {
			t.Fatalf("%d statuses after 2 unchanged minutes, want 1", got)
		}
		// A flip: exactly one status within one update tick.
		n.notReady.Store(true)
		flipAt := time.Now()
		time.Sleep(30 * time.Second)
		st := col.times("status")
		if len(st) != 2 {
			t.Fatalf("%d statuses after a flip, want 2", len(st))
		}
		if d := st[1].Sub(flipAt); d > 10*time.Second+400*time.Millisecond {
			t.Errorf("flip reported after %s, want within one tick", d)
		}
		col.mu.Lock()
		last := col.records[len(col.records)-1]
		for _, r := range col.records {
			if r.kind == "status" {
				last = r
			}
		}
		col.mu.Unlock()
		if rd := nodemodel.FindCondition(last.req.GetStatus().GetStatus().GetConditions(), nodemodel.Ready); rd.GetStatus() != "False" || rd.GetMessage() != "container runtime is down" {
			t.Errorf("flipped Ready = %v", rd)
		}
		stop()
	})
}

func TestStatusAtReportFrequency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{}, newNode()
		stop := start(t, testConfig(), col, n)
		time.Sleep(30 * time.Minute)
		stop()
		st := col.times("status")
		g := gaps(st)
		if len(g) < 4 {
			t.Fatalf("%d statuses in 30 unchanged minutes, want ≥5", len(st))
		}
		// After a connect the next report is jittered ±50% (spec §4.3),
		// rounded up to the next 10s tick.
		if g[0] < 150*time.Second || g[0] > 450*time.Second+11*time.Second {
			t.Errorf("first periodic report after %s, want within [2.5m, 7.5m] plus a tick", g[0])
		}
		for i, d := range g[1:] {
			if d < 5*time.Minute || d > 5*time.Minute+11*time.Second {
				t.Errorf("report gap %d = %s, want 5m (plus up to one tick)", i+1, d)
			}
		}
	})
}

func TestCommandsAndRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{}, newNode()
		var refused atomic.Int32
		col.refuse = func(r *collectorv1.ReportRequest) *collectorv1.Ack {
			if r.GetStatus() != nil && refused.Add(1) == 1 {
				return &collectorv1.Ack{Error: &collectorv1.Error{Code: 14, Message: "etcd unavailable"}, RetryAfter: durationpb.New(3 * time.Second)}
			}
			return nil
		}
		stop := start(t, testConfig(), col, n)
		time.Sleep(5 * time.Second)
		if got := len(col.times("status")); got != 2 {
			t.Fatalf("%d statuses, want 2 (refused one resent after retry_after)", got)
		}
		col.command(&collectorv1.Command{Command: &collectorv1.Command_ReportStatus{ReportStatus: &collectorv1.ReportStatus{Reason: "test"}}})
		synctest.Wait()
		if got := len(col.times("status")); got != 3 {
			t.Fatalf("%d statuses after ReportStatus, want 3", got)
		}
		col.command(&collectorv1.Command{Command: &collectorv1.Command_SlowDown{SlowDown: &collectorv1.SlowDown{MinLeaseInterval: durationpb.New(20 * time.Second)}}})
		synctest.Wait()
		before := len(col.times("lease"))
		time.Sleep(100 * time.Second)
		if got := len(col.times("lease")) - before; got < 4 || got > 6 {
			t.Errorf("%d renewals in 100s after SlowDown(20s), want ~5", got)
		}
		col.command(&collectorv1.Command{Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{Within: durationpb.New(10 * time.Second)}}})
		time.Sleep(11 * time.Second)
		if got := len(col.times("register")); got != 2 {
			t.Errorf("%d registers after Reconnect, want 2", got)
		}
		stop()
	})
}

// A Reconnect that names a collector makes the next stream prefer it,
// and only the next: a stream that breaks afterwards reconnects as usual.
func TestReconnectFollowsTheHintOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{}, newNode()
		var mu sync.Mutex
		var preferred []string
		dial := func(ctx context.Context) (Stream, error) {
			mu.Lock()
			preferred = append(preferred, grpcclient.PreferredAddress(ctx))
			mu.Unlock()
			return col.dial(ctx)
		}
		cl, err := New(testConfig(), zap.NewNop(), dial, n.status, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cl.Run(ctx) }()
		time.Sleep(time.Second)
		col.command(&collectorv1.Command{Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{
			Within: durationpb.New(time.Second), PreferredAddress: "c3:7000"}}})
		time.Sleep(2 * time.Second)
		col.command(&collectorv1.Command{Command: &collectorv1.Command_Reconnect{Reconnect: &collectorv1.Reconnect{Within: durationpb.New(time.Second)}}})
		time.Sleep(2 * time.Second)
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"", "c3:7000", ""}; fmt.Sprint(preferred) != fmt.Sprint(want) {
			t.Fatalf("streams opened preferring %q, want %q", preferred, want)
		}
	})
}

func TestReconnectBackoffAfterStreamLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{}, newNode()
		var fail atomic.Int32
		fail.Store(3)
		dial := func(ctx context.Context) (Stream, error) {
			if fail.Add(-1) >= 0 {
				return nil, errors.New("connection refused")
			}
			return col.dial(ctx)
		}
		cl, err := New(testConfig(), zap.NewNop(), dial, n.status, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		go func() { _ = cl.Run(ctx) }()
		for cl.Ready() != nil {
			time.Sleep(10 * time.Millisecond)
		}
		// Three failures: waits in [50,100) + [100,200) + [200,400) ms.
		if d := time.Since(start); d < 350*time.Millisecond || d > 700*time.Millisecond {
			t.Errorf("registered after %s, want ~0.35–0.7s of backoff", d)
		}
		cancel()
		synctest.Wait()
	})
}

// After a reconnect the reporter sends its status at once only when the
// control plane's copy (served in the Register ack) differs from it;
// otherwise the renewal alone goes out at once and the status waits for a
// change or its period, counted from this process's last report (the
// kubelet's lastStatusReportTime): collectors do not write unchanged
// reports, so the stored heartbeat is usually older than the period.
func TestReconnectSkipsTheStatusTheControlPlaneHas(t *testing.T) {
	for _, tc := range []struct {
		name     string
		served   func(sent *nodev1.NodeStatus) *nodev1.NodeStatus
		wantSent bool
	}{
		{"unchanged and fresh", func(sent *nodev1.NodeStatus) *nodev1.NodeStatus { return sent }, false},
		{"overridden Unknown", func(sent *nodev1.NodeStatus) *nodev1.NodeStatus {
			st := proto.CloneOf(sent)
			c := nodemodel.FindCondition(st.GetConditions(), nodemodel.Ready)
			c.Status, c.Reason = nodemodel.Unknown, "NodeStatusUnknown"
			return st
		}, true},
		{"unchanged, heartbeat as old as the report frequency", func(sent *nodev1.NodeStatus) *nodev1.NodeStatus {
			return heartbeatsOlder(sent, DefaultConfig().StatusReportFrequency)
		}, false},
		{"none stored", func(*nodev1.NodeStatus) *nodev1.NodeStatus { return nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				col, n := &memCollector{}, newNode()
				stop := start(t, testConfig(), col, n)
				defer stop()
				time.Sleep(30 * time.Second)
				col.mu.Lock()
				var sent *nodev1.NodeStatus
				for _, r := range col.records {
					if r.kind == "status" {
						sent = r.req.GetStatus().GetStatus()
					}
				}
				if sent == nil {
					col.mu.Unlock()
					t.Fatal("no status sent on the first connect")
				}
				col.node = &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1"}, Status: tc.served(sent)}
				s := col.streams[len(col.streams)-1]
				col.mu.Unlock()
				close(s.resps) // the collector goes away; the reporter reconnects
				broke := time.Now()
				time.Sleep(10 * time.Second)
				var after []time.Time
				for _, at := range col.times("status") {
					if at.After(broke) {
						after = append(after, at)
					}
				}
				leases := 0
				for _, at := range col.times("lease") {
					if at.After(broke) {
						leases++
					}
				}
				if leases == 0 {
					t.Fatal("no renewal after the reconnect")
				}
				if got := len(after) > 0; got != tc.wantSent {
					t.Fatalf("status sent within 10 s of the reconnect: %v, want %v", got, tc.wantSent)
				}
			})
		})
	}
}

// heartbeatsOlder is st with every condition's heartbeat d earlier.
func heartbeatsOlder(st *nodev1.NodeStatus, d time.Duration) *nodev1.NodeStatus {
	st = proto.CloneOf(st)
	for _, c := range st.GetConditions() {
		c.LastHeartbeatTime = timestamppb.New(c.GetLastHeartbeatTime().AsTime().Add(-d))
	}
	return st
}

// A restarted reporter has no report of its own to count: it counts the
// stored status as its last report only while that status's heartbeat is
// younger than the report frequency, and otherwise reports at once.
func TestRestartedReporterTrustsOnlyAFreshStoredStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		age      time.Duration
		wantSent bool
	}{
		{"stored heartbeat fresh", 0, false},
		{"stored heartbeat as old as the report frequency", DefaultConfig().StatusReportFrequency, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				col, n := &memCollector{}, newNode()
				stop := start(t, testConfig(), col, n)
				time.Sleep(30 * time.Second)
				stop()
				col.mu.Lock()
				var sent *nodev1.NodeStatus
				for _, r := range col.records {
					if r.kind == "status" {
						sent = r.req.GetStatus().GetStatus()
					}
				}
				col.node = &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1"}, Status: heartbeatsOlder(sent, tc.age)}
				col.mu.Unlock()
				restarted := time.Now()
				stop = start(t, testConfig(), col, n) // a new process
				defer stop()
				time.Sleep(10 * time.Second)
				got := false
				for _, at := range col.times("status") {
					got = got || !at.Before(restarted) // synctest: the restart's instant
				}
				if got != tc.wantSent {
					t.Fatalf("status sent within 10 s of the restart: %v, want %v", got, tc.wantSent)
				}
			})
		})
	}
}

// A Register the collector says is queued (Command.register_queued) is
// waited for as long as the collector keeps saying so, past the reporter's
// register timeout: giving up would put the node at the back of the queue.
func TestQueuedRegisterIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{queue: 75 * time.Second}, newNode()
		cfg := testConfig()
		cl, err := New(cfg, zap.NewNop(), col.dial, n.status, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { _ = cl.Run(ctx) }()
		start := time.Now()
		for cl.Ready() != nil && time.Since(start) < 2*time.Minute {
			time.Sleep(100 * time.Millisecond)
		}
		if d := time.Since(start); d < 75*time.Second || d > 76*time.Second {
			t.Errorf("registered after %s, want the collector's 75 s", d)
		}
		if got := len(col.times("register")); got != 1 {
			t.Errorf("%d Registers, want 1: the reporter gave up on a queued Register (register timeout %s)", got, cfg.RegisterTimeout)
		}
		cancel()
		synctest.Wait()
	})
}

// With a renewal phase from the collector, renewals fall on that phase of
// Unix time, one interval apart, from the second one on (the first goes at
// registration); an invalid phase leaves the jittered interval.
func TestLeaseFollowsTheCollectorsPhase(t *testing.T) {
	// leases runs a reporter for 100 s against a collector whose Register
	// ack carries phase, and returns when it renewed.
	leases := func(t *testing.T, phase float64) []time.Time {
		col, n := &memCollector{phase: &phase}, newNode()
		stop := start(t, testConfig(), col, n)
		time.Sleep(100 * time.Second)
		stop()
		return col.times("lease")
	}
	synctest.Test(t, func(t *testing.T) {
		got := leases(t, 0.37)
		if len(got) < 9 || len(got) > 11 {
			t.Fatalf("%d renewals in 100s, want ~10 (every 10s)", len(got))
		}
		for i, at := range got[1:] {
			if off := time.Duration(at.UnixNano() % int64(10*time.Second)); off != 3700*time.Millisecond {
				t.Errorf("renewal %d at %s: %s into its interval, want the phase's 3.7s", i+1, at, off)
			}
		}
		for i, g := range gaps(got[1:]) {
			if g != 10*time.Second {
				t.Errorf("gap %d = %s, want exactly 10s on phase", i, g)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		for i, g := range gaps(leases(t, 1.5)) {
			if g < 10*time.Second || g > 10*time.Second+400*time.Millisecond {
				t.Errorf("phase 1.5: gap %d = %s, want the jittered [10s, 10.4s]", i, g)
			}
		}
	})
}

// refusedStream is what grpc-go hands a client whose stream the server
// ended before the first message arrived: Send says io.EOF, Recv the status.
type refusedStream struct{ st error }

func (s refusedStream) Send(*collectorv1.ReportRequest) error { return io.EOF }
func (s refusedStream) Recv() (*collectorv1.ReportResponse, error) {
	return nil, s.st
}
func (s refusedStream) CloseSend() error { return nil }

// A refused stream surfaces the server's status, not the bare io.EOF that
// Send returns, so logs and retry decisions see PermissionDenied.
func TestRefusedStreamReportsTheServersStatus(t *testing.T) {
	refusal := status.Error(codes.PermissionDenied, "certificate of operator-alice is not a node identity")
	dial := func(context.Context) (Stream, error) { return refusedStream{refusal}, nil }
	cl, err := New(testConfig(), zap.NewNop(), dial, newNode().status, nil)
	if err != nil {
		t.Fatal(err)
	}
	registered, err := cl.session(t.Context())
	if registered {
		t.Fatal("registered on a refused stream")
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "operator-alice") {
		t.Fatalf("session error %v, want the server's PermissionDenied", err)
	}
}

// A renewal or status the collector refuses as invalid (a time no clock
// reads, such as one before 1970 from a clock never set) is retried,
// computed afresh, at the next renewal and the next status tick, on the
// same stream: a renewal as a full LeaseRenewal dated by the machine's
// clock, not an empty one (which would only repeat the last accepted
// renewal, or be refused for want of one), so a node whose clock is fixed
// is accepted again at once.
func TestRefusedRenewalRetriedInFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, n := &memCollector{empty: true}, newNode()
		var refusing atomic.Bool
		refusing.Store(true)
		col.refuse = func(r *collectorv1.ReportRequest) *collectorv1.Ack {
			if refusing.Load() && (r.GetLease() != nil || r.GetStatus() != nil) {
				return &collectorv1.Ack{Error: &collectorv1.Error{Code: uint32(codes.InvalidArgument), Field: "lease.renewTime", Message: "too far in the past"}}
			}
			return nil
		}
		stop := start(t, testConfig(), col, n)
		time.Sleep(35 * time.Second)
		full, empty, statuses := len(col.times("lease")), len(col.times("empty")), len(col.times("status"))
		if full < 3 || empty != 0 {
			t.Fatalf("while refused: %d LeaseRenewals and %d empty renewals in 35 s, want one full renewal per interval and no empty one", full, empty)
		}
		if statuses < 3 {
			t.Fatalf("while refused: %d status reports in 35 s, want one per 10 s tick", statuses)
		}
		refusing.Store(false)
		time.Sleep(40 * time.Second)
		stop()
		if len(col.streams) != 1 {
			t.Fatalf("%d streams: a refused renewal must not cost a reconnect", len(col.streams))
		}
		if e := len(col.times("empty")); e < 2 {
			t.Fatalf("accepted again: %d empty renewals in 40 s, want renewals empty again after one accepted", e)
		}
	})
}

// A refusal that names a collector makes the next attempt prefer it, and
// only that one.
func TestRefusalHintPreferredOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := status.New(codes.ResourceExhausted, "collector holds its maximum").WithDetails(&collectorv1.Reconnect{PreferredAddress: "c2:9090"})
		if err != nil {
			t.Fatal(err)
		}
		col, n := &memCollector{}, newNode()
		var mu sync.Mutex
		var preferred []string
		dial := func(ctx context.Context) (Stream, error) {
			mu.Lock()
			defer mu.Unlock()
			preferred = append(preferred, grpcclient.PreferredAddress(ctx))
			if len(preferred) == 1 {
				return refusedStream{st.Err()}, nil
			}
			if len(preferred) == 2 {
				return nil, errors.New("connection refused")
			}
			return col.dial(ctx)
		}
		cl, err := New(testConfig(), zap.NewNop(), dial, n.status, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cl.Run(ctx) }()
		time.Sleep(5 * time.Second)
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"", "c2:9090", ""}; fmt.Sprint(preferred) != fmt.Sprint(want) {
			t.Fatalf("streams opened preferring %q, want %q", preferred, want)
		}
	})
}
