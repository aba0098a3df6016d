// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	collectorapp "github.com/nodepulse/nodepulse/collector/app"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	monitorapp "github.com/nodepulse/nodepulse/monitor/app"
	reporterapp "github.com/nodepulse/nodepulse/reporter/app"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// Short timers for the whole pipeline: renewals every 500ms, grace 3s.
const (
	testGrace  = 3 * time.Second
	testPeriod = 300 * time.Millisecond
	leaseSecs  = 2
)

type pipeline struct {
	t         *testing.T
	store     nodestore.Store
	collector *collectorapp.App
	monitor   *monitorapp.App
	nodes     nodev1.NodeServiceClient
}

// runApp runs a component until the test ends (or stop is called).
func (p *pipeline) runApp(name string, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				p.t.Errorf("%s stopped with error: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			p.t.Errorf("%s did not stop within 30s", name)
		}
	}
	p.t.Cleanup(stop)
	return stop
}

func logger(t *testing.T) *zap.Logger {
	if testing.Verbose() {
		return zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	}
	return zap.NewNop()
}

func startPipeline(t *testing.T) *pipeline {
	t.Helper()
	cluster := etcdtest.Shared(t)
	prefix := cluster.Prefix(t)
	p := &pipeline{t: t, store: etcdtest.NewStoreWith(t, cluster, etcdstore.Config{Prefix: prefix})}

	ccfg := collectorapp.DefaultConfig()
	ccfg.GRPC.ListenAddress = "127.0.0.1:0"
	ccfg.GRPC.TLS.Insecure = true
	ccfg.Admin.ListenAddress = "127.0.0.1:0"
	ccfg.Store = etcdtest.NewStoreWith(t, cluster, etcdstore.Config{Prefix: prefix})
	ccfg.GRPC.DrainTimeout = 2 * time.Second
	ccfg.DrainWindow = time.Second
	c, err := collectorapp.New(ccfg, logger(t).Named("collector"), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("collector: %v", err)
	}
	p.collector = c
	p.runApp("collector", c.Run)

	mcfg := monitorapp.DefaultConfig()
	mcfg.GRPC.ListenAddress = "127.0.0.1:0"
	mcfg.GRPC.TLS.Insecure = true
	mcfg.Collector.TLS.Insecure = true
	mcfg.Admin.ListenAddress = "127.0.0.1:0"
	mcfg.Lifecycle.GracePeriod = testGrace
	mcfg.MonitorPeriod = testPeriod
	mcfg.Store = etcdtest.NewStoreWith(t, cluster, etcdstore.Config{Prefix: prefix})
	m, err := monitorapp.New(mcfg, logger(t).Named("monitor"), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("monitor: %v", err)
	}
	p.monitor = m
	p.runApp("monitor", m.Run)

	cc, err := grpc.NewClient(m.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	p.nodes = nodev1.NewNodeServiceClient(cc)
	return p
}

// startReporter runs a real reporter (real host probes) under node name.
func (p *pipeline) startReporter(name string) (stop func()) {
	cfg := reporterapp.DefaultConfig()
	cfg.NodeName = name
	cfg.Collector.Addresses = p.collector.GRPCAddr()
	cfg.Collector.TLS.Insecure = true
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.LeaseDurationSeconds = leaseSecs
	cfg.StatusUpdateFrequency = time.Second
	r, err := reporterapp.New(cfg, logger(p.t).Named("reporter"), prometheus.NewRegistry())
	if err != nil {
		p.t.Fatalf("reporter: %v", err)
	}
	return p.runApp("reporter "+name, r.Run)
}

func (p *pipeline) ready(name string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := p.nodes.GetNode(ctx, &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return "", "", err
	}
	c := nodemodel.FindCondition(resp.GetNode().GetStatus().GetConditions(), nodemodel.Ready)
	return c.GetStatus(), c.GetReason(), nil
}

// waitReady polls until the node's Ready condition has status want.
func (p *pipeline) waitReady(name, want string, timeout time.Duration) time.Time {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		st, reason, err := p.ready(name)
		if err == nil && st == want {
			return time.Now()
		}
		last = fmt.Sprintf("Ready=%q reason=%q err=%v", st, reason, err)
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("node %s: Ready did not become %s within %s; last: %s", name, want, timeout, last)
	return time.Time{}
}

// TestPipelineNodeLifecycle: a node registers and becomes Ready; its
// reporter stops and the node turns Unknown (NodeStatusUnknown) within grace
// plus one monitor period, never before the grace period; it resumes and the
// node is Ready again.
func TestPipelineNodeLifecycle(t *testing.T) {
	p := startPipeline(t)
	const node = "pipeline-node-1"
	stop := p.startReporter(node)
	p.waitReady(node, nodemodel.True, 30*time.Second)

	resp, err := p.nodes.GetNode(context.Background(), &nodev1.GetNodeRequest{Name: node})
	if err != nil {
		t.Fatal(err)
	}
	if ni := resp.GetNode().GetStatus().GetNodeInfo(); ni.GetKernelVersion() == "" || ni.GetBootId() == "" {
		t.Errorf("nodeInfo lacks host data: %v", ni)
	}
	if resp.GetNode().GetMetadata().GetUid() == "" {
		t.Error("registered node has no uid")
	}

	stop()
	stopped := time.Now()
	unknownAt := p.waitReady(node, nodemodel.Unknown, testGrace+30*time.Second)
	took := unknownAt.Sub(stopped)
	t.Logf("Unknown %s after the reporter stopped (grace %s, period %s)", took.Round(time.Millisecond), testGrace, testPeriod)
	// The last renewal was at most one renew interval before the stop, so
	// Unknown must not come earlier than grace minus that interval.
	renew := time.Duration(leaseSecs) * time.Second / 4
	if took < testGrace-renew-100*time.Millisecond {
		t.Errorf("node turned Unknown after %s, before the grace period %s could have expired", took, testGrace)
	}
	if _, reason, _ := p.ready(node); reason != nodemodel.ReasonNodeStatusUnknown {
		t.Errorf("Unknown reason = %q, want %q", reason, nodemodel.ReasonNodeStatusUnknown)
	}
	for _, typ := range []string{nodemodel.MemoryPressure, nodemodel.DiskPressure, nodemodel.PIDPressure} {
		resp, _ := p.nodes.GetNode(context.Background(), &nodev1.GetNodeRequest{Name: node})
		if c := nodemodel.FindCondition(resp.GetNode().GetStatus().GetConditions(), typ); c.GetStatus() != nodemodel.Unknown {
			t.Errorf("%s = %q, want Unknown", typ, c.GetStatus())
		}
	}

	p.startReporter(node)
	p.waitReady(node, nodemodel.True, 30*time.Second)
}

// TestPipelineRejectsMalformedRegister: an empty node name gets
// InvalidArgument naming the field, and nothing is written to etcd.
func TestPipelineRejectsMalformedRegister(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	count := func() int {
		n := 0
		for _, k := range []nodestore.Kind{nodestore.Nodes, nodestore.Statuses, nodestore.Leases} {
			objs, _, err := p.store.List(ctx, k, nodestore.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n += len(objs)
		}
		return n
	}
	before := count()

	cc, err := grpc.NewClient(p.collector.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := collectorv1.NewCollectorServiceClient(cc).Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&collectorv1.ReportRequest{Seq: 1, Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{NodeName: ""}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("Recv() error = %v, want InvalidArgument", err)
	}
	if !containsAny(st.Message(), "node_name", "nodeName") {
		t.Errorf("error %q does not name the field node_name", st.Message())
	}
	if after := count(); after != before {
		t.Errorf("objects in etcd: %d before, %d after a rejected Register", before, after)
	}
}

// TestPipelineReflection: grpcurl needs no proto files, because every server
// serves reflection and health.
func TestPipelineReflection(t *testing.T) {
	p := startPipeline(t)
	for addr, want := range map[string][]string{
		p.collector.GRPCAddr(): {"nodepulse.collector.v1.CollectorService", "nodepulse.collector.v1.FeedService", "grpc.health.v1.Health"},
		p.monitor.GRPCAddr():   {"nodepulse.node.v1.NodeService", "grpc.health.v1.Health"},
	} {
		got := listServices(t, addr)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s lists %v, missing %s", addr, got, w)
			}
		}
	}
}

func listServices(t *testing.T, addr string) []string {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	return names
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
