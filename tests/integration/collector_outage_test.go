// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/collector/app"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestCollectorEtcdOutage stops and restarts the embedded etcd member under
// a running collector. While etcd is down the collector is not ready,
// refuses status reports with Unavailable and retry_after, and keeps
// acknowledging lease renewals from memory. Afterwards the stored status is
// exactly the last one acknowledged as durable, and the lease renewals
// acknowledged during the outage reach etcd.
func TestCollectorEtcdOutage(t *testing.T) {
	cl := etcdtest.Start(t)
	store := etcdtest.NewStoreWith(t, cl, etcdstore.Config{RequestTimeout: time.Second})
	c := startCollector(t, store, "", func(cfg *app.Config) {
		cfg.Persist.CheckpointInterval = time.Second
		cfg.Ingest.UnavailableReconnectAfter = 0 // keep the stream: this test watches one collector
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, ack, err := openReport(t, ctx, dial(t, c.GRPCAddr(), "", ""), "node-o")
	if err != nil || ack.GetError() != nil {
		t.Fatalf("register: %v %v", ack, err)
	}
	start := time.Now()
	var lastDurable *nodev1.NodeStatus
	st := nodeStatus("True", start)
	if a, err := r.status(st); err != nil || !a.GetDurable() {
		t.Fatalf("status before outage: %v %v", a, err)
	}
	lastDurable = st
	renew := start
	if a, err := r.lease(renew); err != nil || a.GetError() != nil {
		t.Fatalf("lease: %v %v", a, err)
	}

	cl.Stop()
	eventually(t, "collector not ready while etcd is down", func() bool { return c.Ready() != nil })

	// Status reports are refused with Unavailable + retry_after, never acked
	// durable while etcd is down. Leases are acked from memory.
	down := nodeStatus("False", start.Add(time.Second))
	a, err := r.status(down)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetDurable() || a.GetError().GetCode() != uint32(codes.Unavailable) || a.GetRetryAfter() == nil {
		t.Fatalf("status during outage: %v", a)
	}
	for i := range 3 {
		renew = start.Add(time.Duration(i+1) * time.Second)
		a, err := r.lease(renew)
		if err != nil || a.GetError() != nil || a.GetDurable() {
			t.Fatalf("lease during outage: %v %v", a, err)
		}
	}

	cl.Restart(t)
	eventually(t, "collector ready after etcd is back", func() bool { return c.Ready() == nil })
	// The reporter resends the refused status until it is acked durable.
	eventually(t, "status stored after the outage", func() bool {
		a, err := r.status(down)
		if err != nil {
			t.Fatal(err)
		}
		if a.GetDurable() {
			lastDurable = down
			return true
		}
		return false
	})
	o, err := store.Get(ctx, nodestore.Statuses, "node-o")
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Value.(*nodev1.NodeStatus); nodemodel.StatusChanged(got, lastDurable) || !proto.Equal(got, lastDurable) {
		t.Fatalf("stored status differs from the last durable ack:\n got %v\nwant %v", got, lastDurable)
	}
	// The last renewal acked during the outage is checkpointed now.
	eventually(t, "renewal from the outage checkpointed", func() bool {
		o, err := store.Get(ctx, nodestore.Leases, "node-o")
		if err != nil {
			return false
		}
		l := o.Value.(*nodev1.Lease)
		return l.GetSpec().GetRenewTime().AsTime().Equal(renew) && l.GetPersistence().GetCollector() == c.ID() &&
			l.GetPersistence().GetMaxStaleness().AsDuration() >= time.Second
	})
	// And collectors/<id> is registered again (the session may have expired).
	eventually(t, "collector registered", func() bool {
		_, err := store.Get(ctx, nodestore.Collectors, c.ID())
		return err == nil
	})
}
