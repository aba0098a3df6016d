// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package bench is the nodepulse scale benchmark: it runs etcd, a
// collector, a monitor and the reporter simulator as separate processes,
// drives them through ramp, steady, kill and collector-restart stages,
// then runs the Kubernetes write path (every node writes its Lease to etcd
// every 10 s) on the same etcd, and reports both side by side (JSON,
// Markdown, an SVG chart). See Synopsis.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/tests/procutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type runner struct {
	cfg    Config
	out    string
	logDir string
	log    io.Writer
	start  time.Time
	http   *http.Client
	obs    *Observer

	etcdURL, collAddr, monAddr             string
	collAdmin, monAdmin, simAdmin, killAdm string
	writerAddr                             string

	procMu sync.Mutex
	procs  map[string][]*procutil.Proc // every incarnation, by role

	tlMu     sync.Mutex
	timeline []TimelinePoint
	// ackSamples: the simulators' ack histogram per sample interval, for
	// the split of each stage around GC cycles (gcStage).
	ackSamples []ackSample
	markers    []Marker
	rssMax     map[string]int64
	problems   []string
	profiles   []string
	profileWG  sync.WaitGroup
	// stallDumps counts the feed stalls dumped so far (dumpStall).
	stallDumps int

	collArgs []string
	report   *Report
}

// snap is the state of everything at one instant.
type snap struct {
	at      time.Time
	cpu     map[string]float64
	rss     map[string]int64
	written map[string]int64
	etcd    Metrics
	coll    Metrics
	mon     Metrics
	sims    map[string]Metrics
	writer  *WriterStats
	view    View
	sys     procutil.CPUTimes
}

// Run runs the benchmark and writes the report. It returns an error only
// when the plumbing broke.
func Run(ctx context.Context, cfg Config, command string, log io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, log: log, http: &http.Client{Timeout: 20 * time.Second}, procs: map[string][]*procutil.Proc{}, rssMax: map[string]int64{}}
	r.out = cfg.OutDir
	if r.out == "" {
		r.out = filepath.Join(".run", "bench", time.Now().Format("20060102-150405"))
	}
	r.logDir = filepath.Join(r.out, "logs")
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "collector", "monitor", "fleetsim"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("missing binary %s (run 'make build' first): %w", filepath.Join(cfg.BinDir, b), err)
		}
	}
	addr := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	bp := cfg.BasePort
	r.etcdURL = "http://" + addr(cfg.EtcdPort)
	r.collAddr, r.monAddr = addr(bp), addr(bp+1)
	r.collAdmin, r.monAdmin, r.simAdmin, r.killAdm, r.writerAddr = addr(bp+100), addr(bp+101), addr(bp+102), addr(bp+103), addr(bp+104)
	for _, p := range []int{cfg.EtcdPort, cfg.EtcdPort + 1, bp, bp + 1, bp + 100, bp + 101, bp + 102, bp + 103, bp + 104} {
		ln, err := net.Listen("tcp", addr(p))
		if err != nil {
			return nil, fmt.Errorf("port %d is in use (another benchmark running?): %w", p, err)
		}
		ln.Close()
	}
	title := cfg.Title
	if title == "" {
		conn := fmt.Sprintf("%d connections", cfg.Connections)
		if cfg.Connections < 0 {
			conn = "one connection per node"
		}
		title = fmt.Sprintf("%s nodes, %s", fnum(float64(cfg.Nodes), 0), conn)
	}
	m := ReadMachine()
	m.GoVersion = runtime.Version()
	r.report = &Report{Title: title, Command: command, Machine: m, Config: ReportConfig{
		Nodes: cfg.Nodes, Connections: cfg.Connections, KillCount: cfg.KillCount(), RampRate: cfg.RampRate,
		HoldSeconds: cfg.Hold.Seconds(), GraceSeconds: cfg.Grace.Seconds(), RenewSeconds: cfg.RenewInterval().Seconds(),
		CheckpointSecs: cfg.Checkpoint.Seconds(), MonitorPeriod: cfg.MonitorPeriod.Seconds(),
		RestartDrainSecs: cfg.RestartDrain.Seconds(),
		BaselineWorkers:  cfg.BaselineWork, BaselineClients: cfg.BaselineConns, SimGOMAXPROCS: cfg.simGOMAXPROCS(),
	}}
	if cfg.WaitLoad > 0 {
		r.waitLoad(ctx)
	}
	r.start = time.Now()
	r.report.Started = r.start
	r.obs = NewObserver(r.start)

	err := r.run(ctx)
	r.stopAll()
	r.profileWG.Wait()
	r.report.Duration = time.Since(r.start).Seconds()
	r.report.Machine.LoadEnd = procutil.LoadAvg()
	r.finish()
	if werr := r.write(); werr != nil && err == nil {
		err = werr
	}
	if err == nil && !r.cfg.KeepEtcdData {
		_ = os.RemoveAll(filepath.Join(r.out, "etcd-data"))
	}
	return r.report, err
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.log, "%6.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, a...))
}

func (r *runner) problem(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.logf("PROBLEM: %s", msg)
	r.tlMu.Lock()
	r.problems = append(r.problems, msg)
	r.tlMu.Unlock()
}

func (r *runner) waitLoad(ctx context.Context) {
	deadline := time.Now().Add(r.cfg.WaitLoadMax)
	for procutil.Load1() >= r.cfg.WaitLoad {
		if time.Now().After(deadline) {
			r.report.LoadNote = fmt.Sprintf("The machine's 1-minute load average stayed at or above %.1f for %s (other work on the machine); the run went ahead anyway, so the numbers include that interference.",
				r.cfg.WaitLoad, r.cfg.WaitLoadMax)
			fmt.Fprintf(r.log, "load still %s after %s: running anyway\n", procutil.LoadAvg(), r.cfg.WaitLoadMax)
			return
		}
		fmt.Fprintf(r.log, "waiting for load < %.1f (now %s)\n", r.cfg.WaitLoad, procutil.LoadAvg())
		select {
		case <-ctx.Done():
			return
		case <-time.After(15 * time.Second):
		}
	}
}

func (r *runner) startProc(role, bin string, args ...string) (*procutil.Proc, error) {
	return r.startProcEnv(role, bin, nil, args...)
}

// startProcEnv is startProc with env added to the child's environment.
func (r *runner) startProcEnv(role, bin string, env []string, args ...string) (*procutil.Proc, error) {
	r.procMu.Lock()
	n := len(r.procs[role])
	r.procMu.Unlock()
	logName := role
	if n > 0 {
		logName = fmt.Sprintf("%s-%d", role, n+1)
	}
	p, err := procutil.StartEnv(logName, r.logDir, bin, append(gctraceEnv(), env...), args...)
	if err != nil {
		return nil, err
	}
	r.procMu.Lock()
	r.procs[role] = append(r.procs[role], p)
	r.procMu.Unlock()
	return p, nil
}

// current is the latest incarnation of role (nil if none).
func (r *runner) current(role string) *procutil.Proc {
	r.procMu.Lock()
	defer r.procMu.Unlock()
	ps := r.procs[role]
	if len(ps) == 0 {
		return nil
	}
	return ps[len(ps)-1]
}

// cpuOf sums the CPU seconds of every incarnation of role.
func (r *runner) cpuOf(role string) (cpu float64, rss, written int64, ok bool) {
	r.procMu.Lock()
	ps := append([]*procutil.Proc(nil), r.procs[role]...)
	r.procMu.Unlock()
	for _, p := range ps {
		if p.Exited() {
			if st := p.Cmd.ProcessState; st != nil {
				cpu += (st.UserTime() + st.SystemTime()).Seconds()
			}
			continue
		}
		if s, err := procutil.Sample(p.Pid()); err == nil {
			cpu += s.CPUSeconds
			rss += s.RSSBytes
			written += s.WriteBytes
		} else if st := p.Cmd.ProcessState; st != nil {
			cpu += (st.UserTime() + st.SystemTime()).Seconds()
		}
		ok = true
	}
	return cpu, rss, written, ok || len(ps) > 0
}

func (r *runner) roles() []string {
	r.procMu.Lock()
	defer r.procMu.Unlock()
	out := []string{"bench"}
	for role := range r.procs {
		out = append(out, role)
	}
	return out
}

func (r *runner) sampleProcs() (cpu map[string]float64, rss, written map[string]int64) {
	cpu, rss, written = map[string]float64{}, map[string]int64{}, map[string]int64{}
	for _, role := range r.roles() {
		if role == "bench" {
			s, _ := procutil.Sample(os.Getpid())
			cpu[role], rss[role] = s.CPUSeconds, s.RSSBytes
			continue
		}
		c, m, w, ok := r.cpuOf(role)
		if ok {
			cpu[role], rss[role], written[role] = c, m, w
		}
	}
	return cpu, rss, written
}

func (r *runner) scrape(ctx context.Context, url string) Metrics {
	m, err := Scrape(ctx, r.http, url)
	if err != nil {
		return nil
	}
	return m
}

func (r *runner) writerStats(ctx context.Context) *WriterStats {
	var ws WriterStats
	if getJSON(ctx, r.http, "http://"+r.writerAddr+"/stats", &ws) != nil {
		return nil
	}
	return &ws
}

func (r *runner) alive(role string) bool {
	p := r.current(role)
	return p != nil && !p.Exited()
}

func (r *runner) takeSnap(ctx context.Context) *snap {
	s := &snap{at: time.Now(), sims: map[string]Metrics{}}
	s.cpu, s.rss, s.written = r.sampleProcs()
	if r.alive("etcd") {
		s.etcd = r.scrape(ctx, r.etcdURL+"/metrics")
	}
	if r.alive("collector") {
		s.coll = r.scrape(ctx, "http://"+r.collAdmin+"/metrics")
	}
	if r.alive("monitor") {
		s.mon = r.scrape(ctx, "http://"+r.monAdmin+"/metrics")
	}
	for role, a := range map[string]string{"sim": r.simAdmin, "sim-kill": r.killAdm} {
		if r.alive(role) {
			if m := r.scrape(ctx, "http://"+a+"/metrics"); m != nil {
				s.sims[role] = m
			}
		}
	}
	if r.alive("writer") {
		s.writer = r.writerStats(ctx)
	}
	s.view = r.obs.Snapshot()
	s.sys = procutil.SystemCPUTimes()
	return s
}

func (r *runner) mark(label string) {
	r.tlMu.Lock()
	r.markers = append(r.markers, Marker{T: time.Since(r.start).Seconds(), Label: label})
	r.tlMu.Unlock()
}

// sampler records the timeline until ctx ends.
func (r *runner) sampler(ctx context.Context) {
	t := time.NewTicker(r.cfg.Sample)
	defer t.Stop()
	var prev *snap
	var prevRenew uint64
	var prevWriter uint64
	prevSim := map[string][]PromBucket{}
	var prevWH HistSnapshot
	var silentSince, dbAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var db float64
		if now.Sub(dbAt) >= 5*time.Second {
			// The stage's end shows the file after any defragmentation;
			// its peak needs samples in between.
			dbAt = now
			if m := r.scrape(ctx, r.etcdURL+"/metrics"); m != nil {
				db = m.Value("etcd_mvcc_db_total_size_in_bytes")
			}
		}
		cpu, rss, _ := r.sampleProcs()
		sys := procutil.SystemCPUTimes()
		v := r.obs.Snapshot()
		pt := TimelinePoint{T: now.Sub(r.start).Seconds(), Attached: v.Attached, Ready: v.Ready, Unknown: v.Unknown, Cores: map[string]float64{}, AckP99: math.NaN(), DBSize: db}
		if prev != nil {
			dt := now.Sub(prev.at).Seconds()
			pt.MachineBusy = math.Round(100*(sys.Busy-prev.sys.Busy)/dt) / 100
			pt.Steal = math.Round(100*(sys.Steal-prev.sys.Steal)/dt) / 100
			for k, c := range cpu {
				if pc, ok := prev.cpu[k]; ok {
					pt.Cores[k] = math.Round(100*(c-pc)/dt) / 100
				}
			}
			pt.RenewalsPS = float64(v.Renewals-prevRenew) / dt
		}
		// Ack latency over the interval: simulators, or the baseline writer.
		var merged []PromBucket
		for _, role := range []string{"sim", "sim-kill"} {
			if !r.alive(role) {
				delete(prevSim, role)
				continue
			}
			m := r.scrape(ctx, "http://"+r.simAdminOf(role)+"/metrics")
			if m == nil {
				continue
			}
			b := m.Buckets("nodepulse_sim_lease_ack_latency_seconds")
			if pb, ok := prevSim[role]; ok {
				merged = addBuckets(merged, SubBuckets(b, pb))
			}
			prevSim[role] = b
		}
		if len(merged) > 0 {
			pt.AckP99 = PromQuantile(0.99, merged)
			dt := r.cfg.Sample.Seconds()
			if prev != nil {
				dt = now.Sub(prev.at).Seconds()
			}
			r.tlMu.Lock()
			r.ackSamples = append(r.ackSamples, ackSample{T: pt.T, DT: dt, Buckets: merged})
			r.tlMu.Unlock()
		}
		if r.alive("writer") {
			if ws := r.writerStats(ctx); ws != nil {
				if prevWriter > 0 || prevWH.Counts != nil {
					pt.RenewalsPS += float64(ws.Renewals-prevWriter) / r.cfg.Sample.Seconds()
					if q := ws.Latency.Sub(prevWH).Quantile(0.99); !math.IsNaN(q) {
						pt.AckP99 = q
					}
				}
				prevWriter, prevWH = ws.Renewals, ws.Latency
			}
		} else {
			prevWriter, prevWH = 0, HistSnapshot{}
		}
		// Attached nodes renew ~N/10 times a second: a feed that shows none
		// for 3 s is a stall somewhere between the simulator and the feed.
		// Say where every goroutine waits, while it lasts.
		if prev != nil && v.Attached > 1000 && v.Renewals == prevRenew && r.alive("collector") && r.alive("sim") {
			if silentSince.IsZero() {
				silentSince = prev.at
			}
			if now.Sub(silentSince) >= 3*time.Second && r.stallDumps < maxStallDumps {
				r.stallDumps++
				r.dumpStall(ctx, now.Sub(r.start), now.Sub(silentSince))
				silentSince = now
			}
		} else {
			silentSince = time.Time{}
		}
		r.tlMu.Lock()
		for k, m := range rss {
			r.rssMax[k] = max(r.rssMax[k], m)
		}
		r.timeline = append(r.timeline, pt)
		r.tlMu.Unlock()
		prev = &snap{at: now, cpu: cpu, sys: sys}
		prevRenew = v.Renewals
	}
}

// dbPeak is the largest etcd file size the sampler saw between from and to.
func (r *runner) dbPeak(from, to time.Time) float64 {
	lo, hi := from.Sub(r.start).Seconds(), to.Sub(r.start).Seconds()
	r.tlMu.Lock()
	defer r.tlMu.Unlock()
	var peak float64
	for _, p := range r.timeline {
		if p.T >= lo && p.T <= hi {
			peak = max(peak, p.DBSize)
		}
	}
	return peak
}

func addBuckets(a, b []PromBucket) []PromBucket {
	if len(a) == 0 {
		return append([]PromBucket(nil), b...)
	}
	out := append([]PromBucket(nil), a...)
	for i := range out {
		for _, x := range b {
			if x.Le == out[i].Le {
				out[i].Count += x.Count
			}
		}
	}
	return out
}

func (r *runner) resetRSSMax() {
	r.tlMu.Lock()
	r.rssMax = map[string]int64{}
	r.tlMu.Unlock()
}

// profile fetches CPU profiles of every running process for d, and heap
// profiles (and, with ProfileGoroutines, goroutine dumps) when they are
// done.
func (r *runner) profile(ctx context.Context, stage string, d time.Duration) {
	if !r.cfg.Profile {
		return
	}
	d = min(d, r.cfg.ProfileFor)
	secs := max(int(d.Seconds()), 1)
	dir := filepath.Join(r.out, "profiles")
	_ = os.MkdirAll(dir, 0o755)
	targets := map[string]string{"collector": "http://" + r.collAdmin, "monitor": "http://" + r.monAdmin, "sim": "http://" + r.simAdmin,
		"etcd": r.etcdURL, "writer": "http://" + r.writerAddr}
	for role, base := range targets {
		if !r.alive(role) {
			continue
		}
		r.profileWG.Add(1)
		go func() {
			defer r.profileWG.Done()
			c := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
			f := filepath.Join(dir, fmt.Sprintf("%s-%s.cpu.pb.gz", stage, role))
			if err := r.saveProfile(ctx, c, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), f); err != nil {
				r.logf("profile %s %s: %v", stage, role, err)
				return
			}
			// Where the goroutines wait (a pass blocked on etcd round trips
			// shows here, not in the CPU profile). Only on request: the dump
			// lands inside the stage it describes, and at 100,000 goroutines
			// it is a burst of CPU and garbage in every process at once.
			if r.cfg.ProfileGoroutines {
				g := filepath.Join(dir, fmt.Sprintf("%s-%s.goroutines.txt", stage, role))
				_ = r.saveProfile(ctx, c, base+"/debug/pprof/goroutine?debug=1", g)
			}
			h := filepath.Join(dir, fmt.Sprintf("%s-%s.heap.pb.gz", stage, role))
			if err := r.saveProfile(ctx, c, base+"/debug/pprof/heap", h); err != nil {
				r.logf("heap profile %s %s: %v", stage, role, err)
			}
		}()
	}
}

// maxStallDumps bounds dumpStall per run: each dump of ~100,000
// goroutines briefly stops the process it reads.
const maxStallDumps = 2

// dumpStall saves where the goroutines of the collector, the simulator and
// the monitor wait (pprof goroutine, debug=1) during a feed stall, into
// profiles/stall-<t>s-<role>.goroutines.txt, in the background.
func (r *runner) dumpStall(ctx context.Context, at, silent time.Duration) {
	r.logf("feed stall: no renewals on the feed for %.1f s; dumping goroutines", silent.Seconds())
	dir := filepath.Join(r.out, "profiles")
	_ = os.MkdirAll(dir, 0o755)
	for role, base := range map[string]string{"collector": r.collAdmin, "monitor": r.monAdmin, "sim": r.simAdmin} {
		if !r.alive(role) {
			continue
		}
		r.profileWG.Add(1)
		go func() {
			defer r.profileWG.Done()
			c := &http.Client{Timeout: time.Minute}
			f := filepath.Join(dir, fmt.Sprintf("stall-%.0fs-%s.goroutines.txt", at.Seconds(), role))
			if err := r.saveProfile(ctx, c, "http://"+base+"/debug/pprof/goroutine?debug=1", f); err != nil {
				r.logf("stall dump %s: %v", role, err)
			}
		}()
	}
}

// saveProfile fetches url into path and lists the file in the report.
func (r *runner) saveProfile(ctx context.Context, c *http.Client, url, path string) error {
	if err := fetch(ctx, c, url, path); err != nil {
		return err
	}
	r.tlMu.Lock()
	r.profiles = append(r.profiles, path)
	r.tlMu.Unlock()
	return nil
}

func fetch(ctx context.Context, c *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// died returns the first role whose process exited unexpectedly.
func (r *runner) died(roles ...string) error {
	for _, role := range roles {
		if p := r.current(role); p != nil && p.Exited() {
			return fmt.Errorf("%s exited unexpectedly (%v); log tail:\n%s", role, p.Err(), procutil.Tail(p.Log, 30))
		}
	}
	return nil
}

// waitFor polls cond every 200ms until true, timeout, ctx end, or a
// watched process dies.
func (r *runner) waitFor(ctx context.Context, timeout time.Duration, watch []string, cond func() bool) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true, nil
		}
		if err := r.died(watch...); err != nil {
			return false, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *runner) sleep(ctx context.Context, d time.Duration, watch ...string) error {
	_, err := r.waitFor(ctx, d, watch, func() bool { return false })
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return err
}

func (r *runner) stopAll() {
	for _, role := range []string{"writer", "monitor", "sim-kill", "sim", "collector", "etcd"} {
		r.procMu.Lock()
		ps := append([]*procutil.Proc(nil), r.procs[role]...)
		r.procMu.Unlock()
		for _, p := range ps {
			if role == "sim" || role == "sim-kill" {
				p.Kill()
			} else {
				p.Stop(15 * time.Second)
			}
		}
	}
}

func (r *runner) collectorArgs() []string {
	c := r.cfg
	args := []string{"--grpc.insecure", "--grpc.listen-address=" + r.collAddr, "--admin.listen-address=" + r.collAdmin,
		"--etcd.endpoints=" + strings.TrimPrefix(r.etcdURL, "http://"), "--max-streams=" + fmt.Sprint(c.Nodes+1000),
		// Every simulated node connects from 127.0.0.1 without a client
		// certificate: after a restart all of them are unregistered at once.
		"--limits.unregistered-streams-per-address=" + fmt.Sprint(c.Nodes+1000),
		"--log.level=" + c.LogLevel}
	if c.Checkpoint > 0 {
		args = append(args, "--lease.checkpoint-interval="+c.Checkpoint.String())
	}
	if c.RestartDrain > 0 {
		// One collector on one port: reporters told to move have nowhere to
		// go but the next process, so the drain window only delays them
		// (see Synopsis, restart).
		args = append(args, "--drain.reconnect-window="+c.RestartDrain.String(),
			"--grpc.drain-timeout="+(c.RestartDrain+2*time.Second).String())
	}
	return args
}

func (r *runner) run(ctx context.Context) error {
	c := r.cfg
	bin := func(n string) string { return filepath.Join(c.BinDir, n) }
	sctx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()

	// etcd
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort+1)
	etcdArgs := []string{"--name=bench", "--data-dir=" + filepath.Join(r.out, "etcd-data"),
		"--listen-client-urls=" + r.etcdURL, "--advertise-client-urls=" + r.etcdURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=bench=" + peer,
		"--log-level=warn", "--quota-backend-bytes=" + fmt.Sprint(int64(8)<<30)}
	if c.Profile {
		etcdArgs = append(etcdArgs, "--enable-pprof")
	}
	if err := os.RemoveAll(filepath.Join(r.out, "etcd-data")); err != nil {
		return err
	}
	etcd, err := r.startProc("etcd", bin("etcd"), etcdArgs...)
	if err != nil {
		return err
	}
	if err := etcd.WaitHTTP(ctx, r.etcdURL+"/health", 60*time.Second); err != nil {
		return err
	}
	r.logf("etcd ready (pid %d)", etcd.Pid())

	// collector, monitor
	r.collArgs = r.collectorArgs()
	coll, err := r.startProc("collector", bin("collector"), r.collArgs...)
	if err != nil {
		return err
	}
	if err := coll.WaitHTTP(ctx, "http://"+r.collAdmin+"/readyz", 60*time.Second); err != nil {
		return err
	}
	mon, err := r.startProc("monitor", bin("monitor"), "--grpc.insecure", "--collector.insecure",
		"--grpc.listen-address="+r.monAddr, "--admin.listen-address="+r.monAdmin,
		"--etcd.endpoints="+strings.TrimPrefix(r.etcdURL, "http://"),
		"--node-monitor-grace-period="+c.Grace.String(), "--node-monitor-period="+c.MonitorPeriod.String(),
		"--log.level="+c.LogLevel)
	if err != nil {
		return err
	}
	if err := mon.WaitHTTP(ctx, "http://"+r.monAdmin+"/readyz", 60*time.Second); err != nil {
		return err
	}
	r.logf("collector (pid %d) and monitor (pid %d) ready", coll.Pid(), mon.Pid())

	go r.obs.FollowFeed(sctx, r.collAddr)
	go r.obs.WatchNodes(sctx, r.monAddr)
	go r.sampler(sctx)
	if ok, err := r.waitFor(ctx, 10*time.Second, []string{"collector", "monitor"}, func() bool {
		v := r.obs.Snapshot()
		return v.FeedConnected
	}); err != nil || !ok {
		return fmt.Errorf("the observer could not follow the collector's liveness feed (err %v)", err)
	}
	pre := r.takeSnap(ctx)

	// Simulators: survivors and the part that is killed at once.
	kill := c.KillCount()
	live := c.Nodes - kill
	connLive, connKill := live, kill
	if c.Connections > 0 {
		total := min(c.Connections, c.Nodes)
		connKill = 0
		if kill > 0 {
			connKill = max(int(math.Round(float64(total)*float64(kill)/float64(c.Nodes))), 1)
		}
		connLive = max(total-connKill, 1)
	}
	rampLive, rampKill := c.RampRate*float64(live)/float64(c.Nodes), c.RampRate*float64(kill)/float64(c.Nodes)
	simArgs := func(n, conns int, prefix, admin string, ramp float64) []string {
		args := []string{"--nodes=" + fmt.Sprint(n), "--connections=" + fmt.Sprint(conns), "--name-prefix=" + prefix,
			"--ramp-rate=" + fmt.Sprintf("%.1f", ramp), "--node-lease-duration-seconds=" + fmt.Sprint(c.LeaseSeconds),
			"--collector.addresses=" + r.collAddr, "--collector.insecure", "--admin.listen-address=" + admin, "--log.level=warn"}
		if mib := c.simMemoryLimitMiB(n); mib > 0 {
			args = append(args, "--runtime.gc-percent=-1", "--runtime.memory-limit-mib="+fmt.Sprint(mib))
		}
		return args
	}
	r.mark("ramp")
	rampStart := r.takeSnap(ctx)
	sim, err := r.startProcEnv("sim", bin("fleetsim"), c.simEnv(), simArgs(live, connLive, livePrefix, r.simAdmin, rampLive)...)
	if err != nil {
		return err
	}
	sims := []*procutil.Proc{sim}
	if kill > 0 {
		sk, err := r.startProcEnv("sim-kill", bin("fleetsim"), c.simEnv(), simArgs(kill, connKill, killPrefix, r.killAdm, rampKill)...)
		if err != nil {
			return err
		}
		sims = append(sims, sk)
	}
	r.logf("simulators started: %d nodes on %d connections + %d nodes on %d connections (killed later)", live, connLive, kill, connKill)
	if r.cfg.SimNice != 0 {
		for _, p := range sims {
			if err := p.Renice(r.cfg.SimNice); err != nil {
				r.logf("warning: %v; the simulators run at the default priority", err)
				break
			}
		}
	}
	// The registration storm: where the collector's time goes while the
	// fleet attaches (once the simulator serves its profile too).
	if r.cfg.Profile {
		_ = sim.WaitHTTP(ctx, "http://"+r.simAdmin+"/metrics", 10*time.Second)
	}
	r.profile(ctx, "ramp", r.cfg.ProfileFor)
	core := []string{"etcd", "collector", "monitor", "sim", "sim-kill"}
	// Generous: this only tells broken plumbing from a slow box. At
	// 100,000 nodes on 2 shared cores the last statuses can take minutes to
	// be stored and served (a status retry storm while registrations fill
	// the collector's queue: docs/adr/0011-registration-queue-and-refusals.md), and a profile of every
	// process (PROFILE=1) slows the ramp further.
	rampTimeout := time.Duration(float64(c.Nodes)/max(c.RampRate, 1)*float64(time.Second)) + 6*time.Minute
	lastLog := time.Now()
	ok, err := r.waitFor(ctx, rampTimeout, core, func() bool {
		v := r.obs.Snapshot()
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			r.logf("ramp: %d attached, %d Ready, %.0f renewals so far", v.Attached, v.Ready, float64(v.Renewals))
		}
		return v.Attached >= c.Nodes && v.Ready >= c.Nodes
	})
	if err != nil {
		return err
	}
	if !ok {
		v := r.obs.Snapshot()
		st := r.addStage("ramp (incomplete)", "nodepulse", c.Nodes, rampStart, r.takeSnap(ctx), pre)
		st.Note += fmt.Sprintf("; only %d of %d nodes attached when the ramp timed out", v.Attached, c.Nodes)
		return fmt.Errorf("ramp: only %d of %d nodes attached and %d Ready after %s (feed connected %v, monitor watch connected %v)",
			v.Attached, c.Nodes, v.Ready, rampTimeout, v.FeedConnected, v.WatchConnected)
	}
	r.logf("ramp: all %d nodes attached and Ready", c.Nodes)
	// The simulators' ramp garbage goes now, not in a measured stage (see
	// collectSims); the settling interval after it is a whole renew
	// interval, so renewals the collection delayed are back in phase.
	freed, err := r.collectSims(ctx)
	if err != nil {
		return fmt.Errorf("ramp: the simulators' garbage collection: %w", err)
	}
	r.logf("ramp: simulators collected (heap before → after): %s; settling for one renew interval", freed)
	if err := r.sleep(ctx, c.RenewInterval()+2*time.Second, core...); err != nil {
		return err
	}
	rampEnd := r.takeSnap(ctx)
	ramp := r.addStage("ramp", "nodepulse", c.Nodes, rampStart, rampEnd, nil)
	if ramp.Note != "" {
		ramp.Note += "; "
	}
	ramp.Note += "at its end the simulators collected their garbage (heap before → after: " + freed + ")"

	// steady
	r.mark("steady")
	r.resetRSSMax()
	r.profile(ctx, "steady", c.Hold)
	st0 := r.takeSnap(ctx)
	r.logf("steady: holding %s", c.Hold)
	if err := r.sleep(ctx, c.Hold, core...); err != nil {
		return err
	}
	st1 := r.takeSnap(ctx)
	steady := r.addStage("steady", "nodepulse", c.Nodes, st0, st1, pre)
	steady.Flatness = ptr(FlatnessOf(r.obs.Bins(st0.at, st1.at.Add(-time.Second)), 0.1))
	if bins, err := r.sentBins(ctx, st0.at, st1.at.Add(-time.Second)); err != nil {
		r.logf("steady: no send-time bins from the simulators (the flatness as offered is not reported): %v", err)
	} else {
		steady.SentFlatness = ptr(FlatnessOf(bins, 0.1))
	}
	steady.FalseUnknown, steady.FalseUnknownSamples = r.falseUnknowns(st0.view.UnknownEvents, "")
	steady.EtcdKeys = r.etcdKeys(ctx)

	if kill > 0 {
		if err := r.killStage(ctx, kill, core); err != nil {
			return err
		}
	}
	if c.Restart {
		if err := r.restartStage(ctx, live); err != nil {
			return err
		}
	}

	// nodepulse is done; stop it before the baseline uses the same etcd.
	r.mark("baseline")
	if p := r.current("monitor"); p != nil {
		p.Stop(15 * time.Second)
	}
	for _, role := range []string{"sim-kill", "sim"} {
		if p := r.current(role); p != nil {
			p.Kill()
		}
	}
	if p := r.current("collector"); p != nil {
		p.Stop(20 * time.Second)
	}
	if !c.Baseline {
		return nil
	}
	return r.baseline(ctx)
}

const (
	livePrefix = "np-"
	killPrefix = "npk-"
)

func ptr[T any](v T) *T { return &v }

// falseUnknowns counts distinct surviving nodes that turned Unknown since
// event index from (prefix: only nodes with it; "" = every non-killed node).
func (r *runner) falseUnknowns(from int, _ string) (int, []string) {
	seen := map[string]bool{}
	var samples []string
	for _, e := range r.obs.UnknownEvents(from) {
		if !strings.HasPrefix(e.Name, killPrefix) {
			if !seen[e.Name] && len(samples) < 10 {
				waited := "never seen WAITING"
				if e.SinceWaiting > 0 {
					waited = fmt.Sprintf("%s after its last WAITING", fdur(e.SinceWaiting.Seconds()))
				}
				samples = append(samples, fmt.Sprintf("%s at %.1fs, %s after its last renewal or status report on the feed, %s", e.Name, e.At.Sub(r.start).Seconds(), fdur(e.SinceHeard.Seconds()), waited))
			}
			seen[e.Name] = true
		}
	}
	return len(seen), samples
}

func (r *runner) killStage(ctx context.Context, kill int, core []string) error {
	c := r.cfg
	r.mark("kill")
	r.resetRSSMax()
	r.profile(ctx, "kill", c.Grace+5*time.Second)
	k0 := r.takeSnap(ctx)
	from := k0.view.UnknownEvents
	killAt := time.Now()
	r.current("sim-kill").Kill()
	r.logf("kill: SIGKILLed the simulator of %d nodes", kill)
	watch := []string{"etcd", "collector", "monitor", "sim"}
	deadline := c.Grace + c.KillWait
	ok, err := r.waitFor(ctx, deadline, watch, func() bool {
		_, u := r.obs.CountReady(killPrefix)
		return u >= kill
	})
	if err != nil {
		return err
	}
	// Let false Unknowns among survivors show up: at least grace + 5 s.
	if rest := time.Until(killAt.Add(c.Grace + 5*time.Second)); rest > 0 {
		if err := r.sleep(ctx, rest, watch...); err != nil {
			return err
		}
	}
	k1 := r.takeSnap(ctx)
	s := r.addStage("kill", "nodepulse", c.Nodes-kill, k0, k1, nil)
	d := &Detection{Killed: kill}
	var past, since, marked, seen []float64
	for _, e := range r.obs.UnknownEvents(from) {
		if !strings.HasPrefix(e.Name, killPrefix) {
			continue
		}
		d.Detected++
		p := (e.SinceHeard - c.Grace).Seconds()
		past = append(past, p)
		since = append(since, e.At.Sub(killAt).Seconds())
		if p <= 2 {
			d.WithinGoal++
		}
		if !e.MarkedAt.IsZero() {
			toMark := e.At.Sub(e.MarkedAt).Seconds()
			marked, seen = append(marked, p-toMark), append(seen, toMark)
		}
	}
	d.PastGrace, d.SinceKill = Summarize(past), Summarize(since)
	d.MarkedPastGrace, d.SeenAfterMark = Summarize(marked), Summarize(seen)
	s.Detection = d
	s.FalseUnknown, s.FalseUnknownSamples = r.falseUnknowns(from, "")
	if !ok {
		r.problem("kill: only %d of %d killed nodes turned Unknown within grace + %s", d.Detected, kill, c.KillWait)
	}
	r.logf("kill: %d/%d Unknown, past grace median %s max %s (marked by the monitor: median %s max %s past grace; seen here: median %s max %s after the mark); false Unknown %d",
		d.Detected, kill, fdur(d.PastGrace.Median), fdur(d.PastGrace.Max), fdur(d.MarkedPastGrace.Median), fdur(d.MarkedPastGrace.Max),
		fdur(d.SeenAfterMark.Median), fdur(d.SeenAfterMark.Max), s.FalseUnknown)
	return nil
}

func (r *runner) restartStage(ctx context.Context, survivors int) error {
	c := r.cfg
	r.mark("collector restart")
	r.resetRSSMax()
	s0 := r.takeSnap(ctx)
	from := s0.view.UnknownEvents
	snaps0 := r.obs.feedSnapshotCount()
	t0 := time.Now()
	old := r.current("collector")
	_ = old.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-old.Done():
	case <-time.After(60 * time.Second):
		r.problem("restart: the old collector did not exit within 60 s of SIGTERM; killed")
		old.Kill()
	case <-ctx.Done():
		return ctx.Err()
	}
	exitAfter := time.Since(t0).Seconds()
	r.logf("restart: old collector exited after %s; starting a new one", fdur(exitAfter))
	nc, err := r.startProc("collector", filepath.Join(c.BinDir, "collector"), r.collArgs...)
	if err != nil {
		return err
	}
	if err := nc.WaitHTTP(ctx, "http://"+r.collAdmin+"/readyz", 60*time.Second); err != nil {
		return err
	}
	// Profiled from the new collector's start: the re-registration storm
	// (the old collector is gone).
	r.profile(ctx, "restart", c.Grace)
	watch := []string{"etcd", "collector", "monitor", "sim"}
	reconnect := -1.0
	ok, err := r.waitFor(ctx, c.Grace+c.RestartWait+30*time.Second, watch, func() bool {
		return r.obs.feedSnapshotCount() > snaps0 && r.obs.CountAttached(livePrefix) >= survivors
	})
	if err != nil {
		return err
	}
	if ok {
		reconnect = time.Since(t0).Seconds()
		r.logf("restart: all %d survivors attached again after %s", survivors, fdur(reconnect))
	} else {
		r.problem("restart: only %d of %d survivors attached to the new collector", r.obs.CountAttached(livePrefix), survivors)
	}
	if rest := time.Until(t0.Add(c.Grace + c.RestartWait)); rest > 0 {
		if err := r.sleep(ctx, rest, watch...); err != nil {
			return err
		}
	}
	s1 := r.takeSnap(ctx)
	st := r.addStage("restart", "nodepulse", survivors, s0, s1, nil)
	st.Restart = &RestartResult{Survivors: survivors, ReconnectSecs: reconnect, OldExitSecs: exitAfter,
		ReattachedAtEnd: r.obs.CountAttached(livePrefix)}
	st.Restart.UnknownsCaused, st.FalseUnknownSamples = r.falseUnknowns(from, "")
	st.FalseUnknown = st.Restart.UnknownsCaused
	return nil
}

func (r *runner) baseline(ctx context.Context) error {
	c := r.cfg
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// Let etcd settle after nodepulse stopped.
	if err := r.sleep(ctx, 3*time.Second, "etcd"); err != nil {
		return err
	}
	w, err := r.startProc("writer", self, "k8s-writer", "--etcd="+strings.TrimPrefix(r.etcdURL, "http://"), "--listen="+r.writerAddr,
		"--clients="+fmt.Sprint(c.BaselineConns), "--workers="+fmt.Sprint(c.BaselineWork), "--interval="+c.RenewInterval().String(),
		"--ramp-rate="+fmt.Sprint(c.BaselineRamp), "--compaction-interval="+c.BaselineCompaction.String())
	if err != nil {
		return err
	}
	if err := w.WaitHTTP(ctx, "http://"+r.writerAddr+"/healthz", 30*time.Second); err != nil {
		return err
	}
	steps, _ := c.Steps()
	for i, n := range steps {
		hold := c.StepHold
		if n == c.Nodes {
			hold = c.BaselineHold
		}
		name := fmt.Sprintf("baseline-%d", n)
		if err := r.post(ctx, fmt.Sprintf("http://%s/target?n=%d", r.writerAddr, n)); err != nil {
			return err
		}
		r.logf("%s: ramping the Kubernetes-style writer to %d nodes", name, n)
		ok, err := r.waitFor(ctx, time.Duration(float64(n)/max(c.BaselineRamp, 1)*float64(time.Second))+90*time.Second, []string{"etcd", "writer"}, func() bool {
			ws := r.writerStats(ctx)
			return ws != nil && int(ws.Created) >= n
		})
		if err != nil {
			return err
		}
		note := ""
		if !ok {
			ws := r.writerStats(ctx)
			note = fmt.Sprintf("only %d of %d Leases created before the stage began: the writer cannot keep up", ws.Created, n)
			r.problem("%s: %s", name, note)
		}
		if err := r.sleep(ctx, c.RenewInterval(), "etcd", "writer"); err != nil {
			return err
		}
		r.mark(fmt.Sprintf("baseline %d", n))
		r.resetRSSMax()
		if n == c.Nodes {
			r.profile(ctx, "baseline", hold)
		}
		w0 := r.writerStats(ctx)
		b0 := r.takeSnap(ctx)
		if err := r.sleep(ctx, hold, "etcd", "writer"); err != nil {
			return err
		}
		b1 := r.takeSnap(ctx)
		s := r.addStage(name, "baseline", n, b0, b1, nil)
		s.Note = note
		if w1 := r.writerStats(ctx); w0 != nil && w1 != nil && c.BaselineCompaction > 0 && w1.Compactions == w0.Compactions {
			s.Note = strings.TrimPrefix(s.Note+"; no compaction within the stage (--step-hold or --baseline-hold below --baseline-compaction-interval)", "; ")
		}
		if i == len(steps)-1 {
			s.EtcdKeys = r.etcdKeys(ctx)
		}
		if !sustains(s, c.RenewInterval().Seconds()) && n > c.Nodes {
			r.logf("%s: saturated; larger steps skipped", name)
			break
		}
		r.logf("%s: %.0f renewals/s, p99 %s", name, s.RenewalsPS, fdur(s.Ack.P99))
	}
	if ws := r.writerStats(ctx); ws != nil {
		r.report.LeaseSize = ws.LeaseSize
	}
	return nil
}

func (r *runner) post(ctx context.Context, url string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}

// addStage computes a stage from two snapshots. pre (optional) is the
// snapshot before the fleet started, for memory per node.
func (r *runner) addStage(name, system string, nodes int, a, b *snap, pre *snap) *Stage {
	dt := b.at.Sub(a.at).Seconds()
	s := &Stage{Name: name, System: system, Start: a.at.Sub(r.start).Seconds(), End: b.at.Sub(r.start).Seconds(), Nodes: nodes,
		Procs: map[string]*ProcStage{}}
	if system == "nodepulse" {
		s.Renewals = float64(b.view.Renewals - a.view.Renewals)
		var merged []PromBucket
		var sent float64
		for role, mb := range b.sims {
			ma, ok := a.sims[role]
			if !ok {
				continue
			}
			merged = addBuckets(merged, SubBuckets(mb.Buckets("nodepulse_sim_lease_ack_latency_seconds"), ma.Buckets("nodepulse_sim_lease_ack_latency_seconds")))
			sent += mb.Value("nodepulse_sim_lease_renewals_sent_total") - ma.Value("nodepulse_sim_lease_renewals_sent_total")
		}
		s.SentPS = sent / dt
		s.Ack = Latency{N: totalOf(merged), P50: PromQuantile(0.5, merged), P99: PromQuantile(0.99, merged), Max: PromMaxBound(merged),
			MaxIsBound: true, Source: "simulator histogram"}
		fd := b.view.FeedLatency.Sub(a.view.FeedLatency)
		s.FeedDelay = &Latency{N: float64(fd.Total()), P50: fd.Quantile(0.5), P99: fd.Quantile(0.99), Max: fd.MaxBucket(), MaxIsBound: true, Source: "observer"}
	} else if a.writer != nil && b.writer != nil {
		s.Renewals = float64(b.writer.Renewals - a.writer.Renewals)
		h := b.writer.Latency.Sub(a.writer.Latency)
		s.Ack = Latency{N: float64(h.Total()), P50: h.Quantile(0.5), P99: h.Quantile(0.99), Max: h.MaxBucket(), MaxIsBound: true, Source: "baseline writer histogram"}
		s.Errors = float64(b.writer.Errors - a.writer.Errors)
	}
	s.RenewalsPS = s.Renewals / dt
	r.tlMu.Lock()
	rssMax := r.rssMax
	r.tlMu.Unlock()
	for role, cb := range b.cpu {
		ca, ok := a.cpu[role]
		if !ok {
			ca = 0
		}
		ps := &ProcStage{CPUSeconds: cb - ca, RSSEnd: b.rss[role], RSSMax: max(rssMax[role], b.rss[role], a.rss[role]),
			WrittenBytes: b.written[role] - a.written[role]}
		if ps.CPUSeconds <= 0 && ps.RSSEnd == 0 {
			continue // not running in this stage
		}
		ps.Cores = ps.CPUSeconds / dt
		if s.Renewals > 0 {
			ps.CPUPer1k = ps.CPUSeconds / s.Renewals * 1000
		}
		s.Procs[role] = ps
		if role != "bench" {
			s.TotalCores += ps.Cores
		}
	}
	if s.Renewals > 0 {
		s.TotalPer1k = s.TotalCores * dt / s.Renewals * 1000
	}
	s.SchedWait = schedWaits(a, b)
	s.MachineBusy = (b.sys.Busy - a.sys.Busy) / dt
	s.MachineSteal = (b.sys.Steal - a.sys.Steal) / dt
	if a.etcd != nil && b.etcd != nil {
		d := func(n string) float64 { return (b.etcd.Value(n) - a.etcd.Value(n)) / dt }
		s.Etcd = EtcdStage{ProposalsPerSec: d("etcd_server_proposals_committed_total"), PutsPerSec: d("etcd_mvcc_put_total"),
			PutBytesPerSec: d("etcd_debugging_mvcc_total_put_size_in_bytes"), WALBytesPerSec: d("etcd_disk_wal_write_bytes_total"),
			DBSize: b.etcd.Value("etcd_mvcc_db_total_size_in_bytes"), DBSizeInUse: b.etcd.Value("etcd_mvcc_db_total_size_in_use_in_bytes"),
			Keys: b.etcd.Value("etcd_debugging_mvcc_keys_total")}
		s.Etcd.DiskBytesPerSec = float64(b.written["etcd"]-a.written["etcd"]) / dt
		s.Etcd.DBSizePeak = max(s.Etcd.DBSize, r.dbPeak(a.at, b.at))
	}
	if pre != nil && b.view.Attached > 0 {
		s.BytesPerNode = float64(b.rss["collector"]-pre.rss["collector"]) / float64(b.view.Attached)
		if pre.coll != nil && b.coll != nil {
			s.HeapPerNode = (b.coll.Value("go_memstats_heap_inuse_bytes") - pre.coll.Value("go_memstats_heap_inuse_bytes")) / float64(b.view.Attached)
		}
	}
	if a.coll != nil && b.coll != nil && system == "nodepulse" {
		ac := a.coll
		if restarted(a.coll, b.coll) {
			// The restart stage: b is a new collector process, whose
			// counters start from zero. Per-counter reset detection would
			// mix the two processes' totals.
			ac = Metrics{}
		}
		recv := counterDelta(ac, b.coll, "nodepulse_collector_messages_total", `kind="status"`)
		unch := counterDelta(ac, b.coll, "nodepulse_collector_messages_total", `kind="status"`, `result="unchanged"`)
		wr := counterDelta(ac, b.coll, "nodepulse_collector_etcd_txns_total", `kind="status"`)
		ck := counterDelta(ac, b.coll, "nodepulse_collector_lease_checkpoints_total")
		lt := counterDelta(ac, b.coll, "nodepulse_collector_etcd_txns_total", `kind="lease"`)
		nt := counterDelta(ac, b.coll, "nodepulse_collector_etcd_txns_total", `kind="node"`)
		s.Note = fmt.Sprintf("collector: %s status reports received (%s unchanged), %s status Txns, %s registration Txns, %s lease checkpoints in %s Txns",
			fnum(recv, 0), fnum(unch, 0), fnum(wr, 0), fnum(nt, 0), fnum(ck, 0), fnum(lt, 0))
		if wt := counterDelta(ac, b.coll, "nodepulse_collector_waiting_total"); wt > 0 {
			s.Note += fmt.Sprintf(", %s WAITING events (registrations queued or refused, reported alive)", fnum(wt, 0))
		}
		if q := counterDelta(ac, b.coll, "nodepulse_collector_registers_told_queued_total"); q > 0 {
			s.Note += fmt.Sprintf(", %s Registers told they are queued", fnum(q, 0))
		}
		if rf := counterDelta(ac, b.coll, "nodepulse_collector_streams_rejected_total", `reason="registration_queue_full"`); rf > 0 {
			s.Note += fmt.Sprintf(", %s streams refused for registration capacity", fnum(rf, 0))
		}
		s.StatusReports, s.StatusUnchanged, s.StatusTxns = recv, unch, wr
		// A lost connection silences every node on it until it is back:
		// the first thing to look at when Unknowns come in clusters.
		if as, bs := a.sims["sim"], b.sims["sim"]; as != nil && bs != nil {
			if lost := counterDelta(as, bs, "nodepulse_sim_connections_lost_total"); lost > 0 {
				s.Note += fmt.Sprintf("; simulator: %s connections lost (left READY)", fnum(lost, 0))
			}
		}
	}
	if a.mon != nil && b.mon != nil && system == "nodepulse" {
		hw := counterDelta(a.mon, b.mon, "nodepulse_monitor_health_writes_total")
		passes := counterDelta(a.mon, b.mon, "nodepulse_monitor_health_pass_duration_seconds_count")
		pd := SubBuckets(b.mon.Buckets("nodepulse_monitor_health_pass_duration_seconds"), a.mon.Buckets("nodepulse_monitor_health_pass_duration_seconds"))
		s.MonitorPasses, s.MonitorHealthWrites = passes, hw
		s.MonitorPassP50, s.MonitorPassMax = PromQuantile(0.5, pd), PromMaxBound(pd)
		note := fmt.Sprintf("monitor: %s health passes (p50 %s, longest ≤ %s), %s health writes (batched into fenced Txns)",
			fnum(passes, 0), fdur(s.MonitorPassP50), fdur(s.MonitorPassMax), fnum(hw, 0))
		if s.Note != "" {
			s.Note += "; "
		}
		s.Note += note
	}
	r.report.Stages = append(r.report.Stages, s)
	return s
}

// schedMetric is every nodepulse binary's Go scheduling latency histogram.
const schedMetric = admin.SchedLatencyName

// schedWaits is the scheduling latency of every process scraped in both
// snapshots (or, for one started within the stage, in the second: all of
// its life).
func schedWaits(a, b *snap) map[string]*SchedWait {
	pairs := map[string][2]Metrics{"collector": {a.coll, b.coll}, "monitor": {a.mon, b.mon}}
	for role, m := range b.sims {
		pairs[role] = [2]Metrics{a.sims[role], m}
	}
	out := map[string]*SchedWait{}
	for role, p := range pairs {
		if p[1] == nil {
			continue
		}
		bb := p[1].Buckets(schedMetric)
		if p[0] != nil && !restarted(p[0], p[1]) {
			bb = SubBuckets(bb, p[0].Buckets(schedMetric))
		}
		if sw := schedWaitOf(bb); sw != nil {
			out[role] = sw
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func schedWaitOf(bb []PromBucket) *SchedWait {
	n := totalOf(bb)
	if n <= 0 {
		return nil
	}
	sw := &SchedWait{Waits: n, P50: PromQuantile(0.5, bb), P99: PromQuantile(0.99, bb), P999: PromQuantile(0.999, bb)}
	for _, b := range bb {
		if b.Le == 0.01 { // one of admin.SchedLatencyBuckets, which its test keeps
			sw.Over10ms = (n - b.Count) / n
		}
	}
	return sw
}

func totalOf(b []PromBucket) float64 {
	if len(b) == 0 {
		return 0
	}
	return b[len(b)-1].Count
}

func (r *runner) write() error {
	f, err := os.Create(filepath.Join(r.out, "report.md"))
	if err != nil {
		return err
	}
	r.report.Markdown(f, "chart.svg")
	if err := f.Close(); err != nil {
		return err
	}
	svg := Chart(r.report)
	if err := os.WriteFile(filepath.Join(r.out, "chart.svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	r.report.Text(r.log)
	b, err := MarshalReport(r.report)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.out, "report.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(r.log, "\nwrote %s/report.json, report.md, chart.svg (logs in %s)\n", r.out, r.logDir)
	return nil
}

// counterDelta is later − earlier of a counter, or later alone when the
// counter was reset in between (the process restarted).
// restarted reports whether a and b were scraped from different processes
// (their process_start_time_seconds differ).
func restarted(a, b Metrics) bool {
	x, y := a.Value("process_start_time_seconds"), b.Value("process_start_time_seconds")
	return !math.IsNaN(x) && !math.IsNaN(y) && x != y
}

func counterDelta(a, b Metrics, name string, match ...string) float64 {
	x, y := a.Value(name, match...), b.Value(name, match...)
	if math.IsNaN(x) {
		x = 0
	}
	if math.IsNaN(y) {
		return 0
	}
	if y < x {
		return y
	}
	return y - x
}

// etcdKeys counts etcd's keys by their first two path segments
// (/nodepulse/leases, /registry/leases ...).
func (r *runner) etcdKeys(ctx context.Context) map[string]int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{strings.TrimPrefix(r.etcdURL, "http://")}, DialTimeout: 5 * time.Second,
		MaxCallRecvMsgSize: 512 << 20})
	if err != nil {
		return nil
	}
	defer cli.Close()
	out := map[string]int{}
	key := "\x00"
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := cli.Get(cctx, key, clientv3.WithFromKey(), clientv3.WithKeysOnly(), clientv3.WithLimit(50000))
		cancel()
		if err != nil {
			return out
		}
		for _, kv := range resp.Kvs {
			parts := strings.SplitN(string(kv.Key), "/", 4)
			k := string(kv.Key)
			if len(parts) >= 3 {
				k = "/" + parts[1] + "/" + parts[2]
			}
			out[k]++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
