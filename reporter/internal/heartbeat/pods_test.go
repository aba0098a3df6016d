// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package heartbeat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/reporter/internal/podagent"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// podStream is a collector that acks everything, sends a PodSync after
// the Register ack, and can end the stream as a collector does when the
// node object was deleted.
type podStream struct {
	ctx   context.Context
	uid   string
	pods  []*podv1.Pod
	resps chan *collectorv1.ReportResponse
	end   chan struct{}
	mu    *sync.Mutex
	reqs  *[]*collectorv1.ReportRequest
}

func (s *podStream) Send(m *collectorv1.ReportRequest) error {
	s.mu.Lock()
	*s.reqs = append(*s.reqs, m)
	s.mu.Unlock()
	s.resps <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: &collectorv1.Ack{Seq: m.GetSeq(),
		Node: &nodev1.Node{Metadata: &nodev1.ObjectMeta{Name: "n1", Uid: s.uid}}}}}
	if m.GetRegister().GetPodSync() {
		s.resps <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_PodSync{PodSync: &collectorv1.PodSync{Full: true, Pods: s.pods}}}
	}
	return nil
}

func (s *podStream) Recv() (*collectorv1.ReportResponse, error) {
	select {
	case m := <-s.resps:
		return m, nil
	case <-s.end:
		return nil, status.Error(codes.NotFound, `node "n1" was deleted: register again`)
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *podStream) CloseSend() error { return nil }

// A stream ended because the node object was deleted: the reporter says
// so at Warn and registers again at once (no backoff), asking for its pods
// again; the pods of the new stream are acted on.
func TestDeletedNodeRegistersAgainAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			reqs    []*collectorv1.ReportRequest
			streams []*podStream
			dialed  []time.Time
		)
		term := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "ns", Name: "p", Uid: "pu", DeletionTimestamp: nodemodel.Timestamp(time.Now())},
			Spec: &podv1.PodSpec{NodeName: "n1"}, Status: &podv1.PodStatus{Phase: "Running"}}
		dial := func(ctx context.Context) (Stream, error) {
			mu.Lock()
			defer mu.Unlock()
			s := &podStream{ctx: ctx, uid: fmt.Sprintf("uid-%d", len(streams)+1), resps: make(chan *collectorv1.ReportResponse, 64),
				end: make(chan struct{}), mu: &mu, reqs: &reqs}
			if len(streams) == 1 {
				s.pods = []*podv1.Pod{term}
			}
			streams = append(streams, s)
			dialed = append(dialed, time.Now())
			return s, nil
		}
		core, logs := observer.New(zapcore.InfoLevel)
		cfg := testConfig()
		cfg.Pods = podagent.New(podagent.Config{Node: "n1"})
		cl, err := New(cfg, zap.New(core), dial, newNode().status, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = cl.Run(ctx) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		first := streams[0]
		mu.Unlock()
		close(first.end)
		ended := time.Now()
		time.Sleep(time.Second)
		synctest.Wait()

		// Stop first: leaving sends on the stream, which takes mu.
		cancel()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(dialed) != 2 || !dialed[1].Equal(ended) {
			t.Fatalf("dialled at %v after the end at %v, want a second stream at once", dialed, ended)
		}
		if logs.FilterMessage("node object was deleted; registering again").FilterLevelExact(zapcore.WarnLevel).Len() != 1 {
			t.Fatalf("no warning that the node object was deleted: %v", logs.All())
		}
		var registers, deletes int
		for _, r := range reqs {
			if reg := r.GetRegister(); reg != nil {
				registers++
				if !reg.GetPodSync() {
					t.Fatal("a Register without pod_sync")
				}
			}
			if d := r.GetPodDelete(); d != nil && d.GetUid() == "pu" && d.GetStatus().GetPhase() == "Failed" {
				deletes++
			}
		}
		if registers != 2 || deletes != 1 {
			t.Fatalf("%d registers and %d finished deletions, want 2 and 1", registers, deletes)
		}
	})
}
