package controller

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.uber.org/zap"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Events are written off the judgement path: eventLocked only queues them
// (bounded; a full queue drops the event and counts it, it never delays a
// decision), and runEvents writes what is queued in fenced Txns of up to
// MaxOps events, waiting up to EventFlushInterval to fill one. At the
// registration of a fleet (one RegisteredNode per node) that is one Txn and
// one TTL lease grant per MaxOps-1 events instead of two writes per event.

// DefaultEventQueue and DefaultEventFlushInterval apply when the Config
// leaves them zero.
const (
	DefaultEventQueue         = 16384
	DefaultEventFlushInterval = 500 * time.Millisecond
)

type queuedEvent struct {
	fence nodestore.Fence
	op    nodestore.Op
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
	case c.events <- queuedEvent{fence: c.fence, op: nodestore.Op{Kind: nodestore.Events, Name: EventNamespace + "/" + name, Value: ev, TTL: EventTTL}}:
	default:
		c.m.eventsDropped.WithLabelValues("queue_full").Inc()
	}
}

// runEvents writes queued events until ctx ends.
func (c *Controller) runEvents(ctx context.Context) {
	limit := max(c.store.MaxOps()-1, 1) // one compare is the fence
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
		batch := []nodestore.Op{first.op}
		window := time.NewTimer(c.cfg.EventFlushInterval)
	fill:
		for len(batch) < limit {
			select {
			case <-ctx.Done():
				window.Stop()
				return
			case <-window.C:
				break fill
			case ev := <-c.events:
				if ev.fence != first.fence {
					carry = &ev // an event of another leadership: its own Txn
					break fill
				}
				batch = append(batch, ev.op)
			}
		}
		window.Stop()
		_, err := nodestore.ApplyChunked(ctx, c.store, &first.fence, batch)
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
