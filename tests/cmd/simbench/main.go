// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command simbench measures the fleet simulator (fleetsim, tests/fleetsim)
// against the simulator's goals: ≥ 5,000 registrations/s, 100,000 virtual nodes
// on ≤ 1 core. See `simbench --help` and docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nodepulse/nodepulse/reporter/collectortest"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/tests/fleetsim"
	"github.com/nodepulse/nodepulse/tests/procutil"
)

const synopsis = `simbench — CPU, memory and registration rate of the fleet simulator.

Usage: go run ./tests/cmd/simbench [flags]           (from the repository root)
       simbench fake-collector --listen ADDR         (internal: the fake collector process)
       simbench fleetsim [flags]                     (internal: fleetsim, same code as tests/cmd/fleetsim)

Measures fleetsim alone, against its goals: the
simulator registers ≥ 5,000 virtual nodes per second and holds 100,000 nodes
on ≤ 1 core. It starts two processes on 127.0.0.1:

  fake collector  this binary re-executed as "simbench fake-collector": the
                  reporter tests' fake collector (reporter/collectortest),
                  a real gRPC server speaking the Report protocol that acks
                  everything and stores nothing, on --base-port
  simulator       "fleetsim --nodes N --connections C --ramp-rate 0"
                  (every node starts at once), admin/metrics on --base-port + 1;
                  by default this binary re-executed as "simbench fleetsim", which
                  runs fleetsim.Main exactly as tests/cmd/fleetsim does, so no build
                  step is needed; --fleetsim-bin bin/fleetsim measures a release
                  build (make build) instead

The collector is faked so that the figures are the simulator's own: the real
collector writes to etcd, costs far more per registration than the simulator,
and on a 2-core machine would cap the rate long before the simulator does (it
is measured by make bench, docs/benchmarks.md). The fake runs in its own
process so its CPU is not counted as the simulator's; it still shares the
machine, so its CPU is reported too (on a 2-core machine simulator + fake must
fit in 2 cores during the registration burst).

Stages and what is measured (CPU from /proc/<pid>/stat, RSS from
/proc/<pid>/status, counters from the simulator's /metrics):

  registration  wall time from starting the simulator process until
                nodepulse_sim_streams_connected = N (polled every --poll):
                registrations/s = N / that time; simulator CPU per
                registration = its CPU since start / N. That CPU includes
                process start, the lease and full status every node sends
                right after registering (as a real reporter does), and the
                renewals that fall due during the window; "net of renewals"
                subtracts the latter at the steady cost per renewal.
  settle        --settle of waiting (GC and the registration burst subside).
  steady        --hold: renewals/s (N / 10 s at the default 40 s lease),
                simulator cores (average and the busiest 1 s), CPU µs per
                message sent (a renewal or a status, incl. its ack), RSS and
                RSS per node; the fake collector's cores and RSS alongside.
                Unchanged statuses are first re-sent 2.5–7.5 min after
                registration (5 min ± 50 %), then every 5 min: the default
                window has none; --settle 160s includes them (N / 300 per s).

Prints a table, writes JSON to --out. Exits non-zero only when the plumbing
breaks (a process dies, a port is taken, the nodes never all attach within
--register-timeout); goals missed are reported, not failed. On a shared
machine, run it under flock with everything else that loads the CPU. The
children inherit the environment: NODEPULSE_SIM_* variables change the
simulator as they would fleetsim (flags passed here win).`

type config struct {
	nodes           int
	connections     int
	fleetsimBin     string
	basePort        int
	settle          time.Duration
	hold            time.Duration
	registerTimeout time.Duration
	poll            time.Duration
	out             string
	simArgs         string
	logLevel        string
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "nodes", 100000, "virtual nodes N")
	fs.IntVar(&c.connections, "connections", 1000, "gRPC connections the simulator multiplexes the N streams over (0: the simulator's default, min(N/100, 1000))")
	fs.StringVar(&c.fleetsimBin, "fleetsim-bin", "", `fleetsim binary to run (empty: this binary, re-executed as "simbench fleetsim")`)
	fs.IntVar(&c.basePort, "base-port", 61090, "fake collector gRPC port on 127.0.0.1; the simulator's admin (/metrics, /debug/pprof) is this + 1")
	fs.DurationVar(&c.settle, "settle", 15*time.Second, "wait after every node attached before the steady measurement")
	fs.DurationVar(&c.hold, "hold", 30*time.Second, "steady measurement duration")
	fs.DurationVar(&c.registerTimeout, "register-timeout", 5*time.Minute, "fail when not every node attached within this time")
	fs.DurationVar(&c.poll, "poll", 50*time.Millisecond, "how often the registration stage polls the simulator's /metrics")
	fs.StringVar(&c.out, "out", "", "write the result as JSON to this file (empty: table only)")
	fs.StringVar(&c.simArgs, "sim-args", "", `extra arguments for fleetsim, space-separated (e.g. "--node-status-report-frequency=30s")`)
	fs.StringVar(&c.logLevel, "log.level", "warn", "the simulator's log level (child logs go to a temporary directory, kept when the run fails)")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := mainArgs(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "simbench:", err)
		os.Exit(1)
	}
}

func mainArgs(ctx context.Context, args []string, w io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "fake-collector":
			return fakeCollector(ctx, args[1:])
		case "fleetsim":
			return fleetsim.Main(ctx, args[1:])
		}
	}
	var cfg config
	fs := flag.NewFlagSet("simbench", flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := flagenv.Parse(fs, "NODEPULSE_SIMBENCH", synopsis, args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.nodes <= 0 || cfg.hold <= 0 || cfg.poll <= 0 {
		return fmt.Errorf("--nodes, --hold and --poll must be > 0")
	}
	res, err := run(ctx, cfg, "simbench "+strings.Join(args, " "), w)
	if res != nil && cfg.out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if werr := os.WriteFile(cfg.out, append(b, '\n'), 0o644); werr != nil {
			err = errors.Join(err, werr)
		} else {
			fmt.Fprintf(w, "wrote %s\n", cfg.out)
		}
	}
	return err
}

// fakeCollector serves reporter/collectortest's fake collector
// until interrupted.
func fakeCollector(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("simbench fake-collector", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:61090", "gRPC listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := collectortest.New("simbench", *addr)
	if err != nil {
		return err
	}
	fmt.Printf("fake collector listening on %s\n", c.Addr())
	<-ctx.Done()
	c.Stop()
	fmt.Printf("fake collector stopped after %d messages\n", c.Messages())
	return nil
}

// Result is the JSON written to --out.
type Result struct {
	Command      string       `json:"command"`
	Time         time.Time    `json:"time"`
	Machine      Machine      `json:"machine"`
	Nodes        int          `json:"nodes"`
	Connections  int          `json:"connections"`
	FleetsimBin  string       `json:"fleetsimBin"`
	Registration Registration `json:"registration"`
	Steady       *Steady      `json:"steady,omitempty"`
	Goals        []Goal       `json:"goals"`
	LogDir       string       `json:"logDir,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUModel  string `json:"cpuModel"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"goVersion"`
	LoadStart string `json:"loadAtStart"`
	LoadEnd   string `json:"loadAtEnd"`
}

// Registration is the stage from starting the simulator until every node
// is attached.
type Registration struct {
	Seconds             float64 `json:"seconds"`          // simulator start → all N attached
	MetricsUpSeconds    float64 `json:"metricsUpSeconds"` // first successful /metrics scrape
	FirstSeenSeconds    float64 `json:"firstSeenSeconds"` // first scrape with a registration
	PerSecond           float64 `json:"registrationsPerSecond"`
	SimCPUSeconds       float64 `json:"simCpuSeconds"`
	SimCores            float64 `json:"simCores"`
	SimCPUMicrosPerReg  float64 `json:"simCpuMicrosPerRegistration"`
	LaterRenewals       float64 `json:"laterRenewals"` // renewals beyond the one right after each registration
	SimCPUMicrosPerRegN float64 `json:"simCpuMicrosPerRegistrationNetOfRenewals"`
	FakeCPUSeconds      float64 `json:"fakeCpuSeconds"`
	FakeCores           float64 `json:"fakeCores"`
	SimRSSBytes         int64   `json:"simRssBytes"`
	StreamErrors        float64 `json:"streamErrors"`
}

// Steady is the hold after the settle period.
type Steady struct {
	Seconds             float64 `json:"seconds"`
	Renewals            float64 `json:"renewals"`
	RenewalsPerSecond   float64 `json:"renewalsPerSecond"`
	Statuses            float64 `json:"statuses"`
	SimCores            float64 `json:"simCores"`
	SimCoresMax1s       float64 `json:"simCoresMax1s"`
	SimCPUMicrosPerMsg  float64 `json:"simCpuMicrosPerMessage"` // per renewal or status sent, incl. its ack
	SimRSSBytes         int64   `json:"simRssBytes"`
	SimRSSBytesPerNode  float64 `json:"simRssBytesPerNode"`
	SimHeapInuseBytes   float64 `json:"simHeapInuseBytes,omitempty"`
	SimGoroutines       float64 `json:"simGoroutines,omitempty"`
	FakeCores           float64 `json:"fakeCores"`
	FakeCPUMicrosPerMsg float64 `json:"fakeCpuMicrosPerMessage"`
	FakeRSSBytes        int64   `json:"fakeRssBytes"`
	ConnectedAtEnd      float64 `json:"connectedAtEnd"`
	StreamErrors        float64 `json:"streamErrors"`
	AckErrors           float64 `json:"ackErrors"`
}

// Goal is one of the simulator's goals.
type Goal struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      string `json:"met"` // yes, no, n/a
}

const (
	mConnected    = "nodepulse_sim_streams_connected"
	mRegistered   = "nodepulse_sim_registrations_total"
	mRenewals     = "nodepulse_sim_lease_renewals_sent_total"
	mStatuses     = "nodepulse_sim_status_reports_sent_total"
	mStreamErrors = "nodepulse_sim_stream_errors_total"
	mAckErrors    = "nodepulse_sim_ack_errors_total"
	mHeapInuse    = "go_memstats_heap_inuse_bytes"
	mGoroutines   = "go_goroutines"
)

func run(ctx context.Context, cfg config, cmdline string, w io.Writer) (res *Result, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	collAddr := fmt.Sprintf("127.0.0.1:%d", cfg.basePort)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", cfg.basePort+1)
	for _, a := range []string{collAddr, adminAddr} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return nil, fmt.Errorf("port in use (choose another --base-port): %w", err)
		}
		ln.Close()
	}
	logDir, err := os.MkdirTemp("", "simbench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(logDir)
			if res != nil {
				res.LogDir = ""
			}
		} else {
			fmt.Fprintf(w, "logs kept in %s\n", logDir)
		}
	}()
	res = &Result{Command: cmdline, Time: time.Now().UTC(), Nodes: cfg.nodes, Connections: cfg.connections, LogDir: logDir,
		Machine: Machine{CPUModel: procutil.CPUModel(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: procutil.LoadAvg()}}
	if cfg.connections <= 0 {
		res.Connections = min(max(cfg.nodes/100, 1), 1000) // the simulator's default
	}
	res.FleetsimBin = cfg.fleetsimBin
	if res.FleetsimBin == "" {
		res.FleetsimBin = "(this binary) fleetsim"
	}

	fake, err := procutil.Start("fake-collector", logDir, self, "fake-collector", "--listen", collAddr)
	if err != nil {
		return res, err
	}
	defer fake.Stop(10 * time.Second)
	if err := fake.WaitTCP(ctx, collAddr, 30*time.Second); err != nil {
		return res, err
	}

	simBin, simArgs := self, []string{"fleetsim"}
	if cfg.fleetsimBin != "" {
		simBin, simArgs = cfg.fleetsimBin, nil
	}
	simArgs = append(simArgs, fmt.Sprintf("--nodes=%d", cfg.nodes), fmt.Sprintf("--connections=%d", cfg.connections),
		"--ramp-rate=0", "--collector.addresses="+collAddr, "--collector.insecure", "--admin.listen-address="+adminAddr,
		"--log.level="+cfg.logLevel)
	simArgs = append(simArgs, strings.Fields(cfg.simArgs)...)
	fmt.Fprintf(w, "simbench: %s nodes over %s connections; load average %s; logs in %s\n",
		thousands(cfg.nodes), thousands(res.Connections), res.Machine.LoadStart, logDir)

	f0, err := procutil.Sample(fake.Pid())
	if err != nil {
		return res, fmt.Errorf("fake collector: %w", err)
	}
	t0 := time.Now()
	sim, err := procutil.Start("simulator", logDir, simBin, simArgs...)
	if err != nil {
		return res, err
	}
	// SIGTERM makes the simulator send Leaving on every stream: give it time.
	defer func() {
		t := time.Now()
		sim.Stop(45 * time.Second)
		fmt.Fprintf(w, "simulator stopped in %.1f s\n", time.Since(t).Seconds())
	}()
	alive := func() error {
		if sim.Exited() {
			return sim.DeadErr()
		}
		if fake.Exited() {
			return fake.DeadErr()
		}
		return ctx.Err()
	}
	metricsURL := "http://" + adminAddr + "/metrics"

	// Registration: poll until every node is attached.
	var m1 metrics
	var tUp, tFirst time.Time
	tick := time.NewTicker(cfg.poll)
	for {
		select {
		case <-ctx.Done():
		case <-sim.Done():
		case <-fake.Done():
		case <-tick.C:
		}
		if err := alive(); err != nil {
			tick.Stop()
			return res, err
		}
		m, err := scrape(ctx, metricsURL)
		if err == nil {
			if tUp.IsZero() {
				tUp = time.Now()
			}
			if tFirst.IsZero() && m[mRegistered] > 0 {
				tFirst = time.Now()
			}
			if m[mConnected] >= float64(cfg.nodes) {
				m1 = m
				break
			}
		}
		if time.Since(t0) > cfg.registerTimeout {
			tick.Stop()
			got := "unknown (/metrics unreachable)"
			if m != nil {
				got = thousands(int(m[mConnected]))
			}
			return res, fmt.Errorf("only %s of %s nodes attached after %s (last scrape error: %v)", got, thousands(cfg.nodes), cfg.registerTimeout, err)
		}
	}
	tick.Stop()
	t1 := time.Now()
	s1, err1 := procutil.Sample(sim.Pid())
	f1, err2 := procutil.Sample(fake.Pid())
	if err := errors.Join(err1, err2); err != nil {
		return res, err
	}
	wall := t1.Sub(t0).Seconds()
	r := &res.Registration
	r.Seconds = wall
	r.MetricsUpSeconds = tUp.Sub(t0).Seconds()
	r.FirstSeenSeconds = tFirst.Sub(t0).Seconds()
	r.PerSecond = float64(cfg.nodes) / wall
	r.SimCPUSeconds = s1.CPUSeconds
	r.SimCores = s1.CPUSeconds / wall
	r.SimCPUMicrosPerReg = s1.CPUSeconds / float64(cfg.nodes) * 1e6
	r.LaterRenewals = max(m1[mRenewals]-m1[mRegistered], 0)
	r.FakeCPUSeconds = f1.CPUSeconds - f0.CPUSeconds
	r.FakeCores = r.FakeCPUSeconds / wall
	r.SimRSSBytes = s1.RSSBytes
	r.StreamErrors = m1[mStreamErrors]
	fmt.Fprintf(w, "registered %s nodes in %.2f s; settling %s, then holding %s\n", thousands(cfg.nodes), wall, cfg.settle, cfg.hold)

	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
		case <-sim.Done():
		case <-fake.Done():
		case <-time.After(d):
		}
		return alive()
	}
	if err := sleep(cfg.settle); err != nil {
		return res, err
	}

	// Steady: counters and CPU at both ends of the hold; CPU every second
	// in between for the busiest second (read from /proc: costs the
	// simulator nothing).
	m2, err := scrape(ctx, metricsURL)
	if err != nil {
		return res, err
	}
	s2, err1 := procutil.Sample(sim.Pid())
	f2, err2 := procutil.Sample(fake.Pid())
	if err := errors.Join(err1, err2); err != nil {
		return res, err
	}
	var maxCores float64
	prev := s2
	end := s2.At.Add(cfg.hold)
	for time.Until(end) > 0 {
		if err := sleep(min(time.Second, time.Until(end))); err != nil {
			return res, err
		}
		s, err := procutil.Sample(sim.Pid())
		if err != nil {
			return res, err
		}
		if dt := s.At.Sub(prev.At).Seconds(); dt >= 0.5 {
			maxCores = max(maxCores, (s.CPUSeconds-prev.CPUSeconds)/dt)
		}
		prev = s
	}
	s3, err1 := procutil.Sample(sim.Pid())
	f3, err2 := procutil.Sample(fake.Pid())
	if err := errors.Join(err1, err2); err != nil {
		return res, err
	}
	m3, err := scrape(ctx, metricsURL)
	if err != nil {
		return res, err
	}
	dt := s3.At.Sub(s2.At).Seconds()
	renewals := m3[mRenewals] - m2[mRenewals]
	statuses := m3[mStatuses] - m2[mStatuses]
	st := &Steady{
		Seconds: dt, Renewals: renewals, RenewalsPerSecond: renewals / dt, Statuses: statuses,
		SimCores: (s3.CPUSeconds - s2.CPUSeconds) / dt, SimCoresMax1s: maxCores,
		SimRSSBytes: s3.RSSBytes, SimRSSBytesPerNode: float64(s3.RSSBytes) / float64(cfg.nodes),
		SimHeapInuseBytes: m3[mHeapInuse], SimGoroutines: m3[mGoroutines],
		FakeCores: (f3.CPUSeconds - f2.CPUSeconds) / dt, FakeRSSBytes: f3.RSSBytes,
		ConnectedAtEnd: m3[mConnected], StreamErrors: m3[mStreamErrors] - m2[mStreamErrors], AckErrors: m3[mAckErrors] - m2[mAckErrors],
	}
	if msgs := renewals + statuses; msgs > 0 {
		st.SimCPUMicrosPerMsg = (s3.CPUSeconds - s2.CPUSeconds) / msgs * 1e6
		st.FakeCPUMicrosPerMsg = (f3.CPUSeconds - f2.CPUSeconds) / msgs * 1e6
		r.SimCPUMicrosPerRegN = (r.SimCPUSeconds - r.LaterRenewals*st.SimCPUMicrosPerMsg/1e6) / float64(cfg.nodes) * 1e6
	}
	res.Steady = st
	res.Machine.LoadEnd = procutil.LoadAvg()
	res.Goals = goals(cfg, res)
	printTable(w, res)
	return res, nil
}

func goals(cfg config, res *Result) []Goal {
	r, st := res.Registration, res.Steady
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	g := []Goal{{Goal: "≥ 5,000 registrations/s", Measured: fmt.Sprintf("%s/s", thousands(int(math.Round(r.PerSecond)))),
		Met: yes(r.PerSecond >= 5000)}}
	hold := Goal{Goal: "100,000 nodes on ≤ 1 core (steady)",
		Measured: fmt.Sprintf("%.2f cores at %s nodes (busiest second %.2f)", st.SimCores, thousands(cfg.nodes), st.SimCoresMax1s)}
	switch {
	case cfg.nodes < 100000:
		hold.Met = "n/a"
	default:
		hold.Met = yes(st.SimCores <= 1)
	}
	return append(g, hold)
}

func printTable(w io.Writer, res *Result) {
	r, st := res.Registration, res.Steady
	row := func(stage, what, val string) { fmt.Fprintf(w, "%-13s %-52s %s\n", stage, what, val) }
	fmt.Fprintln(w)
	row("stage", "metric", "value")
	row("registration", fmt.Sprintf("wall time, simulator start → all %s attached", thousands(res.Nodes)),
		fmt.Sprintf("%.2f s (/metrics up at %.2f s, first registration seen at %.2f s)", r.Seconds, r.MetricsUpSeconds, r.FirstSeenSeconds))
	row("", "registrations/s", thousands(int(math.Round(r.PerSecond))))
	row("", "simulator CPU per registration", fmt.Sprintf("%.0f µs (%.2f cores)", r.SimCPUMicrosPerReg, r.SimCores))
	row("", fmt.Sprintf("  net of the %s renewals sent meanwhile", thousands(int(r.LaterRenewals))), fmt.Sprintf("%.0f µs", r.SimCPUMicrosPerRegN))
	row("", "fake collector CPU", fmt.Sprintf("%.2f s (%.2f cores)", r.FakeCPUSeconds, r.FakeCores))
	row("", "simulator RSS", mib(r.SimRSSBytes))
	row("steady", "window", fmt.Sprintf("%.1f s", st.Seconds))
	row("", "renewals/s (statuses in window)", fmt.Sprintf("%s (%s)", thousands(int(math.Round(st.RenewalsPerSecond))), thousands(int(st.Statuses))))
	row("", "simulator cores (busiest 1 s)", fmt.Sprintf("%.3f (%.3f)", st.SimCores, st.SimCoresMax1s))
	row("", "simulator CPU per message sent, incl. its ack", fmt.Sprintf("%.1f µs", st.SimCPUMicrosPerMsg))
	row("", "simulator RSS (per node)", fmt.Sprintf("%s (%.1f KiB)", mib(st.SimRSSBytes), st.SimRSSBytesPerNode/1024))
	if st.SimHeapInuseBytes > 0 {
		row("", "simulator Go heap in use; goroutines", fmt.Sprintf("%s; %s", mib(int64(st.SimHeapInuseBytes)), thousands(int(st.SimGoroutines))))
	}
	row("", "fake collector cores (µs per message); RSS", fmt.Sprintf("%.3f (%.1f µs); %s", st.FakeCores, st.FakeCPUMicrosPerMsg, mib(st.FakeRSSBytes)))
	row("", "attached at end; stream / ack errors in window", fmt.Sprintf("%s; %.0f / %.0f", thousands(int(st.ConnectedAtEnd)), st.StreamErrors, st.AckErrors))
	fmt.Fprintf(w, "load average: %s at start, %s at end (%d CPUs)\n\n", res.Machine.LoadStart, res.Machine.LoadEnd, res.Machine.CPUs)
	for _, g := range res.Goals {
		fmt.Fprintf(w, "[%-3s] %s: %s\n", g.Met, g.Goal, g.Measured)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// thousands formats n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
