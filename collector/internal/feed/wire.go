// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package feed

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/nodepulse/nodepulse/collector/internal/live"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// Every renewal is one feed event, and every event used to be two protobuf
// objects (a LivenessEvent and its Timestamp) built at each flush and then
// marshalled once per subscriber: at 10,000 renewals a second, a sixth of
// the collector's garbage. Now a flush codes its events by hand, once, into
// bytes that travel as the response's unknown fields. proto.Marshal copies
// unknown fields verbatim, after the known ones; a receiver parses them as
// the repeated events field (3), since protobuf accepts fields in any
// order. wire_test.go checks that receivers see exactly what proto.Marshal
// of the same events gives.

// Field numbers, from feed.proto and the well-known types.
const (
	fieldResponseEvents = 3 // WatchLivenessResponse.events
	fieldEventName      = 1 // LivenessEvent.node_name
	fieldEventKind      = 2 // LivenessEvent.kind
	fieldEventRenew     = 3 // LivenessEvent.renew_time
	fieldEventSeconds   = 4 // LivenessEvent.lease_duration_seconds
	fieldEventRetry     = 5 // LivenessEvent.retry_within
	fieldEventStatusHB  = 6 // LivenessEvent.status_heartbeat_time
	fieldEventReceived  = 7 // LivenessEvent.received_time
	fieldSeconds        = 1 // Timestamp.seconds, Duration.seconds
	fieldNanos          = 2 // Timestamp.nanos, Duration.nanos
)

// appendEvents appends evs as WatchLivenessResponse.events elements.
// Node names are valid UTF-8: registration validated them.
func appendEvents(b []byte, evs []live.Event) []byte {
	for i := range evs {
		b = appendEvent(b, &evs[i])
	}
	return b
}

func appendEvent(b []byte, e *live.Event) []byte {
	// A STATUS_REPORTED event carries its status heartbeat in RenewTime
	// (live.Event), coded as status_heartbeat_time.
	timeField := protowire.Number(fieldEventRenew)
	if e.Kind == collectorv1.LivenessEventKind_LIVENESS_EVENT_KIND_STATUS_REPORTED {
		timeField = fieldEventStatusHB
	}
	var rs, rn, ds, dn int64
	if !e.RenewTime.IsZero() {
		rs, rn = e.RenewTime.Unix(), int64(e.RenewTime.Nanosecond())
	}
	if e.RetryWithin > 0 {
		ds, dn = int64(e.RetryWithin/time.Second), int64(e.RetryWithin%time.Second)
	}
	var qs, qn int64
	if e.Received != 0 {
		q := time.Unix(0, e.Received) // normalised: nanos in [0, 1e9)
		qs, qn = q.Unix(), int64(q.Nanosecond())
	}
	size := 0
	if e.Name != "" {
		size += protowire.SizeTag(fieldEventName) + protowire.SizeBytes(len(e.Name))
	}
	if e.Kind != 0 {
		size += protowire.SizeTag(fieldEventKind) + protowire.SizeVarint(uint64(int64(e.Kind)))
	}
	if !e.RenewTime.IsZero() {
		size += protowire.SizeTag(timeField) + protowire.SizeBytes(pairSize(rs, rn))
	}
	if e.DurationSeconds != 0 {
		size += protowire.SizeTag(fieldEventSeconds) + protowire.SizeVarint(uint64(int64(e.DurationSeconds)))
	}
	if e.RetryWithin > 0 {
		size += protowire.SizeTag(fieldEventRetry) + protowire.SizeBytes(pairSize(ds, dn))
	}
	if e.Received != 0 {
		size += protowire.SizeTag(fieldEventReceived) + protowire.SizeBytes(pairSize(qs, qn))
	}
	b = protowire.AppendTag(b, fieldResponseEvents, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if e.Name != "" {
		b = protowire.AppendTag(b, fieldEventName, protowire.BytesType)
		b = protowire.AppendString(b, e.Name)
	}
	if e.Kind != 0 {
		b = protowire.AppendTag(b, fieldEventKind, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(e.Kind)))
	}
	if !e.RenewTime.IsZero() {
		b = appendPair(b, timeField, rs, rn)
	}
	if e.DurationSeconds != 0 {
		b = protowire.AppendTag(b, fieldEventSeconds, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(e.DurationSeconds)))
	}
	if e.RetryWithin > 0 {
		b = appendPair(b, fieldEventRetry, ds, dn)
	}
	if e.Received != 0 {
		b = appendPair(b, fieldEventReceived, qs, qn)
	}
	return b
}

// pairSize is the size of a Timestamp or Duration body (seconds, nanos).
func pairSize(sec, nanos int64) int {
	n := 0
	if sec != 0 {
		n += protowire.SizeTag(fieldSeconds) + protowire.SizeVarint(uint64(sec))
	}
	if nanos != 0 {
		n += protowire.SizeTag(fieldNanos) + protowire.SizeVarint(uint64(nanos))
	}
	return n
}

// appendPair appends a Timestamp or Duration as field num.
func appendPair(b []byte, num protowire.Number, sec, nanos int64) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(pairSize(sec, nanos)))
	if sec != 0 {
		b = protowire.AppendTag(b, fieldSeconds, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(sec))
	}
	if nanos != 0 {
		b = protowire.AppendTag(b, fieldNanos, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(nanos))
	}
	return b
}
