// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"encoding/json"
	"net/http"
	"runtime"
	"runtime/metrics"
	"time"
)

// Collected is the answer of POST /debug/gc (CollectHandler).
type Collected struct {
	HeapBeforeBytes uint64  `json:"heapBeforeBytes"`
	HeapAfterBytes  uint64  `json:"heapAfterBytes"`
	Seconds         float64 `json:"seconds"`
}

// heapObjects is the runtime metric of the bytes in heap objects, live or
// not yet swept: what a collection frees.
const heapObjects = "/memory/classes/heap/objects:bytes"

// CollectHandler serves POST /debug/gc: one full garbage collection now,
// answered when it is over.
//
// Why: the benchmark runs the simulator with its GC off below a memory
// limit, because a collection of a heap that carries 100,000 virtual nodes
// stalls every one of them at once for seconds, which real reporters, each
// with its own small heap, never do. The garbage of a ramp (every node's
// registration and first status) is most of what later brings the heap to
// the limit, and a collection there falls into whatever stage is running,
// so the benchmark asks for one when the ramp is over, before the load it
// measures (tests/bench, "settling").
func CollectHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST collects garbage now", http.StatusMethodNotAllowed)
			return
		}
		var c Collected
		c.HeapBeforeBytes = heapBytes()
		start := time.Now()
		runtime.GC()
		c.Seconds = time.Since(start).Seconds()
		c.HeapAfterBytes = heapBytes()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	})
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
