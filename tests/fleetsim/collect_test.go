// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"testing"
)

var sink []byte

// POST /debug/gc collects at once and says what it freed; other methods
// are refused.
func TestCollectHandler(t *testing.T) {
	srv := httptest.NewServer(CollectHandler())
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Fatalf("GET: %s, Allow %q; want 405 and POST", resp.Status, resp.Header.Get("Allow"))
	}

	// With the GC off, as in the benchmark, garbage stays until asked for.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const garbage = 64 << 20
	sink = make([]byte, garbage)
	sink = nil
	resp, err = http.Post(srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c Collected
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %s, %v", resp.Status, err)
	}
	if c.HeapBeforeBytes < garbage || c.HeapBeforeBytes-c.HeapAfterBytes < garbage/2 || c.Seconds <= 0 {
		t.Fatalf("%+v: want the %d bytes of garbage freed", c, garbage)
	}
}
