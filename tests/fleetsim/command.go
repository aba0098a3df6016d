// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/gctarget"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/logging"
	"github.com/nodepulse/nodepulse/services/run"
)

// EnvPrefix: every flag can also be set as NODEPULSE_SIM_<FLAG>, as when
// the simulator was "reporter simulate".
const EnvPrefix = "NODEPULSE_SIM"

const synopsis = `fleetsim: a fleet of virtual nodes in one process.

Usage:
  fleetsim --nodes 10000 --collector.addresses host:9090 --collector.insecure

Each virtual node registers on its own Report stream (multiplexed over
--connections gRPC connections), renews its lease every
--node-lease-duration-seconds/4 with jitter and reports a realistic status
(varied machine shapes, zones, a few nodes under disk pressure) built with the
reporter's real status setters.

Faults (--faults "at 30s stop 10; at 1m partition 5% for 2m", --fault-file, or
POST lines to --control.listen-address/faults):
  [at <offset>] stop <K|fraction|name>                       crash nodes (no Leaving)
  [at <offset>] start <K|fraction|name|all>                  bring stopped nodes back
  [at <offset>] flap <K|fraction|name> every <d> [for <d>]   alternate stop/start
  [at <offset>] memory-pressure <K|fraction|name> [for <d>]  report MemoryPressure=True
  [at <offset>] partition <K|fraction|name> [for <d>]        stop sending, keep streams open
  [at <offset>] clock <±d> [for <d>]                         step every node's clock (message times only)
GET /stats on the control address shows node counts by state.

The admin address serves, beside /metrics and /debug/pprof,
GET /debug/sendbins?from=<unix ms>&to=<unix ms>: the renewals sent in each
100 ms between the two, as JSON, e.g.
  curl "localhost:9192/debug/sendbins?from=$(($(date +%s%3N)-10000))&to=$(date +%s%3N)"
and POST /debug/gc: one garbage collection now, answered with the heap before and
after and how long it took (the benchmark asks for one after its ramp):
  curl -X POST localhost:9192/debug/gc`

// CommandConfig configures the fleetsim command.
type CommandConfig struct {
	Sim            Config
	FaultScript    string
	FaultFile      string
	ControlAddress string
	// RecordFile: append every status sent and durable ack received here
	// (JSONL, see Recorder).
	RecordFile string
	Admin      admin.Config
	Log        logging.Config
	// GCPercent is the Go GC target of the simulator process when the GOGC
	// environment variable is not set (0 keeps Go's default, negative turns
	// it off and needs MemoryLimitMiB).
	GCPercent int
	// MemoryLimitMiB is the process's soft memory limit unless GOMEMLIMIT
	// is set (0: none).
	MemoryLimitMiB int64

	leaseSeconds int
	clockSkews   string
}

// RegisterFlags adds the simulator's flags.
func (c *CommandConfig) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	s := &c.Sim
	fs.IntVar(&s.Nodes, "nodes", d.Nodes, "number of virtual nodes")
	fs.IntVar(&s.Connections, "connections", 0, "gRPC connections to multiplex streams over (0: min(nodes/100, 1000))")
	fs.StringVar(&s.NamePrefix, "name-prefix", d.NamePrefix, "node names are <prefix><index>")
	fs.Float64Var(&s.RampRate, "ramp-rate", d.RampRate, "registrations started per second (0: all at once)")
	fs.BoolVar(&s.IgnoreHints, "ignore-hints", false, "after a Reconnect, open the next stream round-robin instead of on the collector it names (to compare rebalancing with and without hints)")
	fs.IntVar(&c.leaseSeconds, "node-lease-duration-seconds", int(d.LeaseDurationSeconds), "lease duration; renewals every quarter of it")
	fs.DurationVar(&s.StatusReportFrequency, "node-status-report-frequency", d.StatusReportFrequency, "how often an unchanged status is re-sent")
	fs.IntVar(&s.Zones, "zones", d.Zones, "spread nodes over this many zones (topology.kubernetes.io/zone)")
	fs.StringVar(&s.Region, "region", d.Region, "region label of every node")
	fs.IntVar(&s.DiskPressureEvery, "disk-pressure-every", d.DiskPressureEvery, "one node in this many reports DiskPressure=True (0: none)")
	fs.BoolVar(&s.LeaveOnExit, "leave-on-exit", d.LeaveOnExit, "send Leaving on every stream when the simulation stops")
	fs.StringVar(&c.clockSkews, "clock-skews", "", "comma-separated clock skews (e.g. -8760h,-10m,-2m,2m,1h,8760h) given in turn to one node in --clock-skew-every: their every time (renewals, heartbeats, transitions) is off by it; empty: every clock right")
	fs.IntVar(&s.ClockSkewEvery, "clock-skew-every", 10, "with --clock-skews: node i is skewed when i is a multiple of this (10: a tenth of the fleet)")
	fs.StringVar(&c.FaultScript, "faults", "", "fault script, lines separated by ';' (see above)")
	fs.StringVar(&c.FaultFile, "fault-file", "", "file with one fault per line")
	fs.IntVar(&c.GCPercent, "runtime.gc-percent", 400, "Go GC target percentage of the simulator when the GOGC environment variable is not set (0: Go's default, 100). A load generator's garbage collections delay its own sends and the reading of acks: at 100,000 virtual nodes each cycle at a target of 100 stalled them for 1-4 s every 35-70 s, which a benchmark then reports as the collector's latency and as a burst in the offered load; 400 collects about a quarter as often, for ~4x the heap. Negative: off, collect only near --runtime.memory-limit-mib (which it then requires); Go's collection forced every two minutes is skipped too, so a benchmark's load generator stops stalling the load it offers")
	fs.Int64Var(&c.MemoryLimitMiB, "runtime.memory-limit-mib", 0, "soft memory limit of the simulator process in MiB when the GOMEMLIMIT environment variable is not set (0: none); with --runtime.gc-percent=-1 the process collects only when it gets near it")
	fs.StringVar(&c.RecordFile, "record.file", "", "append a JSON line for every status sent (with its bytes) and every durable ack received to this file (the robustness suite's checker reads it); empty records nothing")
	fs.StringVar(&c.ControlAddress, "control.listen-address", "", "HTTP address of the control API (POST /faults, GET /stats); empty disables it")
	s.Collector = defaultCollector()
	s.Collector.RegisterFlags(fs, "collector", s.Collector.Addresses, "collector addresses")
	c.Admin.RegisterFlags(fs, fmt.Sprintf(":%d", admin.ReporterAdmin))
	c.Log.RegisterFlags(fs)
}

// defaultCollector: how a reporter reaches its collectors by default
// (reporter/app's defaults), so a simulated node connects like a real one.
func defaultCollector() grpcclient.Config {
	return grpcclient.Config{
		Addresses:        "127.0.0.1:9090",
		KeepaliveTime:    grpcclient.DefaultKeepaliveTime,
		KeepaliveTimeout: grpcclient.DefaultKeepaliveTimeout,
		MaxRecvMsgSize:   16 << 20,
	}
}

// Main parses args (flags and NODEPULSE_SIM_* environment) and runs the
// simulation until ctx is done: the whole fleetsim command.
func Main(ctx context.Context, args []string) error {
	var cfg CommandConfig
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := flagenv.Parse(fs, EnvPrefix, synopsis, args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Sim.LeaseDurationSeconds = int32(cfg.leaseSeconds)
	if cfg.clockSkews != "" {
		for f := range strings.SplitSeq(cfg.clockSkews, ",") {
			d, err := time.ParseDuration(strings.TrimPrefix(strings.TrimSpace(f), "+"))
			if err != nil {
				return fmt.Errorf("--clock-skews: %q: %w", f, err)
			}
			cfg.Sim.ClockSkews = append(cfg.Sim.ClockSkews, d)
		}
		if cfg.Sim.ClockSkewEvery <= 0 {
			return fmt.Errorf("--clock-skew-every must be positive with --clock-skews, got %d", cfg.Sim.ClockSkewEvery)
		}
	}
	lg, err := logging.New(cfg.Log, "fleetsim")
	if err != nil {
		return err
	}
	defer func() { _ = lg.Sync() }()
	if _, err := gctarget.ApplyWithLimit(lg, cfg.GCPercent, cfg.MemoryLimitMiB); err != nil {
		return fmt.Errorf("--runtime.gc-percent=%d: %w: set --runtime.memory-limit-mib or GOMEMLIMIT", cfg.GCPercent, err)
	}
	logging.RedirectGRPC(lg)
	return RunSimulation(ctx, cfg, lg)
}

// RunSimulation runs a simulation until ctx is done.
func RunSimulation(ctx context.Context, cfg CommandConfig, lg *zap.Logger) error {
	script := cfg.FaultScript
	if cfg.FaultFile != "" {
		b, err := os.ReadFile(cfg.FaultFile)
		if err != nil {
			return fmt.Errorf("--fault-file: %w", err)
		}
		script += "\n" + string(b)
	}
	faults, err := ParseScript(script)
	if err != nil {
		return err
	}
	cfg.Sim.Faults = faults
	rec, err := OpenRecorder(cfg.RecordFile, time.Now().UnixNano())
	if err != nil {
		return err
	}
	defer rec.Close()
	cfg.Sim.Record = rec
	if cfg.Sim.Collector.TLS.Insecure {
		lg.Warn("collector connections are PLAINTEXT (--collector.insecure): development only")
	} else if cfg.Sim.Collector.TLS.CertFile != "" {
		lg.Warn("all virtual nodes present the same client certificate; a collector that checks the certificate's node name against node_name will refuse them")
	}
	reg := admin.NewRegistry()
	sim, err := New(cfg.Sim, lg, NewMetrics(reg))
	if err != nil {
		return err
	}
	ad, err := admin.New(cfg.Admin, lg, reg)
	if err != nil {
		return err
	}
	var g run.Group
	g.Add("simulation", run.Func(sim.Run))
	if ad != nil {
		// The renewals sent per 100 ms, which the benchmark compares with
		// the same renewals binned by arrival at the collector.
		ad.Handle("GET /debug/sendbins", sim.SendBinsHandler())
		// A garbage collection on request, outside measured load (see
		// CollectHandler).
		ad.Handle("/debug/gc", CollectHandler())
		g.Add("admin", run.Func(ad.Run))
	}
	if cfg.ControlAddress != "" {
		ln, err := net.Listen("tcp", cfg.ControlAddress)
		if err != nil {
			return fmt.Errorf("control listen on %s: %w", cfg.ControlAddress, err)
		}
		g.Add("control", run.Func(func(ctx context.Context) error { return sim.ServeControl(ctx, ln) }))
	}
	// Leaving goes out on every stream at shutdown; give it time at scale.
	return g.Run(ctx, 30*time.Second)
}
