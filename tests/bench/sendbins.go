// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// sendBins is the simulator's GET /debug/sendbins answer.
type sendBins struct {
	BinMs  int64    `json:"binMs"`
	FromMs int64    `json:"fromMs"`
	Counts []uint32 `json:"counts"`
}

// sentBins adds up the renewals every running simulator sent in each
// 100 ms of [from, to): the load as the fleet offered it, beside the
// observer's bins of the same renewals as they reached the collector. A
// stall between the two (a GC cycle on either side, a busy box) bunches
// arrivals, not sends, so the pair tells where an uneven bin came from.
func (r *runner) sentBins(ctx context.Context, from, to time.Time) ([]float64, error) {
	var sum []float64
	var fromMs int64
	n := 0
	for role, a := range map[string]string{"sim": r.simAdmin, "sim-kill": r.killAdm} {
		if !r.alive(role) {
			continue
		}
		sb, err := getSendBins(ctx, r.http, "http://"+a, from, to)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", role, err)
		}
		if sb.BinMs != 100 {
			return nil, fmt.Errorf("%s: bins of %d ms, want 100", role, sb.BinMs)
		}
		if n == 0 {
			sum, fromMs = make([]float64, len(sb.Counts)), sb.FromMs
		} else if sb.FromMs != fromMs || len(sb.Counts) != len(sum) {
			return nil, fmt.Errorf("%s: bins from %d (%d of them), the other simulator's from %d (%d)", role, sb.FromMs, len(sb.Counts), fromMs, len(sum))
		}
		for i, c := range sb.Counts {
			sum[i] += float64(c)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no simulator running")
	}
	return sum, nil
}

func getSendBins(ctx context.Context, c *http.Client, base string, from, to time.Time) (sendBins, error) {
	var sb sendBins
	q := url.Values{"from": {fmt.Sprint(from.UnixMilli())}, "to": {fmt.Sprint(to.UnixMilli())}}
	return sb, getJSON(ctx, c, base+"/debug/sendbins?"+q.Encode(), &sb)
}

// getJSON GETs u and decodes its JSON body into v; any status but 200 is
// an error carrying the start of the body.
func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	return doJSON(ctx, c, http.MethodGet, u, v)
}

// doJSON sends a request with no body and decodes the JSON answer into v.
func doJSON(ctx context.Context, c *http.Client, method, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	return nil
}
