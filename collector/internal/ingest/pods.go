// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodepulse/nodepulse/collector/internal/podsync"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	"github.com/nodepulse/nodepulse/services/validation"
)

// The reporter as its node's kubelet (docs/spec.md, "The reporter as the
// node's kubelet"): a stream whose Register set pod_sync is subscribed to
// its node's pods (podsync.Hub) and may write them. Nothing here runs for
// lease renewals or for streams that did not ask.

// errNodeDeleted ends a stream whose node object was deleted: the reporter
// registers again, which creates a new node object.
var errNodeDeleted = errors.New("node object deleted")

// podQueue bounds the pod writes waiting for etcd on one stream; a
// reporter sends one per pod it acts on, and resends refused ones later.
const podQueue = 16

// Pod writes have a token bucket of their own: a node back from an outage
// writes each of its pods at once, and under the node's message bucket
// (2/s, burst 20) those writes would take the tokens its lease renewals
// need. These bound a reporter that loops.
const (
	podWritesPerSecond = 20
	podWriteBurst      = 100
)

// isPodWrite says whether m is one of a node's pod writes.
func isPodWrite(m *collectorv1.ReportRequest) bool {
	switch m.GetMessage().(type) {
	case *collectorv1.ReportRequest_PodStatus, *collectorv1.ReportRequest_PodDelete, *collectorv1.ReportRequest_MirrorPod:
		return true
	}
	return false
}

// podState is what a pod-syncing stream holds beyond a plain one,
// allocated only for those (a pointer on every stream).
type podState struct {
	hub     *podsync.Hub
	sub     *podsync.Sub
	nodeUID string // the node's uid as registered on this stream (mirror pods' owner)

	mu      sync.Mutex
	lim     bucket // the stream's pod writes (the loop's goroutine only)
	jobs    []podJob
	writing bool
}

type podJob struct {
	seq  uint64
	kind string
	// msg is the request's oneof value: decoding the next message into the
	// stream's buffer replaces the buffer's fields, not this value (as
	// for status reports).
	msg any
}

// SetPods connects the pod hub: streams that ask for pods are subscribed,
// and the hub may end streams whose node object was deleted. Called before
// serving.
func (s *Server) SetPods(h *podsync.Hub) {
	h.SetNodes(s)
	s.pods.Store(h)
}

// AttachedUID implements podsync.Nodes.
func (s *Server) AttachedUID(name string) (string, bool) {
	s.mu.Lock()
	st := s.streams[name]
	s.mu.Unlock()
	if st == nil {
		return "", false
	}
	e, ok := s.table.Get(name, st.gen)
	return e.UID, ok
}

// AttachedNames implements podsync.Nodes.
func (s *Server) AttachedNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.streams))
	for n := range s.streams {
		out = append(out, n)
	}
	return out
}

// NodeDeleted implements podsync.Nodes: the stream ends with NotFound, and
// its reporter registers again at once.
func (s *Server) NodeDeleted(name, uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[name]
	if st == nil {
		return
	}
	if e, ok := s.table.Get(name, st.gen); !ok || e.UID != uid {
		return
	}
	st.end(errNodeDeleted)
}

// SendPods implements podsync.Target.
func (st *stream) SendPods(m *collectorv1.PodSync) error {
	return st.send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_PodSync{PodSync: m}})
}

// subscribePods subscribes an attached stream to its node's pods, when
// its reporter asked. Called after the Register ack was sent, so the first
// PodSync follows the ack.
func (s *Server) subscribePods(st *stream, reg *collectorv1.Register, nodeUID string) {
	h := s.pods.Load()
	if h == nil || !reg.GetPodSync() {
		return
	}
	ps := &podState{hub: h, nodeUID: nodeUID, lim: bucket{tokens: podWriteBurst, last: s.now()}}
	ps.sub = h.Attach(st.name, st)
	st.pods.Store(ps)
}

func (s *Server) unsubscribePods(st *stream) {
	if ps := st.pods.Load(); ps != nil && ps.sub != nil {
		ps.sub.Detach()
	}
}

// podWrite validates a pod write and queues it for the stream's pod
// writer; its ack is sent once it was applied (or refused).
func (c *conn) podWrite(m *collectorv1.ReportRequest, seq uint64, now time.Time) error {
	s, st := c.s, c.st
	kind := kindOf(m)
	ps := st.pods.Load()
	if ps == nil {
		s.m.messages.WithLabelValues(kind, "failed_precondition").Inc()
		return c.refuse(seq, codes.FailedPrecondition, "register.podSync", "pod writes need a stream registered with podSync", 0)
	}
	if !ps.lim.allow(now, podWritesPerSecond, podWriteBurst) {
		s.m.messages.WithLabelValues(kind, "rate_limited").Inc()
		return c.refuse(seq, codes.ResourceExhausted, "", fmt.Sprintf("node %q exceeds %d pod writes/s (burst %d)", st.name, podWritesPerSecond, podWriteBurst), time.Second/podWritesPerSecond)
	}
	var l validation.List
	onFreshStack(func() {
		switch msg := m.GetMessage().(type) {
		case *collectorv1.ReportRequest_PodStatus:
			l = validation.PodStatusUpdate(msg.PodStatus, now, s.cfg.Limits)
		case *collectorv1.ReportRequest_PodDelete:
			l = validation.PodDelete(msg.PodDelete, now, s.cfg.Limits)
		case *collectorv1.ReportRequest_MirrorPod:
			l = validation.MirrorPod(msg.MirrorPod, now, s.cfg.Limits)
		}
	})
	if len(l) > 0 {
		return c.refuseInvalid(kind, seq, l)
	}
	if !s.p.Available() {
		s.m.messages.WithLabelValues(kind, "unavailable").Inc()
		return c.refuse(seq, codes.Unavailable, "", "etcd unavailable: pod not written", s.cfg.RetryAfter)
	}
	ps.mu.Lock()
	if len(ps.jobs) >= podQueue {
		ps.mu.Unlock()
		s.m.messages.WithLabelValues(kind, "busy").Inc()
		return c.refuse(seq, codes.ResourceExhausted, "", "too many pod writes waiting for etcd on this stream", s.cfg.RetryAfter)
	}
	ps.jobs = append(ps.jobs, podJob{seq: seq, kind: kind, msg: m.GetMessage()})
	start := !ps.writing
	ps.writing = true
	ps.mu.Unlock()
	if start {
		s.handlers.Add(1) // the reader holds a count: never Add from zero
		go s.writePods(st, ps)
	}
	return nil
}

// writePods runs while pod writes wait: in order, each acked after it
// was applied, so a reporter's status write and the delete it sends next
// reach etcd in that order.
func (s *Server) writePods(st *stream, ps *podState) {
	defer s.handlers.Done()
	for {
		ps.mu.Lock()
		if len(ps.jobs) == 0 || st.ending() {
			ps.jobs, ps.writing = nil, false
			ps.mu.Unlock()
			return
		}
		j := ps.jobs[0]
		ps.jobs[0] = podJob{}
		ps.jobs = ps.jobs[1:]
		ps.mu.Unlock()
		var err error
		switch msg := j.msg.(type) {
		case *collectorv1.ReportRequest_PodStatus:
			err = ps.hub.WriteStatus(st.ctx, st.name, msg.PodStatus)
		case *collectorv1.ReportRequest_PodDelete:
			err = ps.hub.FinishDeletion(st.ctx, st.name, msg.PodDelete)
		case *collectorv1.ReportRequest_MirrorPod:
			err = ps.hub.EnsureMirror(st.ctx, st.name, ps.nodeUID, msg.MirrorPod, s.now())
		}
		a := &collectorv1.Ack{Seq: j.seq, CollectorId: s.cfg.CollectorID}
		kind := j.kind
		var r *podsync.Refusal
		switch {
		case err == nil:
			a.Durable = true
			s.m.messages.WithLabelValues(kind, "ok").Inc()
		case errors.As(err, &r):
			s.m.messages.WithLabelValues(kind, resultOf(r.Code)).Inc()
			a.Error = &collectorv1.Error{Code: uint32(r.Code), Field: r.Field, Message: r.Message}
			if r.Code == codes.Unavailable {
				a.RetryAfter = durationpb.New(s.cfg.RetryAfter)
			}
		default:
			s.m.messages.WithLabelValues(kind, "unavailable").Inc()
			a.Error = &collectorv1.Error{Code: uint32(codes.Unavailable), Message: err.Error()}
			a.RetryAfter = durationpb.New(s.cfg.RetryAfter)
		}
		if st.ending() || st.send(&collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}) != nil {
			ps.mu.Lock()
			ps.jobs, ps.writing = nil, false
			ps.mu.Unlock()
			return
		}
	}
}

// resultOf is the messages_total result label of a refused pod write.
func resultOf(c codes.Code) string {
	switch c {
	case codes.PermissionDenied:
		return "permission_denied"
	case codes.FailedPrecondition:
		return "failed_precondition"
	case codes.InvalidArgument:
		return "invalid"
	case codes.Unavailable:
		return "unavailable"
	case codes.Aborted:
		return "conflict"
	case codes.NotFound:
		return "not_found"
	case codes.AlreadyExists:
		return "already_exists"
	}
	return "refused"
}

// nodeDeletedStatus is the status a stream ends with when its node object
// was deleted.
func nodeDeletedStatus(name string) error {
	return status.Errorf(codes.NotFound, "node %q was deleted: register again (a new node object with a new uid)", name)
}
