// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Events are written off the judgement path: eventLocked only queues them
// (bounded; a full queue drops the event and counts it, it never delays a
// decision), and runEvents writes what is queued as one EventBatch per
// fenced Apply, waiting up to EventFlushInterval to fill it. At the
// registration of a fleet (one RegisteredNode per node) that is one key,
// one Txn and one TTL lease grant per MaxEventsPerBatch events instead of
// one key and two writes per event: etcd's own cost per key (~135 B with
// its revision index) was larger than a compressed event.

// DefaultEventQueue and DefaultEventFlushInterval apply when the Config
// leaves them zero.
const (
	DefaultEventQueue         = 16384
	DefaultEventFlushInterval = 500 * time.Millisecond
)

// MaxEventsPerBatch bounds one stored batch: ~220 B per event before
// compression keeps a full batch near 110 KB, well inside etcd's default
// 1.5 MiB request limit, and a reader decodes at most that much per key.
const MaxEventsPerBatch = 512

type queuedEvent struct {
	fence nodestore.Fence
	ev    *nodev1.Event
}

// eventLocked queues an event (best effort: a failed or dropped event never
// blocks a decision).
func (c *Controller) eventLocked(now time.Time, node, uid, typ, reason, msg string) {
	ts := nodemodel.Timestamp(now)
	// Names must be unique even for two events of one node at the same
	// instant, or two puts of one key would land in one Txn.
	nano := now.UnixNano()
	if nano <= c.lastEventNano {
		nano = c.lastEventNano + 1
	}
	c.lastEventNano = nano
	name := node + "." + strconv.FormatInt(nano, 16)
	ev := &nodev1.Event{
		Metadata:       &nodev1.ObjectMeta{Name: name, Namespace: EventNamespace, CreationTimestamp: ts},
		InvolvedObject: &nodev1.ObjectReference{Kind: "Node", Name: node, Uid: uid},
		Reason:         reason, Message: msg, Type: typ, Source: EventSource,
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
	}
	select {
	case c.events <- queuedEvent{fence: c.fence, ev: ev}:
	default:
		c.m.eventsDropped.WithLabelValues("queue_full").Inc()
	}
}

// podEventLocked queues an event about a pod, in the pod's namespace (the
// batch it lands in is keyed under EventNamespace; readers go by each
// event's own namespace and involved object).
func (c *Controller) podEventLocked(now time.Time, p *podv1.Pod, typ, reason, msg string) {
	md := p.GetMetadata()
	ts := nodemodel.Timestamp(now)
	nano := now.UnixNano()
	if nano <= c.lastEventNano {
		nano = c.lastEventNano + 1
	}
	c.lastEventNano = nano
	ev := &nodev1.Event{
		Metadata:       &nodev1.ObjectMeta{Name: md.GetName() + "." + strconv.FormatInt(nano, 16), Namespace: md.GetNamespace(), CreationTimestamp: ts},
		InvolvedObject: &nodev1.ObjectReference{Kind: "Pod", Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid()},
		Reason:         reason, Message: msg, Type: typ, Source: EventSource,
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
	}
	select {
	case c.events <- queuedEvent{fence: c.fence, ev: ev}:
	default:
		c.m.eventsDropped.WithLabelValues("queue_full").Inc()
	}
}

// runEvents writes queued events until ctx ends.
func (c *Controller) runEvents(ctx context.Context) {
	var carry *queuedEvent
	for {
		var first queuedEvent
		if carry != nil {
			first, carry = *carry, nil
		} else {
			select {
			case <-ctx.Done():
				return
			case first = <-c.events:
			}
		}
		batch := []*nodev1.Event{first.ev}
		window := time.NewTimer(c.cfg.EventFlushInterval)
	fill:
		for len(batch) < MaxEventsPerBatch {
			select {
			case <-ctx.Done():
				window.Stop()
				return
			case <-window.C:
				break fill
			case ev := <-c.events:
				if ev.fence != first.fence {
					carry = &ev // an event of another leadership: its own batch
					break fill
				}
				batch = append(batch, ev.ev)
			}
		}
		window.Stop()
		// The first event's name is unique (eventLocked), so is the batch's.
		op := nodestore.Op{Kind: nodestore.EventBatches, Name: EventNamespace + "/" + first.ev.GetMetadata().GetName(),
			Value: &nodev1.EventBatch{Events: batch}, TTL: EventTTL}
		_, err := c.store.Apply(ctx, &first.fence, op)
		switch {
		case err == nil:
			c.m.eventsWritten.Add(float64(len(batch)))
		case errors.Is(err, nodestore.ErrFenced):
			c.m.eventsDropped.WithLabelValues("fenced").Add(float64(len(batch)))
		default:
			c.m.eventsDropped.WithLabelValues("write_failed").Add(float64(len(batch)))
			if ctx.Err() == nil {
				c.lg.Warn("cannot record events", zap.Int("events", len(batch)), zap.Error(err))
			}
		}
	}
}
