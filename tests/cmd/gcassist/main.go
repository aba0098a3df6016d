// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command gcassist reproduces, with neither gRPC nor nodepulse in it, the
// stall the scale benchmark finds in the collector's GC cycles
// (docs/adr/0006-empty-renewals-and-ack-senders.md): many goroutines
// parked one per stream, a fixed number of them woken each second, each
// allocating a little when it wakes, as grpc-go's Recv does on a stream's
// own goroutine.
//
// The Go runtime resets every goroutine's assist credit when a cycle
// starts, and a goroutine in debt that cannot take the background
// workers' credit marks at least 64 KB (gcOverAssistWork) before it goes
// on. Woken goroutines that are all different therefore do the cycle's
// marking themselves, 64 KB each, as fast as they are woken, and on a
// busy machine the marking they ask for is more CPU than there is. With
// --mode=shared the woken goroutines hand the allocation to a few worker
// goroutines: the same allocations, the same heap and stacks to mark, but
// the debt is paid by goroutines that carry credit from one wake to the
// next.
//
//	go run ./tests/cmd/gcassist --mode=own
//	go run ./tests/cmd/gcassist --mode=shared
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/nodepulse/nodepulse/tests/bench"
)

const burnEnv = "GCASSIST_BURN"

type config struct {
	goroutines  int
	rate        float64
	liveMiB     int
	stackBytes  int
	garbageMiBs float64
	duration    time.Duration
	warmup      time.Duration
	mode        string
	workers     int
	gcPercent   int
	burn        float64
}

func main() {
	if v := os.Getenv(burnEnv); v != "" {
		burn(v)
		return
	}
	var c config
	fs := flag.NewFlagSet("gcassist", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gcassist [flags]\n\nWakes --rate of --goroutines parked goroutines a second over a live heap of\n--live-mib and reports how long a wake took to be served, overall and over the\nseconds no GC cycle touched. See the package comment for what it shows.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&c.goroutines, "goroutines", 100_000, "parked goroutines (streams)")
	fs.Float64Var(&c.rate, "rate", 10_000, "wakes per second, round robin over the goroutines (renewals)")
	fs.IntVar(&c.liveMiB, "live-mib", 450, "live heap of pointer-holding objects to mark each cycle")
	fs.IntVar(&c.stackBytes, "stack-bytes", 4096, "stack each goroutine holds while parked (approximate)")
	fs.Float64Var(&c.garbageMiBs, "garbage-mibs", 6, "garbage per second from one other goroutine, which paces the cycles")
	fs.DurationVar(&c.duration, "duration", 90*time.Second, "measured time, after --warmup")
	fs.DurationVar(&c.warmup, "warmup", 10*time.Second, "time after setup before measuring")
	fs.StringVar(&c.mode, "mode", "own", "own: a woken goroutine allocates itself; shared: it hands the allocation to --workers goroutines")
	fs.IntVar(&c.workers, "workers", 4, "allocating goroutines with --mode=shared")
	fs.IntVar(&c.gcPercent, "gc-percent", 75, "GC target (the collector's default)")
	fs.Float64Var(&c.burn, "burn", 0.8, "cores a child process keeps busy, standing in for the simulator, etcd and the monitor on the benchmark's machine (0: none)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if c.mode != "own" && c.mode != "shared" {
		fmt.Fprintf(os.Stderr, "gcassist: --mode %q: want own or shared\n", c.mode)
		os.Exit(2)
	}
	if !strings.Contains(os.Getenv("GODEBUG"), "gctrace=1") {
		// The cycles' times come from the runtime's own trace, which
		// only an environment variable read at start turns on.
		self, err := os.Executable()
		if err == nil {
			err = syscall.Exec(self, os.Args, append(os.Environ(), "GODEBUG=gctrace=1"))
		}
		fmt.Fprintln(os.Stderr, "gcassist: re-executing with GODEBUG=gctrace=1:", err)
		os.Exit(1)
	}
	trace, err := captureGCTrace()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gcassist:", err)
		os.Exit(1)
	}
	if err := run(c, trace); err != nil {
		fmt.Fprintln(os.Stderr, "gcassist:", err)
		os.Exit(1)
	}
}

// obj is a live heap object with pointers, so marking it costs scan work.
type obj struct {
	next, other *obj
	_           [6]uint64 // the object's size: 64 bytes, like a small server object
}

var (
	live      []*obj
	allocSink atomic.Pointer[[]any]
	base      = time.Now()
)

// hist counts latencies in log-spaced buckets: bucket i holds up to
// 2^(i/4) µs.
const buckets = 120

type hist [buckets]atomic.Uint32

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(int(math.Ceil(4*math.Log2(us))), buckets-1)
}

func bucketUpper(i int) time.Duration {
	return time.Duration(math.Pow(2, float64(i)/4) * float64(time.Microsecond))
}

type recorder struct {
	start   int64 // ns since base when measuring starts
	seconds []hist
}

func (r *recorder) record(sent int64) {
	now := int64(time.Since(base))
	if sent < r.start {
		return
	}
	s := int((sent - r.start) / int64(time.Second))
	if s >= len(r.seconds) {
		return
	}
	r.seconds[s][bucketOf(time.Duration(now-sent))].Add(1)
}

func run(c config, trace *gcTrace) error {
	debug.SetGCPercent(c.gcPercent)
	if c.burn > 0 {
		stop, err := startBurn(c.burn)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Printf("gcassist: mode=%s goroutines=%d rate=%.0f/s live=%d MiB stack≈%d B garbage=%.1f MiB/s GOGC=%d burn=%.2f cores GOMAXPROCS=%d\n",
		c.mode, c.goroutines, c.rate, c.liveMiB, c.stackBytes, c.garbageMiBs, c.gcPercent, c.burn, runtime.GOMAXPROCS(0))

	n := c.liveMiB << 20 / int(unsafe.Sizeof(obj{}))
	// Linked at random, as a server's objects are: marking follows
	// pointers across the whole heap, not along one span after another.
	live = make([]*obj, n)
	for i := range live {
		live[i] = &obj{}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, o := range live {
		o.next = live[rng.IntN(n)]
		o.other = live[(i+1)%n]
	}
	rng.Shuffle(n, func(i, j int) { live[i], live[j] = live[j], live[i] })

	rec := &recorder{seconds: make([]hist, int(c.duration/time.Second)+1)}
	var work chan int64
	if c.mode == "shared" {
		work = make(chan int64, 4096)
		for range c.workers {
			go func() {
				for sent := range work {
					allocate()
					rec.record(sent)
				}
			}()
		}
	}
	chans := make([]chan int64, c.goroutines)
	depth := max(c.stackBytes/frameBytes, 1)
	ready := make(chan struct{}, c.goroutines)
	for i := range chans {
		chans[i] = make(chan int64, 1)
		go park(depth, chans[i], ready, rec, work)
	}
	for range chans {
		<-ready
	}
	go garbage(c.garbageMiBs)

	time.Sleep(c.warmup)
	before := readMetrics()
	rec.start = int64(time.Since(base))
	end := rec.start + int64(c.duration)

	// Dispatch every millisecond, round robin.
	var sent, dropped float64
	next := 0
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		<-tick.C
		now := int64(time.Since(base))
		if now >= end {
			break
		}
		due := float64(now-rec.start) / float64(time.Second) * c.rate
		for ; sent < due; sent++ {
			select {
			case chans[next] <- int64(time.Since(base)):
			default:
				dropped++
			}
			next = (next + 1) % len(chans)
		}
	}
	time.Sleep(100 * time.Millisecond)
	after := readMetrics()
	report(c, rec, trace.cycles(), after.minus(before), dropped)
	return nil
}

// frameBytes is roughly what one park frame takes (its locals below).
const frameBytes = 192

// park recurses to hold a stack of about depth frames, each with pointers
// to scan, then serves its channel from the bottom, as a stream's handler
// waits in Recv under gRPC's and the handler's frames.
//
//go:noinline
func park(depth int, ch chan int64, ready chan<- struct{}, rec *recorder, work chan<- int64) {
	var ptrs [8]*obj
	var pad [12]uint64
	ptrs[depth%8] = live[depth%len(live)]
	if depth > 1 {
		park(depth-1, ch, ready, rec, work)
		keep(&ptrs, &pad)
		return
	}
	ready <- struct{}{}
	for sent := range ch {
		if work != nil {
			work <- sent // no allocation on this goroutine
			continue
		}
		allocate()
		rec.record(sent)
	}
	keep(&ptrs, &pad)
}

//go:noinline
func keep(*[8]*obj, *[12]uint64) {}

// allocate makes the one small pointer-holding allocation a stream's Recv
// makes for each message (grpc-go's mem.BufferSlice).
//
//go:noinline
func allocate() {
	s := make([]any, 0, 1)
	allocSink.Store(&s)
}

// garbage allocates at a steady rate from one goroutine, so the cycles come
// as they do in the collector, without adding allocating goroutines.
func garbage(mibs float64) {
	if mibs <= 0 {
		return
	}
	const chunk = 1024
	var keepOne atomic.Pointer[[]*obj]
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	perTick := int(mibs * (1 << 20) / 100 / chunk)
	for range t.C {
		for range perTick {
			b := make([]*obj, chunk/8)
			keepOne.Store(&b)
		}
	}
}

type runtimeStats struct {
	cycles            uint64
	assist, mark, all float64 // CPU seconds
}

func (a runtimeStats) minus(b runtimeStats) runtimeStats {
	return runtimeStats{a.cycles - b.cycles, a.assist - b.assist, a.mark - b.mark, a.all - b.all}
}

func readMetrics() runtimeStats {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		{Name: "/cpu/classes/user:cpu-seconds"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
	}
	metrics.Read(s)
	f := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	return runtimeStats{
		cycles: s[0].Value.Uint64(),
		assist: f(1),
		mark:   f(2) + f(3),
		all:    f(4) + f(5),
	}
}

func report(c config, rec *recorder, cycles []bench.GCCycle, rs runtimeStats, dropped float64) {
	// A second is touched when a cycle ran in it, or ended in the one
	// before (the wakes it held up are served then): the bench's rule.
	touched := make([]bool, len(rec.seconds))
	startSec := float64(rec.start) / float64(time.Second)
	var lengths []string
	for _, cy := range cycles {
		from, to := int(math.Floor(cy.Start-startSec)), int(math.Floor(cy.End()-startSec))+1
		if to < 0 || from >= len(touched) {
			continue
		}
		lengths = append(lengths, fmt.Sprintf("%.2f s", cy.Seconds))
		for t := max(from, 0); t <= to && t < len(touched); t++ {
			touched[t] = true
		}
	}
	var all, quiet [buckets]uint64
	nTouched := 0
	for s := range rec.seconds {
		if touched[s] {
			nTouched++
		}
		for b := range buckets {
			v := uint64(rec.seconds[s][b].Load())
			all[b] += v
			if !touched[s] {
				quiet[b] += v
			}
		}
	}
	fmt.Printf("GC: %d cycles in %s (%s), %.2f CPU-s of mutator assists, %.2f CPU-s of background marking (process CPU %.1f s)\n",
		rs.cycles, c.duration, strings.Join(lengths, ", "), rs.assist, rs.mark, rs.all)
	fmt.Printf("wake → served, all %s:          %s\n", c.duration, summary(&all))
	fmt.Printf("wake → served, %d s no cycle touched: %s\n", len(rec.seconds)-nTouched, summary(&quiet))
	if dropped > 0 {
		fmt.Printf("%.0f wakes dropped: the goroutine had not yet served its previous one\n", dropped)
	}
	worst := make([]int, 0, len(rec.seconds))
	for s := range rec.seconds {
		worst = append(worst, s)
	}
	p99 := func(s int) time.Duration {
		var h [buckets]uint64
		for b := range buckets {
			h[b] = uint64(rec.seconds[s][b].Load())
		}
		return quantile(&h, 0.99)
	}
	sort.Slice(worst, func(i, j int) bool { return p99(worst[i]) > p99(worst[j]) })
	fmt.Print("worst seconds (p99):")
	for _, s := range worst[:min(5, len(worst))] {
		fmt.Printf(" %ds %s%s", s, p99(s).Round(10*time.Microsecond), map[bool]string{true: " (cycle)", false: ""}[touched[s]])
	}
	fmt.Println()
}

func summary(h *[buckets]uint64) string {
	var n uint64
	for _, v := range h {
		n += v
	}
	return fmt.Sprintf("n=%d p50 ≤ %s, p99 ≤ %s, p99.9 ≤ %s, max ≤ %s", n,
		quantile(h, 0.5).Round(time.Microsecond), quantile(h, 0.99).Round(time.Microsecond),
		quantile(h, 0.999).Round(time.Microsecond), quantile(h, 1).Round(time.Microsecond))
}

// quantile is the upper bound of the bucket holding the q-th value.
func quantile(h *[buckets]uint64, q float64) time.Duration {
	var n uint64
	for _, v := range h {
		n += v
	}
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for b, v := range h {
		seen += v
		if seen >= want {
			return bucketUpper(b)
		}
	}
	return bucketUpper(buckets - 1)
}

// gcTrace holds the runtime's gctrace lines, read from this process's own
// stderr (the runtime writes them to file descriptor 2).
type gcTrace struct {
	mu    sync.Mutex
	lines strings.Builder
}

// captureGCTrace points file descriptor 2 at a pipe, keeps the gctrace
// lines that come through it and passes every other line on to the
// original stderr.
func captureGCTrace() (*gcTrace, error) {
	orig, err := syscall.Dup(2)
	if err != nil {
		return nil, fmt.Errorf("capture gctrace: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("capture gctrace: %w", err)
	}
	if err := syscall.Dup3(int(w.Fd()), 2, 0); err != nil {
		return nil, fmt.Errorf("capture gctrace: %w", err)
	}
	os.Stderr = os.NewFile(uintptr(orig), "stderr")
	t := &gcTrace{}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "gc ") {
				t.mu.Lock()
				t.lines.WriteString(line + "\n")
				t.mu.Unlock()
				continue
			}
			fmt.Fprintln(os.Stderr, line)
		}
	}()
	return t, nil
}

// cycles are the cycles so far, in seconds since base (a runtime dates
// them from its own start, a few milliseconds before base).
func (t *gcTrace) cycles() []bench.GCCycle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bench.ParseGCTrace(strings.NewReader(t.lines.String()), "gcassist", 0)
}

// startBurn keeps cores busy in a child process, so the runtime here sees
// the machine the benchmark's collector sees.
func startBurn(cores float64) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("burn: %w", err)
	}
	cmd := exec.Command(self)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") { // its gctrace is not ours
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, burnEnv+"="+strconv.FormatFloat(cores, 'f', -1, 64))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("burn: %w", err)
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }, nil
}

// burn spins goroutines at a duty cycle adding up to v cores, in 10 ms
// periods, until killed.
func burn(v string) {
	cores, err := strconv.ParseFloat(v, 64)
	if err != nil || cores <= 0 {
		fmt.Fprintf(os.Stderr, "gcassist: %s=%q: want a positive number of cores\n", burnEnv, v)
		os.Exit(2)
	}
	n := int(math.Ceil(cores))
	duty := time.Duration(cores / float64(n) * float64(10*time.Millisecond))
	for range n - 1 {
		go spin(duty)
	}
	spin(duty)
}

func spin(duty time.Duration) {
	var x uint64
	for {
		start := time.Now()
		for time.Since(start) < duty {
			x++
		}
		time.Sleep(10*time.Millisecond - duty)
	}
}
