// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package run

import (
	"context"
	"time"
)

// Every calls fn once every d until ctx is done, the first time d after it
// is called (callers that want a call at once make it before). A call that
// takes longer than d delays the next one rather than piling calls up: the
// ticker drops the ticks missed meanwhile, so fn never runs twice in a row
// to catch up. Every returns only once ctx is done, never while fn runs.
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A tick and the end of ctx may arrive together; the select picks
		// either, so check again rather than run fn after the end.
		if ctx.Err() != nil {
			return
		}
		fn()
	}
}
