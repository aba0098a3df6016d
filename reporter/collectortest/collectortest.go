// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package collectortest is a fake collector for the reporter's tests: a real
// gRPC server on 127.0.0.1:0 that speaks the Report protocol
// (docs/contracts.md), acknowledges every message, and records what it
// received, in the manner of Jaeger's mock_grpc_collector. It is a fake, not
// a mock: it keeps node state (uid, last status) like the real collector
// would, so the reporter under test sees honest Register acks. It stores
// nothing in etcd and never refuses anything unless a test sets Refuse.
//
// Like net/http/httptest it is an exported package of a test helper, not
// product code (no binary imports it): the reporter's own tests use it, and
// so do the tests module's fleet simulator and simbench.
package collectortest

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/identity"
)

// Node is what the fake knows about one node.
type Node struct {
	UID        string
	Registers  int
	Leases     int
	Statuses   int
	Leaving    int
	LastStatus *nodev1.NodeStatus
	Register   *collectorv1.Register
	Connected  bool
	// Named is the node name of the stream's metadata
	// (identity.NodeMetadata) at the last Register.
	Named string
	// LeaseTimes: when the fake received the node's latest renewals (the
	// last 8).
	LeaseTimes []time.Time
}

// Collector is the fake.
type Collector struct {
	ID string
	// Refuse, when set, may answer a request with a refusing Ack (error
	// and/or retry_after); returning nil acks normally.
	Refuse func(node string, req *collectorv1.ReportRequest) *collectorv1.Ack
	// RenewPhase, when set, is the renew_phase of a node's Register ack.
	RenewPhase func(node string) *float64

	srv    *grpc.Server
	ln     net.Listener
	health *health.Server

	mu      sync.Mutex
	nodes   map[string]*Node
	streams map[string]chan *collectorv1.ReportResponse
	msgs    atomic.Int64
	uidSeq  int

	collectorv1.UnimplementedCollectorServiceServer
}

// Start serves a fake collector on 127.0.0.1:0 until the test ends.
func Start(t testing.TB, id string) *Collector {
	t.Helper()
	c, err := New(id, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// New serves a fake collector on addr.
func New(id, addr string) (*Collector, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake collector listen: %w", err)
	}
	c := &Collector{ID: id, ln: ln, nodes: map[string]*Node{}, streams: map[string]chan *collectorv1.ReportResponse{},
		srv: grpc.NewServer(), health: health.NewServer()}
	collectorv1.RegisterCollectorServiceServer(c.srv, c)
	healthpb.RegisterHealthServer(c.srv, c.health)
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// Addr is host:port of the fake.
func (c *Collector) Addr() string { return c.ln.Addr().String() }

// Stop kills the fake at once, breaking every stream (a crashed collector).
func (c *Collector) Stop() { c.srv.Stop() }

// Messages is the number of requests received.
func (c *Collector) Messages() int64 { return c.msgs.Load() }

// Node returns a copy of what the fake knows about name.
func (c *Collector) Node(name string) (Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		return Node{}, false
	}
	cp := *n
	cp.LastStatus = proto.CloneOf(n.LastStatus)
	cp.LeaseTimes = slices.Clone(n.LeaseTimes)
	return cp, true
}

// Nodes returns the names of every node that registered.
func (c *Collector) Nodes() map[string]Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Node, len(c.nodes))
	for k, n := range c.nodes {
		out[k] = *n
	}
	return out
}

// Connected counts nodes with an open stream.
func (c *Collector) Connected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.nodes {
		if x.Connected {
			n++
		}
	}
	return n
}

// Command sends a command to node's stream; false when not connected.
func (c *Collector) Command(node string, cmd *collectorv1.Command) bool {
	c.mu.Lock()
	ch, ok := c.streams[node]
	c.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case ch <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Command{Command: cmd}}:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// Report implements the stream.
func (c *Collector) Report(stream grpc.BidiStreamingServer[collectorv1.ReportRequest, collectorv1.ReportResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return status.Error(codes.FailedPrecondition, "first message must be register")
	}
	if reg.GetNodeName() == "" {
		return status.Error(codes.InvalidArgument, "register.node_name: empty")
	}
	name := reg.GetNodeName()
	c.msgs.Add(1)
	out := make(chan *collectorv1.ReportResponse, 64)
	c.mu.Lock()
	n, ok := c.nodes[name]
	if !ok {
		c.uidSeq++
		n = &Node{UID: fmt.Sprintf("uid-%s-%d", c.ID, c.uidSeq)}
		c.nodes[name] = n
	}
	n.Registers++
	n.Register = proto.CloneOf(reg)
	md, _ := metadata.FromIncomingContext(stream.Context())
	n.Named = strings.Join(md.Get(identity.NodeMetadata), ",")
	n.Connected = true
	c.streams[name] = out
	node := &nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: name, Uid: n.UID, Labels: reg.GetLabels(), CreationTimestamp: timestamppb.Now()},
		Spec:     &nodev1.NodeSpec{Unschedulable: reg.GetUnschedulable(), Taints: reg.GetRegisterWithTaints()},
		Status:   proto.CloneOf(n.LastStatus),
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.streams[name] == out {
			delete(c.streams, name)
			n.Connected = false
		}
		c.mu.Unlock()
	}()

	// One writer goroutine: gRPC forbids concurrent Sends on a stream.
	done := make(chan struct{})
	defer close(done)
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				return
			case m := <-out:
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			}
		}
	}()
	ack := func(a *collectorv1.Ack) error {
		a.CollectorId = c.ID
		select {
		case out <- &collectorv1.ReportResponse{Message: &collectorv1.ReportResponse_Ack{Ack: a}}:
			return nil
		case err := <-sendErr:
			return err
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	regAck := &collectorv1.Ack{Seq: first.GetSeq(), Node: node, Durable: true}
	if c.RenewPhase != nil {
		regAck.RenewPhase = c.RenewPhase(name)
	}
	if err := ack(regAck); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		c.msgs.Add(1)
		if c.Refuse != nil {
			if a := c.Refuse(name, req); a != nil {
				a.Seq = req.GetSeq()
				if err := ack(a); err != nil {
					return err
				}
				continue
			}
		}
		durable := true
		c.mu.Lock()
		switch m := req.GetMessage().(type) {
		case *collectorv1.ReportRequest_Lease:
			n.Leases++
			n.LeaseTimes = append(n.LeaseTimes, time.Now())
			if len(n.LeaseTimes) > 8 {
				n.LeaseTimes = n.LeaseTimes[1:]
			}
			durable = false
		case *collectorv1.ReportRequest_Status:
			n.Statuses++
			n.LastStatus = proto.CloneOf(m.Status.GetStatus())
		case *collectorv1.ReportRequest_Leaving:
			n.Leaving++
		case *collectorv1.ReportRequest_Register:
			c.mu.Unlock()
			return status.Error(codes.FailedPrecondition, "register sent twice on one stream")
		}
		c.mu.Unlock()
		if err := ack(&collectorv1.Ack{Seq: req.GetSeq(), Durable: durable}); err != nil {
			return err
		}
	}
}
