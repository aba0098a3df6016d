// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// statusDigest stands for a stored NodeStatus in the per-stream cache: a
// stream keeps 32 bytes instead of the decoded status (~3 KB).
//
// It is a SHA-256 of a canonical encoding of exactly what
// nodemodel.StatusChanged compares, so that
//
//	digestOf(a) == digestOf(b)  ⇒  !nodemodel.StatusChanged(a, b)
//
// (up to a hash collision): conditions as a set by type (stable order by
// type) without heartbeat times, transition times as instants, quantities by
// value, addresses in order, nodeInfo and daemonEndpoints by their
// deterministic encoding with presence. The converse holds for every
// difference StatusChanged ignores that a reporter produces in practice
// (heartbeat times, condition order, quantity spelling), so an unchanged
// report still costs no write; where the canonical forms cannot agree (a
// quantity finer than a nanounit, written two ways), the status is written
// once more, never dropped. TestDigestAgreesWithStatusChanged pins both
// directions.
type statusDigest [sha256.Size]byte

// digestOf returns the digest of st (nil has its own); ok is false when st
// could not be encoded, and then no digest may stand for it.
func digestOf(st *nodev1.NodeStatus) (d statusDigest, ok bool) {
	bp := digestBufs.Get().(*[]byte)
	w := digestWriter{b: (*bp)[:0]}
	w.status(st)
	d, ok = w.sum(), !w.failed
	*bp = w.b[:0] // keep what it grew to
	digestBufs.Put(bp)
	return d, ok
}

// status writes the canonical encoding of st.
func (w *digestWriter) status(st *nodev1.NodeStatus) {
	if st == nil {
		w.byte(0)
		return
	}
	w.byte(1)

	var sorted [8]*nodev1.NodeCondition // the four well-known ones and a few custom, without a heap copy
	conds := append(sorted[:0], st.GetConditions()...)
	slices.SortStableFunc(conds, func(x, y *nodev1.NodeCondition) int { return strings.Compare(x.GetType(), y.GetType()) })
	w.uint(uint64(len(conds)))
	for _, c := range conds {
		w.str(c.GetType())
		w.str(c.GetStatus())
		w.str(c.GetReason())
		w.str(c.GetMessage())
		if t := c.GetLastTransitionTime(); t == nil {
			w.byte(0)
		} else {
			at := t.AsTime() // the instant: equal instants encode equally
			w.byte(1)
			w.uint(uint64(at.Unix()))
			w.uint(uint64(at.Nanosecond()))
		}
	}
	w.quantities(st.GetCapacity())
	w.quantities(st.GetAllocatable())
	w.uint(uint64(len(st.GetAddresses())))
	for _, a := range st.GetAddresses() {
		w.str(a.GetType())
		w.str(a.GetAddress())
	}
	w.message(st.GetNodeInfo())
	w.message(st.GetDaemonEndpoints())
}

// digestWriter lays the canonical encoding out in one buffer, hashed once
// at the end: writing to a hash.Hash field by field converted every string
// to a fresh []byte (the interface call lets it escape), most of the
// garbage of a status report the collector finds unchanged.
type digestWriter struct {
	b      []byte
	failed bool
}

// digestBufs keeps encoding buffers between digests: a status encodes to
// ~1 KB, and the collector digests one per node every five minutes.
var digestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func (w *digestWriter) byte(b byte)   { w.b = append(w.b, b) }
func (w *digestWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// str writes s length-prefixed, so no two sequences of strings collide.
func (w *digestWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// quantities writes a resource map by sorted key, each value that parses in
// a canonical form of its value (mantissa and decimal exponent, so "4",
// "4000m" and "4e0" agree, and so do "4Ki" and "4096": resource.Quantity's
// String keeps the input's format and would not), else verbatim and marked
// as such (equal strings still agree, as in StatusChanged, which compares
// parsed values).
func (w *digestWriter) quantities(m map[string]string) {
	keys := make([]string, 0, 16) // on the stack for a machine's resources
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.uint(uint64(len(keys)))
	var buf [32]byte
	for _, k := range keys {
		w.str(k)
		v := m[k]
		if q, err := resource.ParseQuantity(v); err == nil {
			mant, exp := q.AsCanonicalBytes(buf[:0])
			w.byte(1)
			w.uint(uint64(len(mant)))
			w.b = append(w.b, mant...)
			w.uint(uint64(int64(exp)))
			continue
		}
		w.byte(2)
		w.str(v)
	}
}

// message writes presence and the deterministic encoding, which is equal
// exactly when proto.Equal is (no maps, floats or extensions in these
// messages; unknown fields are compared by both).
func (w *digestWriter) message(m proto.Message) {
	if m == nil || !m.ProtoReflect().IsValid() {
		w.byte(0)
		return
	}
	// Presence, then the encoding behind a fixed-width length filled in
	// once it is known, so the message is marshalled straight into place.
	w.byte(1)
	at := len(w.b)
	w.b = append(w.b, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(w.b, m)
	if err != nil {
		w.failed = true // cannot happen for these messages
		return
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	w.b = b
}

func (w *digestWriter) sum() statusDigest { return sha256.Sum256(w.b) }
