// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package fleetsim runs a fleet of virtual nodes in one process, each with
// its own Report stream, to load-test collectors and monitors with the exact
// protocol real reporters speak: every protocol rule (messages, acks,
// commands, renewal phases, retry and reconnect delays) is the reporter's
// own package stream, which this package only schedules. It is the load
// generator of the benchmarks (bin/fleetsim, simbench), not part of the
// product.
//
// Scale design (goal: 100,000 nodes on ≤1 core): streams are multiplexed
// over a few gRPC connections (the process is capped at ~20k file
// descriptors), and per-node timers are not goroutines. Each connection has
// one scheduler goroutine owning a min-heap of due lease renewals and status
// reports for its nodes and doing every Send on their streams; each node has
// only the goroutine that gRPC forces on us, blocked in Recv to read acks and
// commands. Per-node state is a small struct in one slice; statuses are
// rebuilt from it with the real setters when needed instead of being kept.
//
// Ownership: node.stream, its protocol session, due times and status
// bookkeeping belong to the node's scheduler (the receive goroutine posts
// what it reads as events); flags and the lease-ack fields are atomics
// shared with the node's receive goroutine and the fault engine; cancel is
// guarded by the connection's mutex.
package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/probe"
	"github.com/nodepulse/nodepulse/reporter/setters"
	"github.com/nodepulse/nodepulse/reporter/stream"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/version"
)

// Config of a simulation.
type Config struct {
	// Nodes is the number of virtual nodes.
	Nodes int
	// Connections to multiplex streams over; 0 = min(max(Nodes/100,1), 1000).
	Connections int
	// NamePrefix: node i is <prefix><i, zero-padded>.
	NamePrefix string
	// RampRate bounds registrations started per second (0 = unlimited).
	RampRate float64
	// IgnoreHints: open the stream after a Reconnect round-robin, not on
	// the collector it named (how reporters moved before spec §20.3; for
	// comparing the two).
	IgnoreHints bool
	// LeaseDurationSeconds as for a real reporter; renewals every quarter.
	LeaseDurationSeconds int32
	// StatusReportFrequency: unchanged statuses are re-sent this often.
	StatusReportFrequency time.Duration
	// Zones and Region spread nodes over topology labels.
	Zones  int
	Region string
	// DiskPressureEvery: one node in this many reports DiskPressure=True
	// from the start (0 = none), so dashboards show some variety.
	DiskPressureEvery int
	// LeaveOnExit sends Leaving on every stream at shutdown.
	LeaveOnExit bool
	// Collector is how to reach the collectors.
	Collector grpcclient.Config
	// Faults is a fault script (see ParseScript).
	Faults []Fault
	// Record, when set, receives every status sent and every durable ack
	// (the robustness suite's checker reads it).
	Record *Recorder
	// ClockSkews and ClockSkewEvery: one node in ClockSkewEvery (node i
	// with i % ClockSkewEvery == 0) has a clock off by one of ClockSkews,
	// in turn, in every time it sends (renewals, heartbeats, transition
	// times); the rest keep the machine's clock. Machines with wrong
	// clocks, for the clock drills (0 or none: every clock right).
	ClockSkews     []time.Duration
	ClockSkewEvery int
}

// ClockSkew is node i's standing clock skew (Config.ClockSkews).
func (c Config) ClockSkew(i int) time.Duration {
	if c.ClockSkewEvery <= 0 || len(c.ClockSkews) == 0 || i%c.ClockSkewEvery != 0 {
		return 0
	}
	return c.ClockSkews[(i/c.ClockSkewEvery)%len(c.ClockSkews)]
}

// DefaultConfig returns sensible defaults.
func DefaultConfig() Config {
	return Config{
		Nodes: 1000, NamePrefix: "sim-", RampRate: 5000, LeaseDurationSeconds: 40,
		StatusReportFrequency: 5 * time.Minute, Zones: 3, Region: "sim", DiskPressureEvery: 500, LeaveOnExit: true,
	}
}

// node flags.
const (
	flagRunning     = 1 << iota // a receive goroutine exists
	flagStopped                 // stopped by a fault; do not reconnect
	flagPartitioned             // send nothing, keep the stream
	flagMemPressure             // report MemoryPressure=True
	flagConnected               // registered stream open
	flagReboot                  // stopped (crashed): forget the condition state
)

// vnode is one virtual node. Keep it small: there may be 100,000.
type vnode struct {
	flags       atomic.Uint32
	leaseSeq    atomic.Uint64
	leaseSentAt atomic.Int64

	// Scheduler-owned.
	stream grpc.BidiStreamingClient[collectorv1.ReportRequest, collectorv1.ReportResponse]
	// sess is the stream's protocol state (sequence numbers, renewal
	// phase, slow-down, empty renewals), the real reporter's.
	sess      stream.Session
	gen       uint32
	leaseDue  int64
	statusDue int64
	// Condition state, as a real reporter keeps it in memory: it survives
	// reconnects (so the status sent after a re-registration equals the
	// stored one except for heartbeat times, and costs the collector no
	// write) and is reset only by a "process restart" (first start, or a
	// stop fault: a crashed machine).
	// bootTime: when the conditions were first set (their transition time).
	bootTime   int64
	memSince   int64
	memSent    bool
	sentStatus bool // conditions exist (a status was built since boot)
	// nextReport: when the next unchanged status report is due; unlike
	// statusDue it survives reconnects, as the real reporter's schedule
	// (stream.ResumeReports). Meaningful while sentStatus.
	nextReport int64

	// Guarded by conn.mu.
	cancel context.CancelFunc
	// Owned by the receive goroutine.
	myGen uint32
}

// Simulator is a running fleet.
type Simulator struct {
	cfg     Config
	lg      *zap.Logger
	m       *Metrics
	nodes   []vnode
	conns   []*conn
	width   int
	setCfg  setters.Config
	renew   time.Duration
	now     func() time.Time // the clock (tests)
	started atomic.Int64
	sent    *sendBins // renewals by the 100 ms they were sent in
	// Precomputed label values and IDs (registration is the hot path of a
	// ramp or reconnect storm).
	zoneLabel  []string
	reporterID string
	// stopping: the simulation is ending; nodes must not reconnect.
	stopping atomic.Bool
	// clockOffset (ns) is added to every time the nodes put in their
	// messages (renewal and heartbeat times), not to their schedule: the
	// "clock" fault, a node's clock stepped as NTP or an operator would.
	clockOffset atomic.Int64

	streamCtx context.Context
	wg        sync.WaitGroup
}

// New dials the connections (lazily) and prepares the nodes.
func New(cfg Config, lg *zap.Logger, m *Metrics) (*Simulator, error) {
	if cfg.Nodes <= 0 {
		return nil, fmt.Errorf("--nodes must be > 0, got %d", cfg.Nodes)
	}
	if cfg.LeaseDurationSeconds <= 0 {
		return nil, fmt.Errorf("--node-lease-duration-seconds must be > 0, got %d", cfg.LeaseDurationSeconds)
	}
	if cfg.StatusReportFrequency <= 0 {
		return nil, fmt.Errorf("--node-status-report-frequency must be > 0, got %s", cfg.StatusReportFrequency)
	}
	if cfg.Connections <= 0 {
		cfg.Connections = min(max(cfg.Nodes/100, 1), 1000)
	}
	cfg.Connections = min(cfg.Connections, cfg.Nodes)
	if cfg.Zones <= 0 {
		cfg.Zones = 1
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	th, _ := setters.ParseThresholds(setters.DefaultEvictionHard)
	s := &Simulator{cfg: cfg, lg: lg.Named("simulate"), m: m, nodes: make([]vnode, cfg.Nodes), sent: newSendBins(),
		width: len(fmt.Sprint(cfg.Nodes - 1)), renew: time.Duration(cfg.LeaseDurationSeconds) * time.Second / 4, now: time.Now,
		setCfg: setters.Config{MaxPods: 110, EvictionHard: th, ReporterVersion: version.String() + "-sim", LocalStorageIsolation: true}}
	for z := range cfg.Zones {
		s.zoneLabel = append(s.zoneLabel, fmt.Sprintf("%s-%c", cfg.Region, 'a'+rune(z%26)))
	}
	s.started.Store(time.Now().UnixNano())
	s.reporterID = fmt.Sprintf("sim-%d", s.started.Load())
	for i := range cfg.Connections {
		cc, err := grpcclient.Dial(cfg.Collector, nil, connectParams, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newAckCodec())))
		if err != nil {
			s.closeConns()
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		s.conns = append(s.conns, &conn{sim: s, idx: i, cc: cc, client: collectorv1.NewCollectorServiceClient(cc),
			inbox: make(chan event, inboxDepth(cfg.Nodes, cfg.Connections))})
	}
	m.nodes.Set(float64(cfg.Nodes))
	return s, nil
}

// inboxDepth is the event buffer of each connection's scheduler: room for
// two events (a registration and a detach, say) from every node on the
// connection, plus slack. A full inbox only makes a node's receive loop
// wait for its scheduler. A fixed 4,096 was 256 KiB per connection, 250 MB
// of a 100,000-node simulator's heap on 1,000 connections, all of it
// pointers for every collection to scan, to buffer events of 100 nodes.
func inboxDepth(nodes, conns int) int {
	perConn := (nodes + conns - 1) / max(conns, 1)
	return 2*perConn + 64
}

// registerTimeout is the real reporter's; a variable for tests.
var registerTimeout = stream.RegisterTimeout

// connectParams: reconnect a lost connection within ~1 s of the collector
// listening again. grpc-go's default connection backoff (1 s × 1.6 per
// failure up to 120 s) leaves a connection that failed through a 15 s
// collector restart waiting up to ~10 s more after the new collector is up;
// every stream of that connection (100 nodes) waits with it. 1,000
// connections retrying at most every 1.2 s is a trivial load on a listener.
var connectParams = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 20 * time.Second,
})

func (s *Simulator) closeConns() {
	for _, c := range s.conns {
		c.cc.Close()
	}
}

// Name of node i.
func (s *Simulator) Name(i int) string { return fmt.Sprintf("%s%0*d", s.cfg.NamePrefix, s.width, i) }

func (s *Simulator) connOf(i int) *conn { return s.conns[i%len(s.conns)] }

// Run starts the fleet (at the ramp rate) and the fault script, and runs
// until ctx is done.
func (s *Simulator) Run(ctx context.Context) error {
	defer s.closeConns()
	// Streams live on their own context so that shutdown can still send
	// Leaving on them after ctx is cancelled.
	streamCtx, cancelStreams := context.WithCancel(context.WithoutCancel(ctx))
	s.streamCtx = streamCtx
	var sched sync.WaitGroup
	for _, c := range s.conns {
		sched.Add(1)
		go func() { defer sched.Done(); c.schedule(ctx) }()
		go c.watchState(ctx)
	}
	go s.ramp(ctx)
	go s.runFaults(ctx, s.cfg.Faults)
	s.lg.Info("simulation started", zap.Int("nodes", s.cfg.Nodes), zap.Int("connections", len(s.conns)),
		zap.Float64("ramp_rate", s.cfg.RampRate))
	<-ctx.Done()
	s.stopping.Store(true)
	sched.Wait() // schedulers sent Leaving and half-closed the streams
	// Let collectors read Leaving and end the streams themselves: cutting
	// them now would reset them with the Leaving still in flight.
	drained := make(chan struct{})
	go func() { s.wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
	}
	cancelStreams()
	<-drained
	return nil
}

// ramp starts node goroutines at cfg.RampRate per second, in 10ms slices so
// the rate is smooth rather than one burst per second.
func (s *Simulator) ramp(ctx context.Context) {
	start := time.Now()
	for i := range s.nodes {
		if s.cfg.RampRate > 0 {
			due := start.Add(time.Duration(float64(i) / s.cfg.RampRate * float64(time.Second)))
			if d := time.Until(due); d > 10*time.Millisecond {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.startNode(i)
	}
	s.lg.Info("all nodes started", zap.Duration("took", time.Since(start)))
}

// startNode launches node i's receive goroutine unless it runs already.
func (s *Simulator) startNode(i int) {
	n := &s.nodes[i]
	// Clear "stopped" first: a receive goroutine that is just exiting checks
	// it again after dropping "running" and restarts the node (see runNode).
	setFlag(&n.flags, flagStopped, false)
	for {
		f := n.flags.Load()
		if f&flagRunning != 0 {
			return
		}
		if n.flags.CompareAndSwap(f, f|flagRunning) {
			break
		}
	}
	s.wg.Add(1)
	go s.runNode(i)
}

// stopNode abruptly ends node i's stream (a crashed machine: no Leaving).
func (s *Simulator) stopNode(i int) {
	n := &s.nodes[i]
	setFlag(&n.flags, flagStopped|flagReboot, true)
	c := s.connOf(i)
	c.mu.Lock()
	if n.cancel != nil {
		n.cancel()
	}
	c.mu.Unlock()
}

func setFlag(f *atomic.Uint32, bit uint32, on bool) {
	if on {
		f.Or(bit)
	} else {
		f.And(^bit)
	}
}

// runNode is node i's receive goroutine: open a stream, register, hand the
// stream to the scheduler, read acks and commands; reconnect with backoff
// when the stream breaks, unless the node was stopped.
func (s *Simulator) runNode(i int) {
	defer s.wg.Done()
	n := &s.nodes[i]
	c := s.connOf(i)
	defer func() {
		setFlag(&n.flags, flagRunning, false)
		// A start that raced with this goroutine's exit found it still
		// running and left it to us.
		if n.flags.Load()&flagStopped == 0 && s.streamCtx.Err() == nil && !s.stopping.Load() {
			s.startNode(i)
		}
	}()
	backoff := stream.NewBackoff(stream.BackoffInitial, stream.BackoffMax)
	var hint string // the collector the last Reconnect named
	for {
		if n.flags.Load()&flagStopped != 0 || s.streamCtx.Err() != nil {
			return
		}
		registered, reconnectNow, err := s.session(i, n, c, hint)
		hint = "" // once: a stale hint must not pin the node
		if registered {
			backoff.Registered()
		}
		if n.flags.Load()&flagStopped != 0 || s.streamCtx.Err() != nil || s.stopping.Load() {
			return
		}
		if reconnectNow != nil {
			hint = *reconnectNow
			continue
		}
		s.m.streamErrors.Inc()
		hint = stream.RefusalHint(err) // a refusing collector may name one with room
		if err != nil && status.Code(err) != codes.ResourceExhausted && s.streamCtx.Err() == nil {
			c.noteBroken(s.Name(i), err) // not a refusal: a failed open or register
		}
		select {
		case <-s.streamCtx.Done():
			return
		case <-time.After(backoff.Next(err)):
		}
	}
}

// session runs one stream. err is what ended a failed registration (its
// RetryInfo, if any, sets the reconnect wait).
// reconnectNow, when not nil, is the collector the Reconnect named ("" for
// none), preferred for the next stream as a real reporter does.
func (s *Simulator) session(i int, n *vnode, c *conn, hint string) (registered bool, reconnectNow *string, err error) {
	ctx, cancel := context.WithCancel(s.streamCtx)
	defer cancel()
	c.mu.Lock()
	n.cancel = cancel
	c.mu.Unlock()
	if n.flags.Load()&flagStopped != 0 {
		return false, nil, nil
	}
	// WaitForReady: a fleet starting at once would otherwise see every
	// stream fail fast while its connection is still handshaking, and spend
	// seconds in backoff instead of registering.
	// Named in the metadata as real reporters do (identity.NodeMetadata).
	follow := hint
	if s.cfg.IgnoreHints {
		follow = ""
	}
	octx, pref := grpcclient.Prefer(ctx, follow)
	rs, err := c.client.Report(metadata.AppendToOutgoingContext(octx, identity.NodeMetadata, s.Name(i)), grpc.WaitForReady(true))
	switch {
	case hint != "" && s.cfg.IgnoreHints:
		s.m.hints.WithLabelValues("ignored").Inc()
	case pref.Followed():
		s.m.hints.WithLabelValues("followed").Inc()
	case pref != nil:
		s.m.hints.WithLabelValues("unknown").Inc()
	}
	if err != nil {
		return false, nil, err
	}
	start := time.Now()
	if err := rs.Send(stream.RegisterRequest(s.register(i))); err != nil {
		return false, nil, err
	}
	// As a real reporter, give up on a Register unanswered for the
	// register timeout and start over: a stream stuck somewhere between
	// here and the collector would otherwise keep the node silent for
	// good.
	timeout := time.AfterFunc(registerTimeout, cancel)
	var reply stream.RegisterReply
	for reply.Ack == nil {
		resp, err := rs.Recv()
		if err != nil {
			// An overloaded collector says how long to stay away
			// (RetryInfo): runNode's backoff waits the longer of that and
			// itself, as a real reporter does, not their sum.
			timeout.Stop()
			return false, nil, err
		}
		if reply = stream.ReadRegisterReply(resp, registerTimeout); reply.Queued {
			timeout.Reset(reply.Wait)
			s.m.queued.Inc()
		}
	}
	timeout.Stop()
	if reply.Err != nil {
		return false, nil, nil // refused by a working collector: not a broken stream
	}
	s.m.registrations.Inc()
	s.m.registerLatency.Observe(time.Since(start).Seconds())
	n.myGen++
	gen := n.myGen
	setFlag(&n.flags, flagConnected, true)
	s.m.connected.Add(1)
	c.post(event{kind: evRegistered, node: int32(i), gen: gen, stream: rs, ack: reply.Ack})
	defer func() {
		setFlag(&n.flags, flagConnected, false)
		s.m.connected.Add(-1)
		c.post(event{kind: evDetached, node: int32(i), gen: gen})
	}()
	// Acks are decoded into rb (ackwire.go): nothing below keeps resp past
	// the next receive.
	rb := new(respBuf)
	for {
		if err := rs.RecvMsg(rb); err != nil {
			if s.streamCtx.Err() == nil && n.flags.Load()&flagStopped == 0 {
				c.noteBroken(s.Name(i), err)
			}
			return true, nil, nil
		}
		switch m := rb.resp.GetMessage().(type) {
		case *collectorv1.ReportResponse_Ack:
			a := m.Ack
			if a.GetSeq() == n.leaseSeq.Load() {
				s.m.ackLatency.Observe(time.Duration(time.Now().UnixNano() - n.leaseSentAt.Load()).Seconds())
			}
			if a.GetError() != nil {
				s.m.ackErrors.Inc()
			}
			if a.GetDurable() && a.GetError() == nil {
				s.cfg.Record.Ack(s.Name(i), gen, a.GetSeq())
			}
			if d, ok := stream.RetryAfter(a); ok {
				// The refused message again after d: a renewal if it was
				// the last renewal, else the status.
				kind := uint8(evRetry)
				if a.GetSeq() == n.leaseSeq.Load() {
					kind = evRetryLease
				}
				c.post(event{kind: kind, node: int32(i), gen: gen, after: d})
			}
		case *collectorv1.ReportResponse_Command:
			// The command was decoded anew (ackwire.go), so the scheduler
			// may keep what it points to.
			switch cmd := stream.ReadCommand(m.Command); cmd.Kind {
			case stream.CmdReportStatus:
				c.post(event{kind: evStatusNow, node: int32(i), gen: gen})
			case stream.CmdSlowDown:
				c.post(event{kind: evSlowDown, node: int32(i), gen: gen, slow: cmd.SlowDown})
			case stream.CmdReconnect:
				if cmd.After > 0 {
					select {
					case <-time.After(cmd.After):
					case <-ctx.Done():
					}
				}
				return true, &cmd.PreferredAddress, nil
			}
		}
	}
}

func (s *Simulator) register(i int) *collectorv1.Register {
	name := s.Name(i)
	return &collectorv1.Register{
		NodeName: name,
		Labels: map[string]string{
			nodemodel.LabelHostname:     name,
			nodemodel.LabelOS:           runtime.GOOS,
			nodemodel.LabelArch:         runtime.GOARCH,
			nodemodel.LabelZone:         s.zoneLabel[i%s.cfg.Zones],
			nodemodel.LabelRegion:       s.cfg.Region,
			nodemodel.LabelInstanceType: shapes[s.shape(i)].name,
			"nodepulse.io/simulated":    "true",
		},
		ReporterVersion: version.String() + "-sim",
		ReporterId:      s.reporterID,
	}
}

// shapes are the machine sizes the fleet is made of.
var shapes = []struct {
	name string
	cpu  int
	mem  int64
	disk int64
}{
	{"sim.small", 2, 4 << 30, 50 << 30},
	{"sim.medium", 4, 16 << 30, 100 << 30},
	{"sim.large", 8, 32 << 30, 200 << 30},
	{"sim.xlarge", 16, 64 << 30, 400 << 30},
	{"sim.metal", 64, 256 << 30, 1600 << 30},
}

func (s *Simulator) hash(i int) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for k := range b {
		b[k] = byte(i >> (8 * k))
	}
	h.Write(b[:])
	return h.Sum64()
}

func (s *Simulator) shape(i int) int { return int(s.hash(i) % uint64(len(shapes))) }

// status builds node i's status with the real setters from a synthetic host
// derived from i, and the compact condition state kept in the node.
func (s *Simulator) status(i int, n *vnode, now time.Time) *nodev1.NodeStatus {
	h := s.hash(i)
	sh := shapes[s.shape(i)]
	diskPressure := s.cfg.DiskPressureEvery > 0 && i%s.cfg.DiskPressureEvery == s.cfg.DiskPressureEvery-1
	mem := n.flags.Load()&flagMemPressure != 0
	snap := &probe.Snapshot{
		NumCPU: sh.cpu, MemTotalBytes: sh.mem, MemAvailableBytes: sh.mem / 2,
		NodeFS: probe.FS{CapacityBytes: sh.disk, AvailableBytes: sh.disk / 2, Inodes: 1 << 20, InodesFree: 1 << 19},
		PIDMax: 4194304, Processes: int64(200 + h%300),
		KernelVersion: "6.8.0-sim", OSImage: "nodepulse simulated Linux",
		MachineID: fmt.Sprintf("%032x", h), SystemUUID: fmt.Sprintf("%016x-sim", h), BootID: fmt.Sprintf("boot-%x-%d", h, s.started.Load()),
	}
	ip := net.IPv4(10, byte(i>>16), byte(i>>8), byte(i))
	cfg := s.setCfg
	cfg.NodeName = s.Name(i)
	skew := s.cfg.ClockSkew(i)
	reg := nodemodel.Timestamp(time.Unix(0, n.bootTime).Add(skew))
	memStatus, memSince := nodemodel.False, reg
	if n.memSent {
		memStatus = nodemodel.True
	}
	if n.memSince != 0 {
		memSince = nodemodel.Timestamp(time.Unix(0, n.memSince).Add(skew))
	}
	diskStatus := nodemodel.False
	if diskPressure {
		diskStatus = nodemodel.True
	}
	// The previous conditions, rebuilt from compact state exactly as they
	// were sent (reasons and messages included): the setters keep an
	// unchanged condition's reason and message, so an incomplete rebuild
	// would make every periodic re-send look like a change to the collector.
	cond := func(typ, status string, since *timestamppb.Timestamp) *nodev1.NodeCondition {
		reason, msg := setters.ConditionText(typ, status)
		return &nodev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: since}
	}
	old := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
		cond(nodemodel.MemoryPressure, memStatus, memSince),
		cond(nodemodel.DiskPressure, diskStatus, reg),
		cond(nodemodel.PIDPressure, nodemodel.False, reg),
		cond(nodemodel.Ready, nodemodel.True, reg),
	}}
	if !n.sentStatus {
		old = nil // first status since boot: fresh node semantics
	}
	res := setters.Apply(now, &cfg, setters.Inputs{Host: snap, NodeIP: ip,
		Pressure: setters.PressureFlags{Memory: mem, Disk: diskPressure}}, old)
	if mem != n.memSent || !n.sentStatus {
		n.memSince = now.UnixNano()
	}
	n.memSent = mem
	return res.Status
}

// Stats is a snapshot of the fleet.
type Stats struct {
	Nodes, Connected, Stopped, Partitioned, MemPressure int
}

// Stats counts node states.
func (s *Simulator) Stats() Stats {
	st := Stats{Nodes: len(s.nodes)}
	for i := range s.nodes {
		f := s.nodes[i].flags.Load()
		if f&flagConnected != 0 {
			st.Connected++
		}
		if f&flagStopped != 0 {
			st.Stopped++
		}
		if f&flagPartitioned != 0 {
			st.Partitioned++
		}
		if f&flagMemPressure != 0 {
			st.MemPressure++
		}
	}
	return st
}

// event kinds for a connection's scheduler.
const (
	evRegistered = iota
	evDetached
	evStatusNow
	evRetry      // the status again after after
	evRetryLease // the renewal again after after
	evSlowDown
)

type event struct {
	kind   uint8
	node   int32
	gen    uint32
	after  time.Duration
	stream grpc.BidiStreamingClient[collectorv1.ReportRequest, collectorv1.ReportResponse]
	ack    *collectorv1.Ack      // evRegistered: the Register's ack
	slow   *collectorv1.SlowDown // evSlowDown
}

// item is a due action in a scheduler's heap.
type item struct {
	due  int64
	node int32
	kind uint8 // 0 lease, 1 status
}

// itemHeap is a binary min-heap on due. It is typed rather than
// container/heap's: that boxes every pushed and popped item in an
// interface, an allocation per renewal, and at 100,000 nodes the
// simulator's garbage collections stall its own sends.
type itemHeap []item

func (h *itemHeap) push(it item) {
	*h = append(*h, it)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].due <= a[i].due {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *itemHeap) pop() item {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(a) && a[l].due < a[m].due {
			m = l
		}
		if r := l + 1; r < len(a) && a[r].due < a[m].due {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// conn is one gRPC connection and the scheduler of its nodes.
type conn struct {
	sim    *Simulator
	idx    int
	cc     *grpc.ClientConn
	client collectorv1.CollectorServiceClient
	inbox  chan event
	mu     sync.Mutex
	heap   itemHeap
	// leaseReq: the renewal request schedule reuses.
	leaseReq *collectorv1.ReportRequest
	// lastBroken (unix ns) rate-limits noteBroken.
	lastBroken atomic.Int64
}

// noteBroken logs why a stream failed or broke, at most once per
// connection every 10 s: when a connection dies all its streams break at
// once, and one line with the transport's reason (a keepalive timeout, a
// reset, the server closing) is what tells who cut it.
func (c *conn) noteBroken(node string, err error) {
	now := time.Now().UnixNano()
	last := c.lastBroken.Load()
	if now-last < int64(10*time.Second) || !c.lastBroken.CompareAndSwap(last, now) {
		return
	}
	c.sim.lg.Warn("stream failed", zap.Int("conn", c.idx), zap.String("node", node), zap.Error(err))
}

// watchState keeps nodepulse_sim_connections by state and logs every time
// the connection leaves READY or gets back to it. A connection carries
// ~100 virtual nodes: while it is not READY, all of them are silent (their
// streams wait for it), so these lines are what explains a burst of
// Unknown nodes that all share one connection.
func (c *conn) watchState(ctx context.Context) {
	st := c.cc.GetState()
	c.sim.m.connStates.WithLabelValues(st.String()).Inc()
	var lostAt time.Time
	for c.cc.WaitForStateChange(ctx, st) {
		next := c.cc.GetState()
		c.sim.m.connStates.WithLabelValues(st.String()).Dec()
		c.sim.m.connStates.WithLabelValues(next.String()).Inc()
		switch {
		case st == connectivity.Ready:
			lostAt = time.Now()
			c.sim.m.connLost.Inc()
			c.sim.lg.Warn("connection left READY", zap.Int("conn", c.idx), zap.Stringer("state", next))
		case next == connectivity.Ready && !lostAt.IsZero():
			c.sim.lg.Warn("connection READY again after an outage", zap.Int("conn", c.idx), zap.Duration("after", time.Since(lostAt)))
		}
		st = next
	}
	c.sim.m.connStates.WithLabelValues(st.String()).Dec()
}

func (c *conn) post(e event) {
	select {
	case c.inbox <- e:
	case <-c.sim.streamCtx.Done():
	}
}

// schedule is the connection's only sender: it renews leases and reports
// statuses of its nodes when due, in one goroutine with one timer.
func (c *conn) schedule(ctx context.Context) {
	s := c.sim
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if len(c.heap) > 0 {
			timer.Reset(time.Duration(c.heap[0].due - time.Now().UnixNano()))
		}
		select {
		case <-ctx.Done():
			c.leaveAll()
			return
		case e := <-c.inbox:
			c.handle(e)
		case <-timer.C:
		}
		now := s.now()
		nowNs := now.UnixNano()
		for len(c.heap) > 0 && c.heap[0].due <= nowNs {
			it := c.heap.pop()
			n := &s.nodes[it.node]
			if n.stream == nil {
				continue
			}
			switch it.kind {
			case 0:
				if it.due != n.leaseDue {
					continue
				}
				c.lease(int(it.node), n, now, false, it.due)
			case 1:
				if it.due != n.statusDue {
					continue
				}
				c.sendStatus(int(it.node), n, now, false)
			}
		}
	}
}

func (c *conn) handle(e event) {
	s := c.sim
	n := &s.nodes[e.node]
	now := s.now()
	switch e.kind {
	case evRegistered:
		n.stream, n.gen = e.stream, e.gen
		n.sess, _ = stream.Open(e.ack) // a bad phase is ignored, as by the reporter
		if n.bootTime == 0 || n.flags.Load()&flagReboot != 0 {
			setFlag(&n.flags, flagReboot, false)
			n.sentStatus, n.memSent = false, false
			n.bootTime = now.UnixNano()
			n.memSince = 0
		}
		// As a real reporter: renew at once, and send a full status (with
		// the conditions it kept across the reconnect) unless the control
		// plane already has it.
		c.lease(int(e.node), n, now, true, 0)
		if !c.storedIsCurrent(int(e.node), n, now, e.ack.GetNode().GetStatus()) {
			c.sendStatus(int(e.node), n, now, true)
		}
	case evDetached:
		if n.gen == e.gen {
			n.stream = nil
			n.leaseDue, n.statusDue = 0, 0
		}
	case evStatusNow:
		if n.stream != nil && (e.gen == 0 || e.gen == n.gen) {
			c.sendStatus(int(e.node), n, now, false)
		}
	case evRetry:
		if n.stream != nil && e.gen == n.gen {
			n.statusDue = now.Add(e.after).UnixNano()
			c.heap.push(item{due: n.statusDue, node: e.node, kind: 1})
		}
	case evRetryLease:
		if n.stream != nil && e.gen == n.gen {
			n.leaseDue = now.Add(e.after).UnixNano()
			c.heap.push(item{due: n.leaseDue, node: e.node, kind: 0})
		}
	case evSlowDown:
		if n.stream != nil && e.gen == n.gen {
			n.sess.SlowDown(e.slow)
		}
	}
}

// stamp is t on node i's clock: stepped by the clock faults, and off by
// its standing skew.
func (s *Simulator) stamp(i int, t time.Time) time.Time {
	return t.Add(time.Duration(s.clockOffset.Load()) + s.cfg.ClockSkew(i))
}

func (c *conn) send(n *vnode, req *collectorv1.ReportRequest) bool {
	if n.flags.Load()&flagPartitioned != 0 {
		return false
	}
	n.sess.Stamp(req)
	// A failed Send means the stream broke; the receive goroutine sees it
	// too and reconnects.
	return n.stream.Send(req) == nil
}

// firstRenewalDelay is the wait until the renewal after the one sent at a
// (re)registration, when the collector assigned no phase (later ones wait
// the real reporter's interval plus jitter, stream.Session.NextRenewal).
// It is a random phase drawn from the equilibrium distribution of that
// renewal process (the forward recurrence time: uniform over [0, interval),
// then tapering linearly to 0 over the jitter range; density
// (1−F(x))/mean). A node's renewal phase is
// thus independent of when it registered, and a fleet that (re)registered
// in a burst (a ramp, a collector restart) renews evenly over time from the
// first interval on, instead of repeating the burst every 10 s. A real
// fleet gets this from its machines' independent start times. (A plain
// uniform phase over the interval would leave a dip of JitterFactor/2 of
// the interval that drifts through every later cycle.)
func firstRenewalDelay(interval time.Duration) time.Duration {
	j := stream.JitterFactor * float64(interval)
	if u := rand.Float64() * (float64(interval) + j/2); u < float64(interval) {
		return time.Duration(u) + 1
	}
	return interval + time.Duration((1-math.Sqrt(rand.Float64()))*j)
}

// lease sends node i's renewal and schedules the next one. due is when this
// renewal was scheduled (0: not scheduled, e.g. at registration). The next
// one is scheduled from due, not from now: virtual nodes share this
// process's CPU, so a scheduler stall (GC, a busy box) delays many of them at
// once, and dating their next renewals from the late send would keep them
// bunched together. Real machines do not stall together; from due, each
// node returns to its own phase. A lag of a whole interval or more (the
// process was stopped) restarts from now.
func (c *conn) lease(i int, n *vnode, now time.Time, registered bool, due int64) {
	s := c.sim
	// One request per connection, refilled for every renewal: this
	// goroutine is the connection's only sender, and Send has encoded the
	// message when it returns.
	if c.leaseReq == nil {
		c.leaseReq = &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{}}}
	}
	n.leaseSentAt.Store(now.UnixNano())
	if c.send(n, n.sess.Renewal(s.stamp(i, now), s.cfg.LeaseDurationSeconds, c.leaseReq)) {
		n.sess.Renewed()
		n.leaseSeq.Store(n.sess.Seq())
		s.m.renewals.Inc()
		s.sent.add(now)
	}
	interval := n.sess.LeaseInterval(s.renew)
	base := now
	if !registered && due > 0 && now.UnixNano()-due < int64(interval) {
		base = time.Unix(0, due)
	}
	if registered && !n.sess.Phased(s.renew) {
		n.leaseDue = base.Add(firstRenewalDelay(interval)).UnixNano()
	} else {
		// The real reporter's wait: on the collector's phase (the nodes of
		// one connection renew in a few groups, each at one instant), or
		// the interval plus jitter.
		n.leaseDue = base.Add(n.sess.NextRenewal(base, s.renew)).UnixNano()
	}
	c.heap.push(item{due: n.leaseDue, node: int32(i), kind: 0})
}

func (c *conn) sendStatus(i int, n *vnode, now time.Time, registered bool) {
	s := c.sim
	changed := registered || !n.sentStatus || n.memSent != (n.flags.Load()&flagMemPressure != 0)
	st := s.status(i, n, s.stamp(i, now))
	req := stream.StatusRequest(st)
	if s.cfg.Record != nil && n.flags.Load()&flagPartitioned == 0 {
		// Recorded before it is sent, with the number send will give it:
		// an ack can then never arrive for a status not yet on file.
		s.cfg.Record.Status(s.Name(i), n.gen, n.sess.Seq()+1, st)
	}
	if c.send(n, req) {
		s.m.statuses.Inc()
	}
	n.sentStatus = true
	// Jittered after a change or (re)registration as the real reporter's
	// (spec §4.3).
	n.statusDue = now.Add(stream.ReportPeriod(s.cfg.StatusReportFrequency, changed)).UnixNano()
	n.nextReport = n.statusDue
	c.heap.push(item{due: n.statusDue, node: int32(i), kind: 1})
}

// storedIsCurrent reports whether stored, the status served at
// registration, is what node i would send now, and the period of the
// node's own last report is not up (stream.ResumeReports); if so, its next
// status is scheduled when that period ends, as the real reporter does
// after a reconnect. A virtual node that has not reported since its boot
// always reports (its conditions are new, so its status differs from any
// stored one): that is decided before building a status.
func (c *conn) storedIsCurrent(i int, n *vnode, now time.Time, stored *nodev1.NodeStatus) bool {
	s := c.sim
	if stored == nil || !n.sentStatus || n.memSent != (n.flags.Load()&flagMemPressure != 0) {
		return false // first status since boot, or a pressure change to send
	}
	due, ok := stream.ResumeReports(time.Unix(0, n.nextReport), stored, now, s.cfg.StatusReportFrequency)
	if !ok || !due.After(now) {
		return false // the period is up: report now
	}
	if nodemodel.StatusChanged(stored, s.status(i, n, now)) {
		return false
	}
	n.statusDue = due.UnixNano()
	c.heap.push(item{due: n.statusDue, node: int32(i), kind: 1})
	return true
}

// leaveAll says Leaving on every stream of this connection.
func (c *conn) leaveAll() {
	s := c.sim
	for {
		select {
		case e := <-c.inbox:
			c.handle(e)
			continue
		default:
		}
		break
	}
	if !s.cfg.LeaveOnExit {
		return
	}
	for i := c.idx; i < len(s.nodes); i += len(s.conns) {
		n := &s.nodes[i]
		if n.stream == nil {
			continue
		}
		c.send(n, stream.LeavingRequest("simulation ending"))
		_ = n.stream.CloseSend()
	}
}

// ErrNoCandidates is returned by a fault that found no node to act on.
var ErrNoCandidates = errors.New("no node matches")
