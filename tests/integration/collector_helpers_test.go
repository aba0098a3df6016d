// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodepulse/nodepulse/collector/app"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// runningCollector is a collector app run in-process.
type runningCollector struct {
	*app.App
	stop func() error
}

// startCollector runs a collector on loopback over store. tlsDir, when not
// empty, holds devca files and turns on mTLS; else it is plaintext.
func startCollector(t *testing.T, store nodestore.Store, tlsDir string, mod func(*app.Config)) *runningCollector {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.GRPC.ListenAddress = "127.0.0.1:0"
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.Store = store
	cfg.GRPC.DrainTimeout = 10 * time.Second
	cfg.DrainWindow = time.Second
	cfg.Persist.PingInterval = 100 * time.Millisecond
	cfg.Ingest.MessagesPerSecond, cfg.Ingest.MessageBurst = 1000, 1000
	if tlsDir == "" {
		cfg.GRPC.TLS.Insecure = true
	} else {
		cfg.GRPC.TLS = tlsconfig.Config{CertFile: filepath.Join(tlsDir, "server.crt"), KeyFile: filepath.Join(tlsDir, "server.key"), CAFile: filepath.Join(tlsDir, "ca.crt")}
	}
	if mod != nil {
		mod(&cfg)
	}
	lg := zap.NewNop()
	if testing.Verbose() {
		lg, _ = zap.NewDevelopment()
	}
	a, err := app.New(cfg, lg.Named(cfg.ID), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("collector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	rc := &runningCollector{App: a}
	stopped := false
	var runErr error
	rc.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = rc.stop() })
	return rc
}

// dial connects to addr, with the named devca client certificate ("" for
// none) when tlsDir is set.
func dial(t *testing.T, addr, tlsDir, cert string) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if tlsDir != "" {
		c := tlsconfig.Config{CAFile: filepath.Join(tlsDir, "ca.crt")}
		if cert != "" {
			c.CertFile, c.KeyFile = filepath.Join(tlsDir, cert+".crt"), filepath.Join(tlsDir, cert+".key")
		}
		tc, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// testReporter is a minimal client of the Report protocol: it registers,
// numbers its messages and reads acks, skipping commands but remembering
// the last Reconnect.
type testReporter struct {
	t         *testing.T
	s         collectorv1.CollectorService_ReportClient
	seq       uint64
	reconnect *collectorv1.Reconnect
}

func openReport(t *testing.T, ctx context.Context, cc *grpc.ClientConn, name string) (*testReporter, *collectorv1.Ack, error) {
	t.Helper()
	s, err := collectorv1.NewCollectorServiceClient(cc).Report(ctx)
	if err != nil {
		return nil, nil, err
	}
	r := &testReporter{t: t, s: s}
	a, err := r.send(&collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{
		NodeName: name, Labels: map[string]string{"kubernetes.io/hostname": name}, ReporterId: "test"}}})
	return r, a, err
}

func (r *testReporter) send(m *collectorv1.ReportRequest) (*collectorv1.Ack, error) {
	r.seq++
	m.Seq = r.seq
	if err := r.s.Send(m); err != nil {
		if errors.Is(err, io.EOF) {
			// The server ended the stream first (e.g. refused the
			// certificate); grpc-go gives its status through Recv only.
			for {
				if _, rerr := r.s.Recv(); rerr != nil {
					return nil, rerr
				}
			}
		}
		return nil, err
	}
	for {
		resp, err := r.s.Recv()
		if err != nil {
			return nil, err
		}
		if rc := resp.GetCommand().GetReconnect(); rc != nil {
			r.reconnect = rc
		}
		if a := resp.GetAck(); a != nil {
			if a.GetSeq() != r.seq {
				return nil, errors.New("ack for another seq")
			}
			return a, nil
		}
	}
}

func (r *testReporter) lease(t time.Time) (*collectorv1.Ack, error) {
	return r.send(&collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{
		RenewTime: timestamppb.New(t), LeaseDurationSeconds: 40}}})
}

func (r *testReporter) status(st *nodev1.NodeStatus) (*collectorv1.Ack, error) {
	return r.send(&collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: st}}})
}

func nodeStatus(ready string, hb time.Time) *nodev1.NodeStatus {
	return &nodev1.NodeStatus{
		Capacity:    map[string]string{"cpu": "2", "memory": "4Gi", "pods": "110"},
		Allocatable: map[string]string{"cpu": "2", "memory": "3Gi", "pods": "110"},
		Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: ready, Reason: "KubeletReady",
			LastHeartbeatTime: timestamppb.New(hb), LastTransitionTime: timestamppb.New(hb)}},
		Addresses: []*nodev1.NodeAddress{{Type: "InternalIP", Address: "127.0.0.1"}},
	}
}

// eventually polls cond until it holds; no fixed sleeps, a generous bound
// for two loaded cores.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
