// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package app assembles the reporter: host probe, status setters and the
// heartbeat stream to the collectors, plus the admin endpoint. It is public
// so tests/ can run a reporter in-process (docs/contracts.md).
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/internal/heartbeat"
	"github.com/nodepulse/nodepulse/reporter/internal/podagent"
	"github.com/nodepulse/nodepulse/reporter/probe"
	"github.com/nodepulse/nodepulse/reporter/runtimeinfo"
	"github.com/nodepulse/nodepulse/reporter/setters"
	"github.com/nodepulse/nodepulse/services/bootstrap"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/identity"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/run"
	"github.com/nodepulse/nodepulse/services/version"
)

const synopsis = `reporter: reports this machine's health to the nodepulse collectors.

Usage:
  reporter [flags]            run the node reporter (one per machine)

It registers the node, renews its lease every --node-lease-duration-seconds/4,
computes the node status (capacity, allocatable, pressure conditions, Ready)
every --node-status-update-frequency and sends it when it changed or every
--node-status-report-frequency, exactly like the kubelet's node-status loop.`

// App is a configured reporter.
type App struct {
	cfg    Config
	lg     *zap.Logger
	server *bootstrap.Server // the admin endpoint, and what Run runs
	conn   *grpc.ClientConn
	hb     *heartbeat.Client
	prober *probe.Prober
	res    probe.Resolver
	// runtime knows the host's container runtime version.
	runtime *runtimeinfo.Watcher
	setCfg  setters.Config
	hold    setters.PressureHold

	// lastErr de-duplicates setter error logs: a broken probe would
	// otherwise log the same line every 10 seconds.
	mu      sync.Mutex
	lastErr string
}

// New validates cfg, dials the collectors (lazily) and opens the admin port.
func New(cfg Config, lg *zap.Logger, reg *prometheus.Registry) (*App, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("--node-name is empty and the host name could not be read")
	}
	if cfg.MaxPods < 0 {
		return nil, fmt.Errorf("--max-pods must be ≥ 0, got %d", cfg.MaxPods)
	}
	thresholds, err := setters.ParseThresholds(cfg.EvictionHard)
	if err != nil {
		return nil, fmt.Errorf("--eviction-hard: %w", err)
	}
	kubeRes, err := setters.ParseReserved(cfg.KubeReserved)
	if err != nil {
		return nil, fmt.Errorf("--kube-reserved: %w", err)
	}
	sysRes, err := setters.ParseReserved(cfg.SystemReserved)
	if err != nil {
		return nil, fmt.Errorf("--system-reserved: %w", err)
	}
	if cfg.NodeIP != "" && net.ParseIP(cfg.NodeIP) == nil {
		return nil, fmt.Errorf("--node-ip %q is not an IP address", cfg.NodeIP)
	}
	external, err := setters.ParseExternalAddresses(cfg.ExternalAddresses)
	if err != nil {
		return nil, fmt.Errorf("--external-address: %w", err)
	}
	rtCfg := runtimeinfo.Config{CRIEndpoints: cfg.ContainerRuntimeEndpoints, DockerEndpoint: cfg.DockerEndpoint}
	if err := rtCfg.Validate(); err != nil {
		return nil, fmt.Errorf("--container-runtime-endpoint / --docker-endpoint: %w", err)
	}
	reg0, err := registration(cfg)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	a := &App{cfg: cfg, lg: lg, prober: probe.New(cfg.HostRoot), res: probe.SystemResolver(),
		hold: setters.PressureHold{Period: cfg.EvictionPressureTransitionPeriod}, runtime: runtimeinfo.NewWatcher(rtCfg, time.Minute, lg)}
	// Asked once now, so the registration already carries the runtime;
	// then every minute by Run (bounded by the per-socket timeout).
	a.runtime.Refresh(context.Background())

	hbCfg := heartbeat.DefaultConfig()
	hbCfg.Register = reg0
	hbCfg.StatusUpdateFrequency = cfg.StatusUpdateFrequency
	hbCfg.StatusReportFrequency = cfg.StatusReportFrequency
	hbCfg.LeaseDurationSeconds = int32(cfg.LeaseDurationSeconds)
	if err := hbCfg.Validate(); err != nil {
		return nil, err
	}
	static, err := podagent.LoadStatic(cfg.StaticPods)
	if err != nil {
		return nil, err
	}
	// The reporter is its node's kubelet for the pods bound to it
	// (docs/spec.md, "The reporter as the node's kubelet").
	hbCfg.Pods = podagent.New(podagent.Config{Node: cfg.NodeName, StaticPods: static, ReconcilePeriod: cfg.PodReconcilePeriod})

	if cfg.Collector.TLS.Insecure {
		lg.Warn("collector connection is PLAINTEXT (--collector.insecure): the node is not authenticated; development only")
	}
	cm, err := grpcclient.Metrics(reg)
	if err != nil {
		return nil, err
	}
	cfg.Collector.Registerer, cfg.Collector.Logger = reg, lg
	conn, err := grpcclient.Dial(cfg.Collector, cm)
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	a.conn = conn
	client := collectorv1.NewCollectorServiceClient(conn)
	// The node's name travels in the stream's metadata too, so a collector
	// that must refuse the stream before reading its Register can still
	// tell the monitors this node is alive (identity.NodeMetadata).
	dial := func(ctx context.Context) (heartbeat.Stream, error) {
		return client.Report(metadata.AppendToOutgoingContext(ctx, identity.NodeMetadata, cfg.NodeName))
	}

	a.server, err = bootstrap.NewServer(cfg.Admin, lg, reg)
	if err != nil {
		conn.Close()
		return nil, err
	}

	port := int32(0)
	if ad := a.server.Admin(); ad != nil {
		if tcp, ok := ad.Addr().(*net.TCPAddr); ok {
			port = int32(tcp.Port)
		}
	}
	a.setCfg = setters.Config{
		NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, MaxPods: int64(cfg.MaxPods),
		KubeReserved: kubeRes, SystemReserved: sysRes, EvictionHard: thresholds,
		ReporterVersion: version.String(), ReporterPort: port, LocalStorageIsolation: true,
		ExternalAddresses: external,
	}
	hb, err := heartbeat.New(hbCfg, lg, dial, a.computeStatus, heartbeat.NewMetrics(reg))
	if err != nil {
		conn.Close()
		return nil, err
	}
	a.hb = hb
	a.server.AddReadyCheck("registered", hb.Ready)
	return a, nil
}

// registration builds the Register message: default labels (hostname, os,
// arch, topology), user labels on top, taints, cordon.
func registration(cfg Config) (*collectorv1.Register, error) {
	labels := map[string]string{
		nodemodel.LabelHostname: cfg.NodeName,
		nodemodel.LabelOS:       runtime.GOOS,
		nodemodel.LabelArch:     runtime.GOARCH,
	}
	if cfg.Zone != "" {
		labels[nodemodel.LabelZone] = cfg.Zone
	}
	if cfg.Region != "" {
		labels[nodemodel.LabelRegion] = cfg.Region
	}
	for k, v := range cfg.NodeLabels {
		labels[k] = v
	}
	var taints []*nodev1.Taint
	for _, s := range cfg.RegisterWithTaints {
		t, err := parseTaint(s)
		if err != nil {
			return nil, fmt.Errorf("--register-with-taints: %w", err)
		}
		taints = append(taints, t)
	}
	if !cfg.RegisterSchedulable && !nodemodel.HasTaint(taints, nodemodel.TaintUnschedulable, nodemodel.NoSchedule) {
		taints = append(taints, &nodev1.Taint{Key: nodemodel.TaintUnschedulable, Effect: nodemodel.NoSchedule})
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return &collectorv1.Register{
		NodeName:           cfg.NodeName,
		Labels:             labels,
		RegisterWithTaints: taints,
		Unschedulable:      !cfg.RegisterSchedulable,
		ReporterVersion:    version.String(),
		ReporterId:         hex.EncodeToString(id),
	}, nil
}

// computeStatus is the heartbeat's StatusFunc: probe the host, pick the
// node IP, decide pressure, run the setters.
func (a *App) computeStatus(now time.Time, old *nodev1.NodeStatus) *nodev1.NodeStatus {
	snap := a.prober.Read()
	ip, ipErr := a.prober.NodeIP(context.Background(), a.res, a.cfg.NodeName, a.cfg.NodeIP)
	in := setters.Inputs{
		Host:           snap,
		NodeIP:         ip,
		AddressErr:     ipErr,
		Pressure:       setters.Pressure(now, a.setCfg.EvictionHard, snap, &a.hold),
		RuntimeVersion: a.runtime.Version(),
	}
	res := setters.Apply(now, &a.setCfg, in, old)
	for _, ev := range res.Events {
		if ev.Type == setters.EventWarning {
			a.lg.Warn("node event", zap.String("reason", ev.Reason), zap.String("message", ev.Message))
		} else {
			a.lg.Info("node event", zap.String("reason", ev.Reason), zap.String("message", ev.Message))
		}
	}
	a.logSetterErrors(res.Errs)
	return res.Status
}

func (a *App) logSetterErrors(errs []error) {
	text := ""
	if err := errors.Join(errs...); err != nil {
		text = err.Error()
	}
	a.mu.Lock()
	changed := text != a.lastErr
	a.lastErr = text
	a.mu.Unlock()
	switch {
	case changed && text != "":
		a.lg.Warn("some node status setters failed; the rest of the status is still reported", zap.String("errors", text))
	case changed:
		a.lg.Info("node status setters recovered")
	}
}

// AdminAddr is the bound admin address (nil when disabled).
func (a *App) AdminAddr() net.Addr {
	if a.server.Admin() == nil {
		return nil
	}
	return a.server.Admin().Addr()
}

// Ready reports whether the node has registered.
func (a *App) Ready() error { return a.hb.Ready() }

// Run reports until ctx is done, then sends Leaving and stops.
func (a *App) Run(ctx context.Context) error {
	defer a.conn.Close()
	a.lg.Info("reporter starting", zap.String("node", a.cfg.NodeName), zap.String("version", version.String()),
		zap.String("collector", a.cfg.Collector.Addresses), zap.String("host_root", a.cfg.HostRoot))
	a.server.Add("runtime", run.Func(a.runtime.Run))
	a.server.Add("heartbeat", run.Func(a.hb.Run))
	return a.server.Run(ctx, a.cfg.ShutdownTimeout)
}

// newService returns the reporter's startup with every reporter flag
// registered on it, its usage written to w.
func newService(cfg *Config, w io.Writer) *bootstrap.Service {
	svc := bootstrap.New("reporter", synopsis, &cfg.Log)
	svc.Flags.SetOutput(w)
	cfg.RegisterFlags(svc.Flags)
	return svc
}

// Main parses args (flags and NODEPULSE_* environment) and runs the
// reporter.
func Main(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "simulate" {
		// The fleet simulator was "reporter simulate" before it left the
		// product for the tests module; say where it went.
		return fmt.Errorf("unknown command %q: the reporter has no subcommands but version (the fleet simulator is the separate fleetsim binary)", args[0])
	}
	cfg := DefaultConfig()
	svc := newService(&cfg, os.Stderr)
	return svc.Run(ctx, args, func() (run.Component, error) {
		set := map[string]bool{}
		svc.Flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["node-status-update-frequency"] && !set["node-status-report-frequency"] {
			// Kubelet rule: an explicit update frequency alone also sets the
			// report frequency, so "report every 1s" means what it says.
			cfg.StatusReportFrequency = cfg.StatusUpdateFrequency
		}
		return New(cfg, svc.Logger, svc.Registry)
	})
}
