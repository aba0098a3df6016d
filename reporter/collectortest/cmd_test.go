// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package collectortest

import (
	"os"
	"os/signal"
	"testing"
)

// TestServeForManualRuns serves a fake collector on FAKE_COLLECTOR_ADDR until
// interrupted; skipped unless that variable is set.
func TestServeForManualRuns(t *testing.T) {
	addr := os.Getenv("FAKE_COLLECTOR_ADDR")
	if addr == "" {
		t.Skip("set FAKE_COLLECTOR_ADDR to serve a fake collector by hand")
	}
	c, err := New("manual", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	<-ch
	for name, n := range c.Nodes() {
		t.Logf("%s: registers=%d leases=%d statuses=%d leaving=%d", name, n.Registers, n.Leases, n.Statuses, n.Leaving)
	}
}
