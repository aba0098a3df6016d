// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodepulse/nodepulse/tests/procutil"
)

// Synopsis is the help text of the bench tool.
const Synopsis = `bench — the nodepulse scale benchmark (make bench, make bench-quick).

Usage: bench [flags]
       bench k8s-writer [flags]   (the Kubernetes-style baseline writer; started by bench itself)

Starts, as separate processes on 127.0.0.1: a real etcd (bin/etcd), a collector,
a monitor and the fleet simulator (fleetsim) in two processes (the survivors and the
--kill-fraction that is SIGKILLed at once). Stages:

  ramp       the fleet registers at --ramp-rate until every node is attached and Ready;
             the simulators then collect their garbage once and the load settles
             for one renew interval
  steady     --hold of steady renewals (every node-lease-duration/4 = 10 s, jittered)
  kill       SIGKILL the small simulator: every killed node must turn Unknown
             within grace + 2 s of its last sign of life on the feed (a renewal,
             or the receipt of a status report, which the monitor counts as
             liveness too); survivors must not (false Unknown)
  restart    SIGTERM the collector, start a new one on the same port: time until
             every survivor is attached again, and the Unknowns it caused.
             The collector runs with --drain.reconnect-window=--restart-drain-window
             (1 s; collector default 5 s) and --grpc.drain-timeout = that + 2 s:
             the drain window spreads reconnects over the *other* collectors of a
             rolling restart; with one collector on one port there is nowhere to
             go, so a long window only keeps the old process alive while every
             reporter already waits for the new one. A single-replica
             deployment would run with a short window; so does the bench.
  baseline-* the Kubernetes write path on the same etcd (nodepulse stopped first):
             every node writes its ~0.7 KB Lease as one etcd Txn every 10 s,
             stepped through --baseline-steps and then N, to find the largest N
             whose renewal p99 stays under 1 s

The benchmark observes on its own: it follows the collector's FeedService
(every renewal: renewals/s, renewals per 100 ms as they arrive, feed delay),
the monitor's NodeService.WatchNodes (Ready/Unknown per node), the
simulators' /metrics and /debug/sendbins (renewals per 100 ms as sent: the
flatness goal is judged on arrival, and the two differ where a stall between
sender and collector bunched renewals), etcd's /metrics and /proc/<pid>
(CPU, RSS, disk writes). It prints a table, writes
report.json, report.md and chart.svg (and logs/, profiles/) to --out, and
never fails on timing: it exits non-zero only when the plumbing breaks
(a process dies, nodes never attach, an observer cannot connect).

PROFILE=1 (or --profile) fetches a CPU profile and a heap profile of every
process for each stage into --out/profiles (go tool pprof -top <file>).
--profile-goroutines adds where every goroutine waits (pprof goroutine,
debug=1) after each CPU profile. It is off by default because it moves what
it measures: a dump of ~100,000 goroutines costs the collector and the
simulator most of a core for a second or more, all at once, and allocates
tens of MB (it set off the collector's garbage collection 30 s into the
steady stage). A feed stall still dumps goroutines, at most twice a run.

Every child runs with GODEBUG=gctrace=1 (unless GODEBUG already sets
gctrace): the report lists each stage's garbage collections of the
collector, the monitor and the simulators, shades the collector's and the
simulators' on the chart, and gives the ack latency over the seconds none of
those two touched (plus 1 s), beside the stage's own.`

// Config of a benchmark run.
type Config struct {
	BinDir        string
	OutDir        string
	Nodes         int
	Connections   int
	KillFraction  float64
	RampRate      float64
	Hold          time.Duration
	Grace         time.Duration
	MonitorPeriod time.Duration
	LeaseSeconds  int
	Checkpoint    time.Duration
	KillWait      time.Duration
	RestartWait   time.Duration
	RestartDrain  time.Duration
	Kill          bool
	Restart       bool
	Baseline      bool
	BaselineSteps string
	BaselineRamp  float64
	BaselineHold  time.Duration
	// BaselineCompaction: the writer's --compaction-interval.
	BaselineCompaction time.Duration
	StepHold           time.Duration
	BaselineWork       int
	BaselineConns      int
	Profile            bool
	ProfileFor         time.Duration
	// ProfileGoroutines: with Profile, also dump every process's
	// goroutines after each stage's CPU profile.
	ProfileGoroutines bool
	EtcdPort          int
	BasePort          int
	Sample            time.Duration
	WaitLoad          float64
	WaitLoadMax       time.Duration
	LogLevel          string
	SimNice           int
	// SimGOMAXPROCS: the simulators' GOMAXPROCS (0: twice the CPUs;
	// negative: Go's default, the CPU count).
	SimGOMAXPROCS int
	// SimMemoryLimitMiB: the simulators run with GC off below this soft
	// limit, shared by node count (0: autoSimMemoryMiB; negative: the
	// simulator's own GC default).
	SimMemoryLimitMiB int64
	Title             string
	Quick             bool
	KeepEtcdData      bool
}

// RegisterFlags adds every flag with its default.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.BinDir, "bin-dir", "bin", "directory with the etcd, collector, monitor and fleetsim binaries (make build)")
	fs.StringVar(&c.OutDir, "out", "", "output directory (default .run/bench/<time>)")
	fs.IntVar(&c.Nodes, "nodes", 100000, "virtual nodes N")
	fs.IntVar(&c.Connections, "connections", 1000, "gRPC connections the simulators multiplex the N streams over, in total (at most 1000 on one box; -1: one connection per node, needs N < ~19,000 per process)")
	fs.Float64Var(&c.KillFraction, "kill-fraction", 0.10, "fraction of the nodes in the simulator that is SIGKILLed at once")
	fs.Float64Var(&c.RampRate, "ramp-rate", 400, "registrations started per second, over both simulators: below what the collector creates with everything else on one 2-core box (~600/s), so the ramp measures a fleet joining, not an overload test; above it, registrations are refused with a RetryInfo delay and come back (see docs/benchmarks.md)")
	fs.DurationVar(&c.Hold, "hold", 150*time.Second, "steady stage duration (long enough to include the 5-minute status re-sends, ±50% jitter, of the earliest nodes)")
	fs.DurationVar(&c.Grace, "grace", 40*time.Second, "monitor --node-monitor-grace-period")
	fs.DurationVar(&c.MonitorPeriod, "monitor-period", 5*time.Second, "monitor --node-monitor-period")
	fs.IntVar(&c.LeaseSeconds, "lease-seconds", 40, "lease duration; nodes renew every quarter of it")
	fs.DurationVar(&c.Checkpoint, "checkpoint-interval", 0, "collector --lease.checkpoint-interval (0: the collector's default)")
	fs.DurationVar(&c.KillWait, "kill-wait", 20*time.Second, "after the kill, wait at most grace + this for every killed node to turn Unknown")
	fs.DurationVar(&c.RestartWait, "restart-wait", 10*time.Second, "after a collector restart, watch for Unknowns until grace + this")
	fs.DurationVar(&c.RestartDrain, "restart-drain-window", time.Second, "collector --drain.reconnect-window (its --grpc.drain-timeout is this + 2 s); 0: the collector's defaults (5 s, 10 s), as in a multi-replica rolling restart")
	fs.BoolVar(&c.Kill, "kill", true, "run the kill stage")
	fs.BoolVar(&c.Restart, "restart", true, "run the collector restart stage")
	fs.BoolVar(&c.Baseline, "baseline", true, "run the Kubernetes-style baseline stages")
	fs.StringVar(&c.BaselineSteps, "baseline-steps", "10000,25000,50000,100000", "baseline node counts to step through in ascending order together with N (each held --step-hold; N is held --baseline-hold and compared with nodepulse)")
	fs.Float64Var(&c.BaselineRamp, "baseline-ramp-rate", 5000, "baseline writer: new Leases created per second when it steps up")
	fs.DurationVar(&c.BaselineHold, "baseline-hold", 150*time.Second, "baseline stage duration at N (longer than --baseline-compaction-interval, so the stage includes a compaction)")
	fs.DurationVar(&c.StepHold, "step-hold", 90*time.Second, "duration of each baseline step below N (longer than --baseline-compaction-interval, so the stage includes a compaction)")
	fs.DurationVar(&c.BaselineCompaction, "baseline-compaction-interval", time.Minute, "baseline writer: compact etcd this often, as kube-apiserver's --etcd-compaction-interval (5m by default there; 0: never)")
	fs.IntVar(&c.BaselineWork, "baseline-workers", 256, "baseline writer: concurrent Txns in flight at most (the API server's etcd client concurrency)")
	fs.IntVar(&c.BaselineConns, "baseline-clients", 8, "baseline writer: etcd client connections")
	fs.BoolVar(&c.Profile, "profile", os.Getenv("PROFILE") == "1", "fetch CPU and heap profiles of every process per stage (also PROFILE=1)")
	fs.DurationVar(&c.ProfileFor, "profile-seconds", 30*time.Second, "CPU profile length per stage at most")
	fs.BoolVar(&c.ProfileGoroutines, "profile-goroutines", os.Getenv("PROFILE_GOROUTINES") == "1", "with --profile, also save where every goroutine waits (pprof goroutine, debug=1) after each stage's CPU profile, into <stage>-<role>.goroutines.txt (also PROFILE_GOROUTINES=1). Off by default: a dump of ~100,000 goroutines takes the collector and the simulators most of a core for a second or more at the same moment and allocates tens of MB, which shows up in the stage's ack latency and load flatness")
	fs.IntVar(&c.EtcdPort, "etcd-port", 12379, "etcd client port (peer port +1)")
	fs.IntVar(&c.BasePort, "base-port", 19090, "collector gRPC port; monitor +1; admin ports +100 (collector, monitor, simulators, baseline writer)")
	fs.DurationVar(&c.Sample, "sample", time.Second, "timeline sampling interval (chart)")
	fs.Float64Var(&c.WaitLoad, "wait-load", 0, "before starting, wait until the 1-minute load average is below this (0: do not wait)")
	fs.DurationVar(&c.WaitLoadMax, "wait-load-max", 10*time.Minute, "give up waiting for a low load after this, and run anyway (the report says so)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level of collector and monitor (the simulators log at warn)")
	fs.Int64Var(&c.SimMemoryLimitMiB, "sim-memory-limit-mib", 0, "the simulators (the load generator) run with Go's GC off, collecting only near a soft memory limit of this many MiB, shared between them by node count (0: what the collector, the monitor and etcd leave of the machine's memory at 40 KiB per node and 2 GiB, between half and two thirds of it, and at least 40 KiB per virtual node; negative: the simulator's default GC target, 400). Their collections otherwise stall the load they offer for seconds, and the run reports that as the system's latency: 100,000 virtual nodes in one process are not 100,000 reporters. Whatever the limit, each simulator collects once at the end of the ramp (POST /debug/gc), before the settling interval")
	fs.IntVar(&c.SimGOMAXPROCS, "sim-gomaxprocs", 0, "GOMAXPROCS of the simulator processes (0: twice the machine's CPUs; negative: Go's default, one per CPU). With one P per CPU, a simulator's goroutines wait whenever the kernel runs another process on the thread that holds one of its Ps, and on a 2-core machine shared with the collector, the monitor and etcd that is often: its renewals go out late and in bursts, its acks are read late, and the run charges both to the system under test. 100,000 virtual nodes stand for 100,000 machines, each with CPUs of its own")
	fs.IntVar(&c.SimNice, "sim-nice", 0, "scheduling niceness of the simulator processes (-20..19; below 0 needs root or CAP_SYS_NICE, and is skipped with a warning without): a load generator that has to wait for CPU sends its due renewals late and in bursts, and the offered load is then not the flat one the run asks for")
	fs.StringVar(&c.Title, "title", "", "title of the report (default derived from N and connections)")
	fs.BoolVar(&c.KeepEtcdData, "keep-etcd-data", false, "keep etcd's data directory (<out>/etcd-data) after a successful run, to inspect what the run left in the database (a failed run always keeps it)")
	fs.BoolVar(&c.Quick, "quick", false, "CI smoke preset: 3,000 nodes, short stages, grace 10s, one baseline step (explicit flags still win)")
}

// ApplyQuick sets the quick preset on the flags that were not given.
func (c *Config) ApplyQuick(set map[string]bool) {
	def := func(name string, f func()) {
		if !set[name] {
			f()
		}
	}
	def("nodes", func() { c.Nodes = 3000 })
	def("ramp-rate", func() { c.RampRate = 3000 })
	def("hold", func() { c.Hold = 15 * time.Second })
	def("grace", func() { c.Grace = 10 * time.Second })
	def("monitor-period", func() { c.MonitorPeriod = time.Second })
	def("lease-seconds", func() { c.LeaseSeconds = 8 })
	def("checkpoint-interval", func() { c.Checkpoint = 30 * time.Second })
	def("kill-wait", func() { c.KillWait = 15 * time.Second })
	def("restart-wait", func() { c.RestartWait = 3 * time.Second })
	def("baseline-steps", func() { c.BaselineSteps = "" })
	def("baseline-hold", func() { c.BaselineHold = 10 * time.Second })
	def("baseline-compaction-interval", func() { c.BaselineCompaction = 4 * time.Second })
	def("profile-seconds", func() { c.ProfileFor = 5 * time.Second })
}

// Validate checks the flags.
func (c *Config) Validate() error {
	if c.Nodes < 10 {
		return fmt.Errorf("--nodes must be at least 10")
	}
	if c.KillFraction < 0 || c.KillFraction >= 1 {
		return fmt.Errorf("--kill-fraction must be in [0,1)")
	}
	if c.Connections == 0 || c.Connections < -1 {
		return fmt.Errorf("--connections must be > 0 or -1 (one per node)")
	}
	if c.ProfileGoroutines && !c.Profile {
		// Dumps are taken after each stage's CPU profile; without profiles
		// the flag would do nothing, silently.
		return fmt.Errorf("--profile-goroutines (PROFILE_GOROUTINES=1) needs --profile (PROFILE=1)")
	}
	if _, err := c.Steps(); err != nil {
		return err
	}
	if c.RestartDrain < 0 {
		return fmt.Errorf("--restart-drain-window must be >= 0")
	}
	if c.LeaseSeconds < 4 {
		return fmt.Errorf("--lease-seconds must be at least 4")
	}
	return nil
}

// Steps parses --baseline-steps and adds N: every count once, ascending.
func (c *Config) Steps() ([]int, error) {
	seen := map[int]bool{c.Nodes: true}
	out := []int{c.Nodes}
	for _, f := range strings.Split(c.BaselineSteps, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--baseline-steps: bad count %q", f)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// KillCount is the number of nodes in the simulator that is killed.
func (c *Config) KillCount() int {
	if !c.Kill {
		return 0
	}
	return int(float64(c.Nodes)*c.KillFraction + 0.5)
}

// simMemoryLimitMiB is the soft memory limit of a simulator of n nodes,
// under which it runs with GC off (0: keep its default GC target). A
// simulator never collects until it nears the limit, and each collection
// of 90,000 virtual nodes stalls them all for 1-4 s. It allocates ~10 MB/s
// at 100,000 nodes, ~1 KB per renewal: a status re-send built with the real
// setters takes 8.8 KB (BenchmarkStatusResend in tests/fleetsim), but at ~333 re-sends/s that is under a third of it; the rest
// is gRPC's per-message buffers and the acks. A quarter of a 24 GiB machine
// brought its first collection at ~430-450 s: inside a standard run's kill
// stage, and every ~400 s of a longer hold. Half the machine moved it past
// a standard run and to ~1,100 s of a long one (the one flatness miss of
// the 20-minute holds in docs/adr/0019-multiplexed-fleet-simulator.md). See autoSimMemoryMiB for the
// share taken when none is given.
func (c *Config) simMemoryLimitMiB(n int) int64 {
	total := c.SimMemoryLimitMiB
	switch {
	case total < 0:
		return 0
	case total == 0:
		total = autoSimMemoryMiB(procutil.MemTotal()>>20, c.Nodes)
		if total <= 0 {
			return 0 // unknown machine: keep the default
		}
	}
	return max(total*int64(n)/int64(max(c.Nodes, 1)), 512)
}

// autoSimMemoryMiB is the simulators' share of a machine of totalMiB at
// nodes virtual nodes: what the system under test leaves, kept between
// half and two thirds of the machine, and never below 40 KiB per virtual
// node (at 250,000 nodes a quarter of the machine left a simulator 2 GB
// above its ~3.8 GB of heap and stacks, and it collected every 21 s).
// The system under test is reckoned at 40 KiB per node (the collector's
// goal is 25 KB, the monitor takes ~14 KiB) and 2 GiB for etcd and the
// page cache: at 100,000 nodes on 24 GiB the simulators get two thirds,
// at 250,000 about half, which the other processes need. Two thirds moved
// the 90,000-node simulator's one collection from ~1,100 s to 1,332 s of
// a 20-minute hold (a run whose ramp a VM snapshot stretched to
// 448 s and ~9 MB/s of garbage; docs/adr/0019-multiplexed-fleet-simulator.md): about where such a hold ends after a
// normal ramp, so not past it for certain. Less garbage per message is
// what would.
func autoSimMemoryMiB(totalMiB int64, nodes int) int64 {
	if totalMiB <= 0 {
		return 0
	}
	perNode := int64(nodes) * 40 >> 10
	share := min(max(totalMiB-perNode-2048, totalMiB/2), totalMiB*2/3)
	return max(share, perNode)
}

// simGOMAXPROCS is the simulators' GOMAXPROCS, 0 for Go's default.
func (c *Config) simGOMAXPROCS() int {
	switch n := c.SimGOMAXPROCS; {
	case n == 0:
		return 2 * runtime.NumCPU()
	case n < 0:
		return 0
	default:
		return n
	}
}

// simEnv is the environment the simulators run with beyond the bench's
// own.
func (c *Config) simEnv() []string {
	if n := c.simGOMAXPROCS(); n > 0 {
		return []string{"GOMAXPROCS=" + strconv.Itoa(n)}
	}
	return nil
}

// RenewInterval is how often a node renews.
func (c *Config) RenewInterval() time.Duration {
	return time.Duration(c.LeaseSeconds) * time.Second / 4
}
