// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/tests/procutil"
	"github.com/nodepulse/nodepulse/tests/promtext"
)

type config struct {
	binDir, out            string
	nodes, perProcess      int
	collectors, monitors   int
	rampRate               float64
	balanceInterval        time.Duration
	settle, down, recovery time.Duration
	basePort               int
	quick, kill            bool
}

const synopsis = `scaleout: 3 collectors, 2 monitors and a three-member etcd on 127.0.0.1, the fleet at one
connection per node over several fleetsim processes; one collector is killed (SIGKILL) and
started again, and the nodes attached to each collector are sampled every second into
nodes.csv and a text chart (chart.txt) in --out.`

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("scaleout", flag.ContinueOnError)
	fs.StringVar(&c.binDir, "bin-dir", "bin", "directory with etcd, collector, monitor and fleetsim")
	fs.StringVar(&c.out, "out", "", "output directory (default .run/scaleout/<time>)")
	fs.IntVar(&c.nodes, "nodes", 15000, "virtual nodes, each on its own connection (with --kill, the two survivors of three collectors must hold them all: at most 2 × 18,000 at a 20,000-descriptor limit; a 2-core machine carries about 15,000 with the whole cluster on it)")
	fs.IntVar(&c.perProcess, "nodes-per-process", 5000, "nodes per simulator process (each holds one fd per node; a process may hold at most 20,000)")
	fs.IntVar(&c.collectors, "collectors", 3, "collectors")
	fs.IntVar(&c.monitors, "monitors", 2, "monitors")
	fs.Float64Var(&c.rampRate, "ramp-rate", 100, "registrations started per second per simulator process")
	fs.DurationVar(&c.balanceInterval, "balance-interval", 10*time.Second, "the collectors' --balance.interval")
	fs.DurationVar(&c.settle, "settle", 60*time.Second, "steady time after every node attached, before the kill")
	fs.DurationVar(&c.down, "down", 60*time.Second, "how long the killed collector stays down")
	fs.DurationVar(&c.recovery, "recovery", 5*time.Minute, "after the restart, the bound for an even spread (±20 %); the run then holds another settle")
	fs.IntVar(&c.basePort, "base-port", 62000, "first of the ports used (etcd 3×2, collectors, monitors, admin ports)")
	fs.BoolVar(&c.kill, "kill", true, "kill a collector and start it again after the first settle (false: ramp and one settle only, e.g. with --collectors=1 for the one-collector row of the scale-out table)")
	fs.BoolVar(&c.quick, "quick", false, "the plumbing only (CI): 1,500 nodes in one process, 2 s balance interval, short stages")
	if err := flagenv.Parse(fs, "NODEPULSE_SCALEOUT", synopsis, args, os.LookupEnv); err != nil {
		return c, err
	}
	if c.quick {
		c.nodes, c.perProcess, c.rampRate, c.balanceInterval = 1500, 1500, 500, 2*time.Second
		c.settle, c.down, c.recovery = 5*time.Second, 10*time.Second, 90*time.Second
	}
	if c.perProcess > 19000 || c.perProcess <= 0 || c.nodes <= 0 || c.collectors < 1 || (c.kill && c.collectors < 2) || c.monitors < 1 {
		return c, errors.New("need --nodes > 0, 0 < --nodes-per-process ≤ 19,000, --collectors ≥ 1 (≥ 2 with --kill), --monitors ≥ 1")
	}
	if c.out == "" {
		c.out = filepath.Join(".run", "scaleout", time.Now().UTC().Format("20060102-150405"))
	}
	return c, nil
}

type stack struct {
	cfg        config
	log        io.Writer
	logDir     string
	bin        func(string) string
	etcdEPs    string
	collectors []*procutil.Proc
	others     []*procutil.Proc
	start      time.Time
	csv        *os.File
	rows       [][]int
	times      []float64
	marks      []string
}

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

func (s *stack) grpcPort(i int) int  { return s.cfg.basePort + 10 + i }
func (s *stack) adminPort(i int) int { return s.cfg.basePort + 30 + i }

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	s := &stack{cfg: cfg, log: out, logDir: filepath.Join(cfg.out, "logs"), bin: func(n string) string { return filepath.Join(cfg.binDir, n) }}
	for _, n := range []string{"etcd", "collector", "monitor", "fleetsim"} {
		if _, err := os.Stat(s.bin(n)); err != nil {
			return fmt.Errorf("missing binary %s (run 'make build' first): %w", s.bin(n), err)
		}
	}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return err
	}
	defer s.stopAll()
	if err := s.startEtcd(ctx); err != nil {
		return err
	}
	for i := range cfg.collectors {
		if err := s.startCollector(ctx, i); err != nil {
			return err
		}
	}
	for i := range cfg.monitors {
		p, err := procutil.Start(fmt.Sprintf("monitor-%d", i+1), s.logDir, s.bin("monitor"), "--grpc.insecure", "--collector.insecure",
			"--grpc.listen-address="+addr(cfg.basePort+20+i), "--admin.listen-address="+addr(cfg.basePort+40+i), "--etcd.endpoints="+s.etcdEPs)
		if err != nil {
			return err
		}
		s.others = append(s.others, p)
		if err := p.WaitHTTP(ctx, "http://"+addr(cfg.basePort+40+i)+"/readyz", 60*time.Second); err != nil {
			return err
		}
	}
	var cols []string
	for i := range cfg.collectors {
		cols = append(cols, addr(s.grpcPort(i)))
	}
	for i, left := 0, cfg.nodes; left > 0; i++ {
		n := min(left, cfg.perProcess)
		left -= n
		p, err := procutil.Start(fmt.Sprintf("fleetsim-%d", i+1), s.logDir, s.bin("fleetsim"), fmt.Sprintf("--nodes=%d", n),
			fmt.Sprintf("--connections=%d", n), fmt.Sprintf("--name-prefix=so%d-", i+1), fmt.Sprintf("--ramp-rate=%g", cfg.rampRate),
			"--collector.insecure", "--collector.addresses="+strings.Join(cols, ","), "--admin.listen-address="+addr(cfg.basePort+50+i))
		if err != nil {
			return err
		}
		s.others = append(s.others, p)
	}
	if s.csv, err = os.Create(filepath.Join(cfg.out, "nodes.csv")); err != nil {
		return err
	}
	defer s.csv.Close()
	head := []string{"seconds"}
	for i := range cfg.collectors {
		head = append(head, fmt.Sprintf("collector%d", i+1))
	}
	fmt.Fprintln(s.csv, strings.Join(append(head, "event"), ","))
	s.start = time.Now()
	fmt.Fprintf(out, "scaleout: %d nodes over %d simulator processes, %d collectors, %d monitors, etcd ×3; output in %s\n",
		cfg.nodes, (cfg.nodes+cfg.perProcess-1)/cfg.perProcess, cfg.collectors, cfg.monitors, cfg.out)

	total := func(r []int) int {
		t := 0
		for _, n := range r {
			t += n
		}
		return t
	}
	even := func(r []int) bool {
		for _, n := range r {
			if d := float64(n) - float64(cfg.nodes)/float64(len(r)); d > 0.2*float64(cfg.nodes)/float64(len(r)) || -d > 0.2*float64(cfg.nodes)/float64(len(r)) {
				return false
			}
		}
		return total(r) == cfg.nodes
	}
	rampBound := time.Duration(float64(cfg.perProcess)/cfg.rampRate*float64(time.Second)) + 2*time.Minute
	t, err := s.until(ctx, "every node attached", rampBound, func(r []int) bool { return total(r) == cfg.nodes })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "every node attached after %s\n", t.Round(time.Second))
	var ws []window
	defer func() {
		if len(ws) == 0 {
			return
		}
		if t, err := s.writeTable(ws); err == nil {
			fmt.Fprintf(out, "\n%s\n", t)
		}
	}()
	// No node is stopped in this run, so every transition to Unknown after
	// the ramp is a false one.
	unknownAtStart := s.measure(ctx).unknown
	falseUnknown := func() error {
		n := s.measure(ctx).unknown - unknownAtStart
		fmt.Fprintf(out, "false Unknown (Ready → Unknown transitions after the ramp, every monitor): %.0f\n", n)
		if n > 0 && !cfg.quick {
			return fmt.Errorf("%.0f nodes went Unknown though no node stopped", n)
		}
		return nil
	}
	w, err := s.hold(ctx, fmt.Sprintf("steady, %d collector(s)", cfg.collectors), cfg.settle)
	ws = append(ws, w)
	if err != nil {
		return err
	}
	if !cfg.kill {
		if err := falseUnknown(); err != nil {
			return err
		}
		return s.writeChart()
	}
	last := cfg.collectors - 1
	held := s.sample()[last]
	s.mark("kill collector")
	s.collectors[last].Kill()
	t, err = s.until(ctx, "killed collector's nodes on the others", 60*time.Second, func(r []int) bool { return total(r)-r[last] == cfg.nodes })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "killed collector %d: every node on the others after %s (it held %d)\n", last+1, t.Round(time.Second), held)
	w, err = s.hold(ctx, fmt.Sprintf("collector %d down", last+1), cfg.down)
	ws = append(ws, w)
	if err != nil {
		return err
	}
	s.mark("restart collector")
	if err := s.startCollector(ctx, last); err != nil {
		return err
	}
	t, err = s.until(ctx, "within ±20 % of even", cfg.recovery, even)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "restarted collector %d: within ±20 %% of even after %s\n", last+1, t.Round(time.Second))
	w, err = s.hold(ctx, "after the restart", cfg.settle)
	ws = append(ws, w)
	if err != nil {
		return err
	}
	if err := falseUnknown(); err != nil {
		return err
	}
	return s.writeChart()
}

func (s *stack) startEtcd(ctx context.Context) error {
	var peers, eps []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("e%d=http://%s", i+1, addr(s.cfg.basePort+2*i+1)))
		eps = append(eps, addr(s.cfg.basePort+2*i))
	}
	s.etcdEPs = strings.Join(eps, ",")
	var ps []*procutil.Proc
	for i := range 3 {
		dir := filepath.Join(s.cfg.out, fmt.Sprintf("etcd-%d", i+1))
		_ = os.RemoveAll(dir)
		client, peer := "http://"+addr(s.cfg.basePort+2*i), "http://"+addr(s.cfg.basePort+2*i+1)
		p, err := procutil.Start(fmt.Sprintf("etcd-%d", i+1), s.logDir, s.bin("etcd"), fmt.Sprintf("--name=e%d", i+1), "--data-dir="+dir,
			"--listen-client-urls="+client, "--advertise-client-urls="+client, "--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster="+strings.Join(peers, ","), "--initial-cluster-state=new", "--log-level=warn")
		if err != nil {
			return err
		}
		s.others = append(s.others, p)
		ps = append(ps, p)
	}
	for i, p := range ps {
		if err := p.WaitHTTP(ctx, "http://"+addr(s.cfg.basePort+2*i)+"/health", 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (s *stack) startCollector(ctx context.Context, i int) error {
	args := []string{"--grpc.insecure", "--grpc.listen-address=" + addr(s.grpcPort(i)), "--admin.listen-address=" + addr(s.adminPort(i)),
		"--etcd.endpoints=" + s.etcdEPs, "--balance.interval=" + s.cfg.balanceInterval.String(), fmt.Sprintf("--max-streams=%d", s.cfg.nodes)}
	p, err := procutil.Start(fmt.Sprintf("collector-%d", i+1), s.logDir, s.bin("collector"), args...)
	if err != nil {
		return err
	}
	if i < len(s.collectors) {
		s.collectors[i] = p
	} else {
		s.collectors = append(s.collectors, p)
	}
	return p.WaitHTTP(ctx, "http://"+addr(s.adminPort(i))+"/readyz", 60*time.Second)
}

// sample reads every collector's open Report streams (0 for one that is
// down) and appends a CSV row.
func (s *stack) sample() []int {
	row := make([]int, len(s.collectors))
	c := &http.Client{Timeout: 2 * time.Second}
	for i, p := range s.collectors {
		if p == nil || p.Exited() {
			continue
		}
		resp, err := c.Get("http://" + addr(s.adminPort(i)) + "/metrics")
		if err != nil {
			continue
		}
		m, err := promtext.Parse(resp.Body)
		resp.Body.Close()
		if err == nil && len(m["nodepulse_collector_streams_open"]) > 0 {
			row[i] = int(m["nodepulse_collector_streams_open"][0].Value)
		}
	}
	at := time.Since(s.start).Seconds()
	s.times = append(s.times, at)
	cells := []string{fmt.Sprintf("%.1f", at)}
	for _, n := range row {
		cells = append(cells, fmt.Sprint(n))
	}
	ev := ""
	if len(s.marks) > len(s.rows) {
		ev = s.marks[len(s.rows)]
	}
	fmt.Fprintln(s.csv, strings.Join(append(cells, ev), ","))
	s.rows = append(s.rows, row)
	s.marks = append(s.marks, "")
	return row
}

// mark names an event on the next sample.
func (s *stack) mark(ev string) {
	for len(s.marks) <= len(s.rows) {
		s.marks = append(s.marks, "")
	}
	s.marks[len(s.rows)] = ev
	fmt.Fprintf(s.log, "%6.0f s  %s\n", time.Since(s.start).Seconds(), ev)
}

// until samples every second until ok holds (nil: for the whole bound) and
// returns how long it took; it fails past the bound or when a process
// other than a killed collector died.
func (s *stack) until(ctx context.Context, what string, bound time.Duration, ok func([]int) bool) (time.Duration, error) {
	from := time.Now()
	for {
		r := s.sample()
		if ok != nil && ok(r) {
			return time.Since(from), nil
		}
		if time.Since(from) >= bound {
			if ok == nil {
				return bound, nil
			}
			return 0, fmt.Errorf("%s: not within %s (nodes per collector %v)", what, bound, r)
		}
		for _, p := range s.others {
			if p.Exited() {
				return 0, fmt.Errorf("%s exited (%v); last log lines:\n%s", p.Name, p.Err(), procutil.Tail(p.Log, 20))
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (s *stack) stopAll() {
	for _, p := range s.collectors {
		if p != nil {
			p.Stop(10 * time.Second)
		}
	}
	for i := len(s.others) - 1; i >= 0; i-- {
		s.others[i].Stop(10 * time.Second)
	}
}
