// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

// TestStreamMemory measures what one connected node costs the collector:
// memory (Go heap, goroutine stacks, RSS) per open Report stream, goroutines
// per stream, and CPU per lease renewal. It is opt-in:
//
//	NODEPULSE_STREAMMEM_NODES=10000 go test -count=1 -run TestStreamMemory -v -timeout 20m ./app
//
// The real collector (this package's App: grpcserver with its interceptor
// chain, ingest, persist, feed) serves on 127.0.0.1; the reporters are a
// child process (this test binary again), so the numbers are the server's
// alone. Settings (environment):
//
//	NODEPULSE_STREAMMEM_NODES        streams N (required)
//	NODEPULSE_STREAMMEM_CONNS        gRPC connections they share (default N/100, at least 1)
//	NODEPULSE_STREAMMEM_RENEW        renewal interval per stream (default 1s: N renewals/s)
//	NODEPULSE_STREAMMEM_HOLD         steady window measured for CPU (default 20s)
//	NODEPULSE_STREAMMEM_WRITEBUF     the collector's --grpc.write-buffer-size (default 0: grpc-go's)
//	NODEPULSE_STREAMMEM_READBUF      the collector's --grpc.read-buffer-size (default 0: grpc-go's)
//	NODEPULSE_STREAMMEM_PROFILE      write <this>.cpu (steady window) and <this>.heap (at the end)
//	NODEPULSE_STREAMMEM_ETCD         etcd endpoints; default an in-process memstore (whose own
//	                                 memory is then part of the heap: compare runs, or use etcd)
//	NODEPULSE_STREAMMEM_BARE=1       serve the same streams from a bare grpc.NewServer() whose
//	                                 Report handler only acks each message: grpc-go's own cost per
//	                                 stream and connection, the floor under the collector's figures
//
// Memory is the difference between the idle collector and the collector
// with N streams attached, divided by N. Wrap runs in
// `flock /tmp/np-bench.lock` on shared machines.
func TestStreamMemory(t *testing.T) {
	if os.Getenv(streamMemClientEnv) != "" {
		streamMemClient(t)
		return
	}
	n, _ := strconv.Atoi(os.Getenv("NODEPULSE_STREAMMEM_NODES"))
	if n <= 0 {
		t.Skip("set NODEPULSE_STREAMMEM_NODES to run (opt-in measurement)")
	}
	conns := max(1, n/100)
	if v, err := strconv.Atoi(os.Getenv("NODEPULSE_STREAMMEM_CONNS")); err == nil && v > 0 {
		conns = v
	}
	renew := envDuration("NODEPULSE_STREAMMEM_RENEW", time.Second)
	hold := envDuration("NODEPULSE_STREAMMEM_HOLD", 20*time.Second)

	bare := os.Getenv("NODEPULSE_STREAMMEM_BARE") == "1"
	cfg := DefaultConfig()
	if ep := os.Getenv("NODEPULSE_STREAMMEM_ETCD"); ep != "" {
		cfg.Etcd.Endpoints = flagenv.StringList(strings.Split(ep, ","))
		cfg.Etcd.Prefix = fmt.Sprintf("/streammem-%d/", time.Now().UnixNano())
	} else {
		mem := memstore.New(memstore.Config{History: 100})
		defer mem.Close()
		cfg.Store = mem
	}
	cfg.GRPC.TLS.Insecure = true
	// Transport settings measured per setting (docs/benchmarks.md).
	if v, err := strconv.Atoi(os.Getenv("NODEPULSE_STREAMMEM_WRITEBUF")); err == nil {
		cfg.GRPC.WriteBufferSize = v
	}
	if v, err := strconv.Atoi(os.Getenv("NODEPULSE_STREAMMEM_READBUF")); err == nil {
		cfg.GRPC.ReadBufferSize = v
	}
	cfg.GRPC.ListenAddress = "127.0.0.1:0"
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.ID = "streammem"
	cfg.Ingest.MaxStreams = n + 10
	cfg.Persist.QueueSize = max(cfg.Persist.QueueSize, n)
	var srv streamMemServer
	if bare {
		b, err := startBareServer()
		if err != nil {
			t.Fatal(err)
		}
		defer b.stop()
		srv = b
	} else {
		a, err := New(cfg, zap.NewNop(), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		defer func() { cancel(); <-done }()
		for a.Ready() != nil {
			time.Sleep(10 * time.Millisecond)
		}
		srv = a
	}
	time.Sleep(time.Second)
	before := sampleMem()

	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamMemory$", "-test.v=false")
	cmd.Env = append(os.Environ(), streamMemClientEnv+"="+srv.GRPCAddr(),
		fmt.Sprintf("NODEPULSE_STREAMMEM_NODES=%d", n), fmt.Sprintf("NODEPULSE_STREAMMEM_CONNS=%d", conns),
		"NODEPULSE_STREAMMEM_RENEW="+renew.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	renewals := atomic.Int64{}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "attached":
				close(ready)
			case strings.HasPrefix(line, "renewals "):
				v, _ := strconv.ParseInt(strings.TrimPrefix(line, "renewals "), 10, 64)
				renewals.Store(v)
			default:
				fmt.Fprintln(os.Stderr, "client:", line)
			}
		}
	}()
	start := time.Now()
	select {
	case <-ready:
	case <-time.After(10 * time.Minute):
		t.Fatalf("only %d of %d streams attached after 10m", srv.Streams(), n)
	}
	t.Logf("%d streams over %d connections attached in %s", srv.Streams(), conns, time.Since(start).Round(time.Millisecond))
	// Let the attach checkpoints and first statuses settle.
	time.Sleep(max(5*time.Second, 2*renew))
	prof := os.Getenv("NODEPULSE_STREAMMEM_PROFILE")
	if prof != "" {
		f, err := os.Create(prof + ".cpu")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_ = pprof.StartCPUProfile(f)
	}
	r0, c0, w0 := renewals.Load(), cpuTime(), time.Now()
	time.Sleep(hold)
	r1, c1, w1 := renewals.Load(), cpuTime(), time.Now()
	if prof != "" {
		pprof.StopCPUProfile()
	}
	steady := sampleMem() // RSS as the process runs, without a forced GC
	runtime.GC()
	after := sampleMem()
	if prof != "" {
		f, err := os.Create(prof + ".heap")
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		_ = f.Close()
		if f, err = os.Create(prof + ".goroutines"); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 1)
			_ = f.Close()
		}
	}
	if got := srv.Streams(); got != n {
		t.Errorf("%d streams open at the end, want %d", got, n)
	}
	per := func(x, y uint64) float64 { return (float64(x) - float64(y)) / float64(n) }
	wall := w1.Sub(w0).Seconds()
	rate := float64(r1-r0) / wall
	cores := float64(c1-c0) / 1e9 / wall
	t.Logf("N=%d conns=%d GOGC=%q bare=%v", n, conns, os.Getenv("GOGC"), bare)
	t.Logf("per stream: RSS %.0f B (steady, no forced GC) / %.0f B (after GC); heap in use %.0f B, live heap %.0f B, stacks %.0f B (%.0f B scanned per GC), goroutines %.2f",
		per(steady.rss, before.rss), per(after.rss, before.rss), per(steady.heapInuse, before.heapInuse), per(after.heapAlloc, before.heapAlloc),
		per(after.stack, before.stack), per(after.stackScanned, before.stackScanned), float64(after.goroutines-before.goroutines)/float64(n))
	t.Logf("renewals %.0f/s, collector %.3f cores, %.1f µs CPU per renewal; %.3f cores at 10,000 renewals/s",
		rate, cores, cores*1e6/rate, cores/rate*10000)
	fmt.Printf("STREAMMEM n=%d conns=%d rss_per_stream=%.0f rss_after_gc_per_stream=%.0f heap_inuse_per_stream=%.0f live_heap_per_stream=%.0f stack_per_stream=%.0f stack_scanned_per_stream=%.0f goroutines_per_stream=%.2f renewals_per_s=%.0f cores=%.3f cores_at_10k=%.3f\n",
		n, conns, per(steady.rss, before.rss), per(after.rss, before.rss), per(steady.heapInuse, before.heapInuse), per(after.heapAlloc, before.heapAlloc),
		per(after.stack, before.stack), per(after.stackScanned, before.stackScanned), float64(after.goroutines-before.goroutines)/float64(n), rate, cores, cores/rate*10000)
}

const streamMemClientEnv = "NODEPULSE_STREAMMEM_CLIENT"

// streamMemServer is what the harness measures: the collector's App, or
// the bare grpc-go server below.
type streamMemServer interface {
	GRPCAddr() string
	Streams() int
}

// bareServer is grpc-go with nothing of nodepulse's: default server
// options, a plain TCP listener, and a Report handler that acknowledges
// every message without looking at it. Its cost per stream is what any
// collector built on grpc-go pays before doing any work.
type bareServer struct {
	collectorv1.UnimplementedCollectorServiceServer
	lis     net.Listener
	srv     *grpc.Server
	streams atomic.Int64
}

func startBareServer() (*bareServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	b := &bareServer{lis: lis, srv: grpc.NewServer()}
	collectorv1.RegisterCollectorServiceServer(b.srv, b)
	go func() { _ = b.srv.Serve(lis) }()
	return b, nil
}

func (b *bareServer) Report(s grpc.BidiStreamingServer[collectorv1.ReportRequest, collectorv1.ReportResponse]) error {
	b.streams.Add(1)
	defer b.streams.Add(-1)
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		if err := s.Send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: m.GetSeq()}}}); err != nil {
			return err
		}
	}
}

func (b *bareServer) GRPCAddr() string { return b.lis.Addr().String() }
func (b *bareServer) Streams() int     { return int(b.streams.Load()) }
func (b *bareServer) stop()            { b.srv.Stop() }

type memSample struct {
	rss, heapInuse, heapAlloc, stack uint64
	// stackScanned: stack bytes the last GC cycle scanned, the part of
	// the stacks that costs mark work every cycle (gctrace's "stacks").
	stackScanned uint64
	goroutines   int
}

func sampleMem() memSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	scanned := []metrics.Sample{{Name: "/gc/scan/stack:bytes"}}
	metrics.Read(scanned)
	return memSample{rss: vmRSS(), heapInuse: ms.HeapInuse, heapAlloc: ms.HeapAlloc, stack: ms.StackInuse,
		stackScanned: scanned[0].Value.Uint64(), goroutines: runtime.NumGoroutine()}
}

func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil && d > 0 {
		return d
	}
	return def
}

// streamMemClient is the reporters' side, run in the child process: N
// streams over C connections; each registers, sends a realistic status,
// then renews every interval (jittered start) and reads its acks. It prints
// "attached" once every stream is registered and its status acked, then
// "renewals <acked>" every second.
func streamMemClient(t *testing.T) {
	addr := os.Getenv(streamMemClientEnv)
	n, _ := strconv.Atoi(os.Getenv("NODEPULSE_STREAMMEM_NODES"))
	conns, _ := strconv.Atoi(os.Getenv("NODEPULSE_STREAMMEM_CONNS"))
	renew := envDuration("NODEPULSE_STREAMMEM_RENEW", time.Second)
	cc := make([]collectorv1.CollectorServiceClient, conns)
	for i := range cc {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		cc[i] = collectorv1.NewCollectorServiceClient(c)
	}
	var attached, acked atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200) // registrations in flight
	for i := range n {
		wg.Add(1)
		go func() {
			sem <- struct{}{}
			name := fmt.Sprintf("mem-%06d", i)
			s, err := cc[i%conns].Report(context.Background())
			if err != nil {
				panic(err)
			}
			for {
				if err := s.Send(&collectorv1.ReportRequest{Seq: 1, Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{
					NodeName: name, ReporterId: "streammem", Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "z1"}}}}); err != nil {
					panic(err)
				}
				if _, err := s.Recv(); err == nil {
					break
				}
				// Refused (registration queue full): back off and retry on a new stream.
				time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
				if s, err = cc[i%conns].Report(context.Background()); err != nil {
					panic(err)
				}
			}
			now := time.Now()
			if err := s.Send(&collectorv1.ReportRequest{Seq: 2, Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: memStatus(i, now)}}}); err != nil {
				panic(err)
			}
			if r, err := s.Recv(); err != nil || r.GetAck().GetError() != nil {
				panic(fmt.Sprintf("status: %v %v", r, err))
			}
			<-sem
			attached.Add(1)
			wg.Done()
			go func() {
				for {
					r, err := s.Recv()
					if err != nil {
						return
					}
					if r.GetAck() != nil {
						acked.Add(1)
					}
				}
			}()
			time.Sleep(time.Duration(rand.Int64N(int64(renew))))
			tk := time.NewTicker(renew)
			for seq := uint64(3); ; seq++ {
				if err := s.Send(&collectorv1.ReportRequest{Seq: seq, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
					RenewTime: timestamppb.Now(), LeaseDurationSeconds: 40}}}); err != nil {
					return
				}
				<-tk.C
			}
		}()
	}
	wg.Wait()
	fmt.Println("attached")
	for {
		time.Sleep(time.Second)
		fmt.Printf("renewals %d\n", acked.Load())
	}
}

// memStatus is a status shaped like the simulator's (setters output).
func memStatus(i int, now time.Time) *nodev1.NodeStatus {
	since := timestamppb.New(now.Add(-time.Minute))
	hb := timestamppb.New(now)
	cond := func(typ, st, reason, msg string) *nodev1.NodeCondition {
		return &nodev1.NodeCondition{Type: typ, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: hb, LastTransitionTime: since}
	}
	q := map[string]string{"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi", "pods": "110", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
	alloc := map[string]string{"cpu": "3900m", "memory": "15Gi", "ephemeral-storage": "90Gi", "pods": "110", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
	return &nodev1.NodeStatus{
		Capacity: q, Allocatable: alloc,
		Conditions: []*nodev1.NodeCondition{
			cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []*nodev1.NodeAddress{{Type: "InternalIP", Address: fmt.Sprintf("10.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))},
			{Type: "Hostname", Address: fmt.Sprintf("mem-%06d", i)}},
		DaemonEndpoints: &nodev1.NodeDaemonEndpoints{ReporterEndpoint: &nodev1.DaemonEndpoint{Port: 9192}},
		NodeInfo: &nodev1.NodeSystemInfo{MachineId: fmt.Sprintf("%032x", i), SystemUuid: fmt.Sprintf("%016x-sim", i), BootId: fmt.Sprintf("boot-%x", i),
			KernelVersion: "6.8.0-sim", OsImage: "nodepulse simulated Linux", ContainerRuntimeVersion: "none", ReporterVersion: "dev",
			OperatingSystem: "linux", Architecture: "amd64"},
	}
}
