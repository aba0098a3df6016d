// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// SendBinWidth is the width of a send bin: the 100 ms of the flatness goal.
const SendBinWidth = 100 * time.Millisecond

// sendBinSlots is how far back the bins reach: an hour, longer than any
// benchmark stage. 288 KB for the whole simulator.
const sendBinSlots = 36_000

// sendBins counts renewals by the 100 ms in which the simulator sent them.
//
// Why: the benchmark bins renewals by their arrival at the collector too,
// and the two differ exactly where something between sender and collector
// stalls (a GC cycle on either side, a busy box): a stall bunches arrivals
// but not sends. The send bins show the load the fleet offers; the arrival
// bins the load the collector sees.
//
// Each slot holds the bin's number (its low 32 bits) above its count, so a
// slot last written an hour ago reads as empty, and adding needs no lock:
// the connections' senders count into it concurrently.
type sendBins struct{ slots []atomic.Uint64 }

func newSendBins() *sendBins { return &sendBins{slots: make([]atomic.Uint64, sendBinSlots)} }

func binOf(t time.Time) int64 { return t.UnixNano() / int64(SendBinWidth) }

// add counts one renewal sent at t.
func (b *sendBins) add(t time.Time) {
	k := binOf(t)
	s := &b.slots[k%sendBinSlots]
	tag := uint64(uint32(k)) << 32
	for {
		v := s.Load()
		next := tag | 1
		if v&^0xffffffff == tag {
			next = v + 1
		}
		if s.CompareAndSwap(v, next) {
			return
		}
	}
}

// counts returns the count of every bin from the one holding from up to,
// not including, the one holding to; bins older than the ring, or never
// written, read 0.
func (b *sendBins) counts(from, to time.Time) (first int64, out []uint32) {
	first, last := binOf(from), binOf(to)
	if last-first > sendBinSlots {
		first = last - sendBinSlots
	}
	for k := first; k < last; k++ {
		v := b.slots[k%sendBinSlots].Load()
		if v>>32 == uint64(uint32(k)) {
			out = append(out, uint32(v))
		} else {
			out = append(out, 0)
		}
	}
	return first, out
}

// SendBins is the answer of the send-bins endpoint.
type SendBins struct {
	// BinMs is the width of a bin; FromMs the Unix time in milliseconds at
	// which the first bin starts.
	BinMs  int64    `json:"binMs"`
	FromMs int64    `json:"fromMs"`
	Counts []uint32 `json:"counts"`
}

// SendBinsHandler serves GET ?from=<unix ms>&to=<unix ms>: the renewals
// sent in each 100 ms between the two, as JSON (SendBins).
func (s *Simulator) SendBinsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ms := func(name string) (time.Time, error) {
			v, err := strconv.ParseInt(r.URL.Query().Get(name), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s: want Unix milliseconds: %w", name, err)
			}
			return time.UnixMilli(v), nil
		}
		from, err1 := ms("from")
		to, err2 := ms("to")
		for _, err := range []error{err1, err2} {
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		if to.Before(from) {
			http.Error(w, "to is before from", http.StatusBadRequest)
			return
		}
		first, c := s.sent.counts(from, to)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(SendBins{BinMs: SendBinWidth.Milliseconds(), FromMs: first * SendBinWidth.Milliseconds(), Counts: c})
	})
}
