// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

func status(name string) *nodev1.NodeStatus {
	ts := timestamppb.New(time.Unix(1790000000, 123))
	cond := func(typ, st, reason, msg string) *nodev1.NodeCondition {
		return &nodev1.NodeCondition{Type: typ, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: ts, LastTransitionTime: ts}
	}
	return &nodev1.NodeStatus{
		Capacity: map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"},
		Conditions: []*nodev1.NodeCondition{
			cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []*nodev1.NodeAddress{{Type: "Hostname", Address: name}},
	}
}

// A store written by an older nodepulse (plain protobuf) and one written
// compressed read the same through every read path, whichever way the
// reading store writes: the mixed cluster of a rolling upgrade.
func TestPlainAndCompressedValuesMix(t *testing.T) {
	c := etcdtest.Start(t)
	ctx := context.Background()
	plain := etcdtest.NewStoreWith(t, c, etcdstore.Config{PlainValues: true})
	prefix := plain.Prefix()
	compressed := etcdtest.NewStoreWith(t, c, etcdstore.Config{Prefix: prefix})

	rev0, err := plain.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch := compressed.Watch(ctx, rev0)
	watchPlain := plain.Watch(ctx, rev0)
	if _, err := plain.Apply(ctx, nil, nodestore.Put(nodestore.Statuses, "old", status("old"))); err != nil {
		t.Fatal(err)
	}
	if _, err := compressed.Apply(ctx, nil, nodestore.Put(nodestore.Statuses, "new", status("new"))); err != nil {
		t.Fatal(err)
	}
	// What is in etcd: plain protobuf, and the compressed form.
	for name, wantCompressed := range map[string]bool{"old": false, "new": true} {
		resp, err := c.Client.Get(ctx, prefix+"status/"+name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatal(err)
		}
		v := resp.Kvs[0].Value
		if etcdstore.IsCompressed(v) != wantCompressed {
			t.Fatalf("%s stored compressed=%v, want %v", name, etcdstore.IsCompressed(v), wantCompressed)
		}
		if !wantCompressed {
			var m nodev1.NodeStatus
			if err := proto.Unmarshal(v, &m); err != nil || !proto.Equal(&m, status(name)) {
				t.Fatalf("a plain value is protobuf as before: %v", err)
			}
		} else if plainLen := proto.Size(status(name)); len(v) >= plainLen {
			t.Fatalf("compressed %d B, plain %d B", len(v), plainLen)
		}
	}
	for _, s := range []*etcdstore.Store{plain, compressed} {
		for _, name := range []string{"old", "new"} {
			o, err := s.Get(ctx, nodestore.Statuses, name)
			if err != nil || !proto.Equal(o.Value, status(name)) {
				t.Fatalf("get %s: %v %v", name, o.Value, err)
			}
		}
		objs, _, err := s.List(ctx, nodestore.Statuses, nodestore.ListOptions{})
		if err != nil || len(objs) != 2 {
			t.Fatalf("list: %d objects, %v", len(objs), err)
		}
		for _, o := range objs {
			if !proto.Equal(o.Value, status(o.Name)) {
				t.Fatalf("list %s: %v", o.Name, o.Value)
			}
		}
		got, err := s.GetMany(ctx, []nodestore.Ref{{Kind: nodestore.Statuses, Name: "old"}, {Kind: nodestore.Statuses, Name: "new"}})
		if err != nil || !got[0].Found || !got[1].Found || !proto.Equal(got[1].Object.Value, status("new")) {
			t.Fatalf("get many: %v %v", got, err)
		}
	}
	for _, w := range []<-chan nodestore.WatchBatch{watch, watchPlain} {
		seen := map[string]bool{}
		for len(seen) < 2 {
			select {
			case b := <-w:
				if b.Err != nil {
					t.Fatal(b.Err)
				}
				for _, ev := range b.Events {
					if !proto.Equal(ev.Object.Value, status(ev.Object.Name)) {
						t.Fatalf("watch %s: %v", ev.Object.Name, ev.Object.Value)
					}
					seen[ev.Object.Name] = true
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("watch saw %v", seen)
			}
		}
	}
}

// A corrupted compressed value fails the read with an error naming its key.
func TestCorruptedValueNamesKey(t *testing.T) {
	c := etcdtest.Start(t)
	ctx := context.Background()
	s := etcdtest.NewStore(t, c)
	if _, err := s.Apply(ctx, nil, nodestore.Put(nodestore.Statuses, "n", status("n"))); err != nil {
		t.Fatal(err)
	}
	key := s.Prefix() + "status/n"
	resp, err := c.Client.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	v := resp.Kvs[0].Value
	if !etcdstore.IsCompressed(v) {
		t.Fatal("not compressed")
	}
	bad := append([]byte{}, v[:len(v)/2]...)
	if _, err := c.Client.Put(ctx, key, string(bad)); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"get":  func() error { _, err := s.Get(ctx, nodestore.Statuses, "n"); return err },
		"list": func() error { _, _, err := s.List(ctx, nodestore.Statuses, nodestore.ListOptions{}); return err },
	} {
		if err := read(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s of a corrupted value: %v, want an error naming %s", name, err, key)
		}
	}
}
