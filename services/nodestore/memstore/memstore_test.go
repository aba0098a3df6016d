// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package memstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
	"github.com/nodepulse/nodepulse/services/nodestore/storetest"
)

// TestConformance pins memstore to the contract etcdstore passes too.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) nodestore.Store {
		return memstore.New(memstore.Config{})
	})
}

func node(name string) *nodev1.Node {
	return &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: name}}
}

func mustApply(t *testing.T, s *memstore.Store, ops ...nodestore.Op) int64 {
	t.Helper()
	rev, err := s.Apply(t.Context(), nil, ops...)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func exists(t *testing.T, s *memstore.Store, k nodestore.Kind, name string) bool {
	t.Helper()
	_, err := s.Get(t.Context(), k, name)
	if err != nil && !errors.Is(err, nodestore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// Under synctest the fake clock drives TTLs exactly, so a test can say
// "still there just before, gone just after" without any flakiness.
func TestTTLOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Config{})
		defer s.Close()
		mustApply(t, s, nodestore.Op{Kind: nodestore.Events, Name: "default/e", Value: &nodev1.Event{}, TTL: time.Hour})
		time.Sleep(time.Hour - time.Second)
		synctest.Wait()
		if !exists(t, s, nodestore.Events, "default/e") {
			t.Fatal("expired a second early")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if exists(t, s, nodestore.Events, "default/e") {
			t.Fatal("not expired after its TTL")
		}
	})
}

func TestKillSessionExpiresAfterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Config{})
		defer s.Close()
		sess, err := s.NewSession(t.Context(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Put(t.Context(), nodestore.Collectors, "c1", &collectorv1.CollectorInfo{Id: "c1"}); err != nil {
			t.Fatal(err)
		}
		l, err := s.Campaign(t.Context(), sess, "monitor", "a")
		if err != nil {
			t.Fatal(err)
		}
		// Alive sessions never expire: an in-process keep-alive never fails.
		time.Sleep(time.Hour)
		synctest.Wait()
		if !exists(t, s, nodestore.Collectors, "c1") {
			t.Fatal("live session expired")
		}
		if err := s.KillSession(sess); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second - time.Millisecond)
		synctest.Wait()
		if !exists(t, s, nodestore.Collectors, "c1") {
			t.Fatal("killed session expired before its TTL")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if exists(t, s, nodestore.Collectors, "c1") {
			t.Fatal("killed session's object still there after its TTL")
		}
		select {
		case <-sess.Done():
		default:
			t.Fatal("session Done not closed")
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("leadership Done not closed")
		}
		if _, err := s.Leader(t.Context(), "monitor"); !errors.Is(err, nodestore.ErrNotFound) {
			t.Fatalf("leader after expiry: %v", err)
		}
	})
}

// Close must end everything the store started: synctest.Test fails if a
// goroutine of the bubble is left blocked.
func TestCloseEndsWatchesAndCampaigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Config{})
		// Watches whose context never ends, one read, one not.
		read := s.Watch(context.Background(), 0)
		_ = s.Watch(context.Background(), 0)
		sa, _ := s.NewSession(t.Context(), time.Minute)
		sb, _ := s.NewSession(t.Context(), time.Minute)
		if _, err := s.Campaign(t.Context(), sa, "m", "a"); err != nil {
			t.Fatal(err)
		}
		campaignErr := make(chan error, 1)
		go func() {
			_, err := s.Campaign(context.Background(), sb, "m", "b")
			campaignErr <- err
		}()
		synctest.Wait()
		errc := make(chan error, 1)
		go func() {
			var err error
			for b := range read {
				err = b.Err
			}
			errc <- err
		}()
		synctest.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, memstore.ErrClosed) {
			t.Fatalf("waiting reader got %v, want ErrClosed", err)
		}
		if err := <-campaignErr; !errors.Is(err, memstore.ErrClosed) {
			t.Fatalf("waiting campaign got %v, want ErrClosed", err)
		}
		if _, err := s.Get(t.Context(), nodestore.Nodes, "x"); !errors.Is(err, memstore.ErrClosed) {
			t.Fatalf("get after close: %v", err)
		}
		b, ok := <-s.Watch(t.Context(), 0)
		if !ok || !errors.Is(b.Err, memstore.ErrClosed) {
			t.Fatalf("watch after close: %+v", b)
		}
	})
}

func TestFail(t *testing.T) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	rev := mustApply(t, s, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	w := s.Watch(t.Context(), rev)
	down := errors.New("etcd unreachable")
	s.Fail(down)
	if _, err := s.Get(t.Context(), nodestore.Nodes, "n1"); !errors.Is(err, down) {
		t.Fatalf("get while failing: %v", err)
	}
	if _, err := s.Apply(t.Context(), nil, nodestore.Put(nodestore.Nodes, "n2", node("n2"))); !errors.Is(err, down) {
		t.Fatalf("apply while failing: %v", err)
	}
	if b := <-w; !errors.Is(b.Err, down) {
		t.Fatalf("open watch got %+v, want the failure", b)
	}
	s.Fail(nil)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping after healing: %v", err)
	}
	if exists(t, s, nodestore.Nodes, "n2") {
		t.Fatal("a write made while failing was kept")
	}
}

func TestHistoryLimit(t *testing.T) {
	s := memstore.New(memstore.Config{History: 10})
	defer s.Close()
	first := mustApply(t, s, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	for range 50 {
		mustApply(t, s, nodestore.Put(nodestore.Nodes, "n2", node("n2")))
	}
	last := s.Revision()
	if _, _, err := s.List(t.Context(), nodestore.Nodes, nodestore.ListOptions{Revision: first}); !errors.Is(err, nodestore.ErrCompacted) {
		t.Fatalf("list at %d of %d with History 10: %v, want ErrCompacted", first, last, err)
	}
	objs, _, err := s.List(t.Context(), nodestore.Nodes, nodestore.ListOptions{Revision: last - 9})
	if err != nil || len(objs) != 2 {
		t.Fatalf("list within the kept history: %d objects, %v", len(objs), err)
	}
	if b := <-s.Watch(t.Context(), first); !errors.Is(b.Err, nodestore.ErrCompacted) {
		t.Fatalf("watch from compacted history: %+v", b)
	}
}

func TestRevisions(t *testing.T) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	if r := s.Revision(); r != 1 {
		t.Fatalf("fresh store at revision %d, want 1 like etcd", r)
	}
	r := mustApply(t, s, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	if r != 2 {
		t.Fatalf("first write at %d, want 2", r)
	}
	// Deleting nothing spends no revision, as in etcd.
	if r2 := mustApply(t, s, nodestore.Delete(nodestore.Nodes, "none")); r2 != r || s.Revision() != r {
		t.Fatalf("delete of nothing moved the revision to %d/%d", r2, s.Revision())
	}
	// A watch from a future revision starts there.
	w := s.Watch(t.Context(), r+1)
	mustApply(t, s, nodestore.Put(nodestore.Nodes, "n1", node("n1")))
	r3 := mustApply(t, s, nodestore.Put(nodestore.Nodes, "n2", node("n2")))
	b := <-w
	if len(b.Events) != 1 || b.Events[0].Object.ModRevision != r3 {
		t.Fatalf("watch after %d got %+v, want only the write at %d", r+1, b, r3)
	}
}
