// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

func TestFlagsAndEnv(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("collector", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	env := map[string]string{"NODEPULSE_MAX_STREAMS": "7", "NODEPULSE_LEASE_CHECKPOINT_INTERVAL": "1m"}
	err := flagenv.Parse(fs, EnvPrefix, synopsis, []string{"--max-clock-skew=5s"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ingest.MaxStreams != 7 || cfg.Persist.CheckpointInterval != time.Minute || cfg.DeprecatedMaxClockSkew != 5*time.Second {
		t.Fatalf("config %+v", cfg)
	}
	var out strings.Builder
	fs.SetOutput(&out)
	fs.Usage()
	for _, want := range []string{"--etcd-unavailable-reconnect-after", "$NODEPULSE_LEASE_CHECKPOINT_INTERVAL", "--collector.advertise-address", "--max-streams"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %s", want)
		}
	}
}

func TestValidate(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	cfg.DrainWindow = cfg.GRPC.DrainTimeout
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "drain.reconnect-window") {
		t.Fatalf("drain window >= drain timeout accepted: %v", err)
	}
	cfg = DefaultConfig()
	cfg.GCPercent = -1 // GC off with no memory limit: unbounded memory
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "runtime.gc-percent") {
		t.Fatalf("negative GC target accepted: %v", err)
	}
}

// A collector registers collectors/<id> with its feed address while it
// runs and removes it when it stops.
func TestRunRegistersAndDeregisters(t *testing.T) {
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	cfg := DefaultConfig()
	cfg.Store = mem
	cfg.GRPC.TLS.Insecure = true
	cfg.GRPC.ListenAddress = "127.0.0.1:0"
	cfg.Admin.ListenAddress = "127.0.0.1:0"
	cfg.ID = "c-1"
	a, err := New(cfg, zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if a.FeedAddress() != a.GRPCAddr() {
		t.Fatalf("advertised %s, listening on %s", a.FeedAddress(), a.GRPCAddr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := mem.Get(context.Background(), nodestore.Collectors, "c-1")
		if err == nil {
			if o.Value.(*collectorv1.CollectorInfo).GetFeedAddress() != a.GRPCAddr() {
				t.Fatalf("registered %v", o.Value)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("collector never registered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Get(context.Background(), nodestore.Collectors, "c-1"); !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatalf("collectors/c-1 still there after stop: %v", err)
	}
}

func TestMainHelp(t *testing.T) {
	if err := Main(context.Background(), []string{"--help"}); err != nil {
		t.Fatalf("--help: %v", err)
	}
	if err := Main(context.Background(), []string{"--no-such-flag"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}
