// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/collector/internal/persist"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// streamGoroutines counts the goroutines of Report streams: handlers (in
// Server.Report), and helpers, any goroutine running per-stream ingest
// code beside a handler (status writer, command sender, reader, ender).
// It names them rather than counting every goroutine with ingest code on
// its stack, which the harness's own goroutines and a broadcast's workers
// also have. dump is the goroutines counted, for a failure message.
func streamGoroutines() (handlers, helpers int, dump string) {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	var counted []string
	for _, g := range strings.Split(b.String(), "\n\n") {
		switch {
		case strings.Contains(g, "ingest.(*Server).Report("):
			handlers++
		case strings.Contains(g, "ingest.(*Server).writeStatuses("), strings.Contains(g, "ingest.(*stream).sendQueued("),
			strings.Contains(g, "ingest.(*stream).endFromServer("), strings.Contains(g, "ingest.(*Server).serveWithReader"):
			helpers++
		default:
			continue
		}
		counted = append(counted, g)
	}
	return handlers, helpers, strings.Join(counted, "\n\n")
}

// An idle attached stream costs one goroutine (its handler, in Recv): no
// reader, status worker or sender waits alongside it.
func TestIdleStreamIsOneGoroutine(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const k = 20
	now := time.Now()
	for i := range k {
		c, _ := h.open(t, ctx, fmt.Sprintf("idle-%02d", i))
		c.do(lease(2, now))
		c.do(statusMsg(3, now, "True"))
	}
	// A status writer ends right after its ack went out: wait for it.
	var handlers, helpers int
	var dump string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if handlers, helpers, dump = streamGoroutines(); handlers == k && helpers == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle streams: %d handler and %d helper goroutines after 30s, want %d and 0:\n%s", k, handlers, helpers, k, dump)
		}
	}
	if n := h.srv.inline.Load(); n != k {
		t.Fatalf("%d of %d streams served inline: grpc-go's transport stream no longer offers WriteStatus?", n, k)
	}
}

// Streams the server ends while they wait in Recv end at once, inline and
// with the reader goroutine fallback: superseded, drained, register timeout.
func TestServerEndsStreamBlockedInRecv(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			h := newHarness(t, func(c *Config, _ *persist.Config) { c.RegisterTimeout = 200 * time.Millisecond })
			h.srv.noInline.Store(!inline)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			// Register timeout: nothing sent at all.
			s, err := h.client.Report(ctx)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := s.Recv(); status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 5*time.Second {
				t.Fatalf("silent stream: %v after %s, want DeadlineExceeded after ~200ms", err, time.Since(start))
			}

			// Superseded while idle: the old stream's handler is in Recv.
			old, _ := h.open(t, ctx, "node-x")
			old.do(lease(2, time.Now()))
			cur, _ := h.open(t, ctx, "node-x")
			endsWith(t, old, codes.Aborted)
			if a := cur.do(lease(2, time.Now())); a.GetError() != nil {
				t.Fatalf("new stream: %v", a)
			}

			// Drain: the remaining stream ends after the window.
			h.srv.Drain(10 * time.Millisecond)
			endsWith(t, cur, codes.Unavailable)
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			if err := h.srv.Wait(wctx); err != nil {
				t.Fatalf("handlers still running after drain: %v", err)
			}
			if got := h.srv.inline.Load() > 0; got != inline {
				t.Fatalf("inline streams: %v, want %v", got, inline)
			}
		})
	}
}

func endsWith(t *testing.T, c *client, code codes.Code) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.s.Recv()
		if err != nil {
			if status.Code(err) != code {
				t.Fatalf("stream ended with %v, want %v", err, code)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("stream still open")
		}
	}
}

// Commands reach a stream while its status waits for etcd, and status acks
// keep their order.
func TestCommandsAndStatusesInterleave(t *testing.T) {
	h := newHarness(t, func(_ *Config, pc *persist.Config) { pc.CommitWindow = 50 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := h.open(t, ctx, "node-y")
	now := time.Now()
	for i := range 3 {
		if err := c.s.Send(statusMsg(uint64(2+i), now, []string{"True", "False", "True"}[i])); err != nil {
			t.Fatal(err)
		}
	}
	if !h.srv.Command("node-y", reportStatusCmd("now")) {
		t.Fatal("command refused")
	}
	var seqs []uint64
	gotCmd := false
	for len(seqs) < 3 || !gotCmd {
		r, err := c.s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCommand().GetReportStatus() != nil {
			gotCmd = true
		}
		if a := r.GetAck(); a != nil {
			if !a.GetDurable() {
				t.Fatalf("status ack %v", a)
			}
			seqs = append(seqs, a.GetSeq())
		}
	}
	if seqs[0] != 2 || seqs[1] != 3 || seqs[2] != 4 {
		t.Fatalf("status acks out of order: %v", seqs)
	}
}

func reportStatusCmd(reason string) *collectorv1.Command {
	return &collectorv1.Command{Command: &collectorv1.Command_ReportStatus{ReportStatus: &collectorv1.ReportStatus{Reason: reason}}}
}

// fakeReportServer records what a stream sends; Send blocks while block is
// open (a client that stopped reading, flow control exhausted).
type fakeReportServer struct {
	collectorv1.CollectorService_ReportServer
	ctx   context.Context
	block chan struct{}
	mu    sync.Mutex
	sent  []*collectorv1.ReportResponse
}

func (f *fakeReportServer) Context() context.Context { return f.ctx }

func (f *fakeReportServer) Send(m *collectorv1.ReportResponse) error {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, m)
	return nil
}

func (f *fakeReportServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// A broadcast reaches every stream from a few workers, keeps a stream's
// queued commands in order, and a stream whose Send blocks holds up neither
// the others nor the broadcast for longer than its wait.
func TestBroadcastDoesNotWaitForABlockedStream(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 50
	fakes := make([]*fakeReportServer, n)
	h.srv.mu.Lock()
	for i := range fakes {
		fakes[i] = &fakeReportServer{ctx: ctx}
		if i == 7 {
			fakes[i].block = make(chan struct{})
		}
		h.srv.streams[fmt.Sprintf("fake-%02d", i)] = newStream(h.srv, fakes[i])
	}
	// One stream has a command queued already: the broadcast goes behind it.
	queued := h.srv.streams["fake-11"]
	first := &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: &collectorv1.Command{}}}
	<-queued.sendTok // a Send in progress holds the token
	if !queued.push(first) {
		t.Fatal("push refused")
	}
	h.srv.mu.Unlock()

	start := time.Now()
	got, total := h.srv.broadcast("test", time.Second, true, 300*time.Millisecond)
	took := time.Since(start)
	if total != n {
		t.Fatalf("broadcast listed %d streams, want %d", total, n)
	}
	if took > 3*time.Second {
		t.Fatalf("broadcast took %s with one blocked stream, want about its 300ms wait", took)
	}
	if got != n-1 {
		t.Fatalf("broadcast counted %d streams, want %d (all but the blocked one)", got, n-1)
	}
	queued.sendTok <- struct{}{} // the Send in progress ends
	close(fakes[7].block)
	waitFor(t, func() bool {
		for _, f := range fakes {
			if f.count() == 0 {
				return false
			}
		}
		return fakes[11].count() == 2
	})
	fakes[11].mu.Lock()
	defer fakes[11].mu.Unlock()
	if s := fakes[11].sent; len(s) != 2 || s[0] != first || s[1].GetCommand().GetReconnect().GetReason() != "test" {
		t.Fatalf("queued stream got %v, want the queued command, then the broadcast", s)
	}
}
