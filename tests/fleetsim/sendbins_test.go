// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestSendBins(t *testing.T) {
	b := newSendBins()
	t0 := time.UnixMilli(1_700_000_000_000) // on a bin boundary
	for i, n := range []int{3, 0, 5, 1} {
		for range n {
			b.add(t0.Add(time.Duration(i)*SendBinWidth + 42*time.Millisecond))
		}
	}
	first, got := b.counts(t0, t0.Add(4*SendBinWidth))
	if first != binOf(t0) || !slices.Equal(got, []uint32{3, 0, 5, 1}) {
		t.Fatalf("counts = %d %v, want %d [3 0 5 1]", first, got, binOf(t0))
	}

	// An hour later the same slots hold new bins; the old counts are gone,
	// not added to.
	later := t0.Add(sendBinSlots * SendBinWidth)
	b.add(later)
	if _, got := b.counts(later, later.Add(2*SendBinWidth)); !slices.Equal(got, []uint32{1, 0}) {
		t.Fatalf("after wrapping: %v, want [1 0]", got)
	}
	if _, got := b.counts(t0, t0.Add(SendBinWidth)); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("a bin older than the ring reads %v, want [0]", got)
	}

	// Senders count concurrently without losing any.
	var wg sync.WaitGroup
	at := t0.Add(10 * time.Minute)
	for range 8 {
		wg.Go(func() {
			for range 10_000 {
				b.add(at)
			}
		})
	}
	wg.Wait()
	if _, got := b.counts(at, at.Add(SendBinWidth)); got[0] != 80_000 {
		t.Fatalf("concurrent adds: %d, want 80000", got[0])
	}
}

func TestSendBinsHandler(t *testing.T) {
	s := &Simulator{sent: newSendBins()}
	t0 := time.UnixMilli(1_700_000_000_000)
	s.sent.add(t0.Add(150 * time.Millisecond))
	h := s.SendBinsHandler()
	get := func(q string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/sendbins?"+q, nil))
		return w
	}
	ms := strconv.FormatInt(t0.UnixMilli(), 10)
	w := get("from=" + ms + "&to=" + strconv.FormatInt(t0.UnixMilli()+300, 10))
	var sb SendBins
	if err := json.Unmarshal(w.Body.Bytes(), &sb); w.Code != http.StatusOK || err != nil {
		t.Fatalf("status %d, body %q: %v", w.Code, w.Body, err)
	}
	if sb.BinMs != 100 || sb.FromMs != t0.UnixMilli() || !slices.Equal(sb.Counts, []uint32{0, 1, 0}) {
		t.Fatalf("got %+v", sb)
	}
	for _, q := range []string{"", "from=x&to=1", "from=" + ms, "from=" + ms + "&to=1"} {
		if w := get(q); w.Code != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400", q, w.Code)
		}
	}
}
