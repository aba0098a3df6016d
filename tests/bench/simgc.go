// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// simCollected is the simulator's POST /debug/gc answer.
type simCollected struct {
	HeapBeforeBytes uint64  `json:"heapBeforeBytes"`
	HeapAfterBytes  uint64  `json:"heapAfterBytes"`
	Seconds         float64 `json:"seconds"`
}

// collectSims has every running simulator collect its garbage now, and
// says what each freed.
//
// Why: the simulators run with their GC off below a memory limit (their
// collections stall 100,000 virtual nodes at once, which real reporters
// never do), and the ramp's garbage is most of what brings them to it
// later, in the middle of a measured stage: in a 20-minute hold, or in the
// first seconds of a 250,000-node one
// (docs/adr/0019-multiplexed-fleet-simulator.md). Collected after the ramp,
// the stall falls in the settling interval, which is not measured and lets
// the renewals it bunched return to their phases before the steady stage.
func (r *runner) collectSims(ctx context.Context) (string, error) {
	var out []string
	for _, role := range []string{"sim", "sim-kill"} {
		if !r.alive(role) {
			continue
		}
		var c simCollected
		if err := doJSON(ctx, r.http, http.MethodPost, "http://"+r.simAdminOf(role)+"/debug/gc", &c); err != nil {
			return "", fmt.Errorf("%s: %w", role, err)
		}
		out = append(out, fmt.Sprintf("%s %s → %s in %s", role, fbytes(float64(c.HeapBeforeBytes)), fbytes(float64(c.HeapAfterBytes)), fdur(c.Seconds)))
	}
	return strings.Join(out, ", "), nil
}

// simAdminOf is the admin address of the simulator with the given role
// ("sim" or "sim-kill").
func (r *runner) simAdminOf(role string) string {
	if role == "sim-kill" {
		return r.killAdm
	}
	return r.simAdmin
}
