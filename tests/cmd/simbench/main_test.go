// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for simbench when run re-executes
// itself as a child (fake-collector, fleetsim).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "fake-collector" || os.Args[1] == "fleetsim") {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP x y
# TYPE nodepulse_sim_streams_connected gauge
nodepulse_sim_streams_connected 100000
nodepulse_sim_lease_renewals_sent_total 1.234e+06
h_bucket{le="0.5"} 3
h_bucket{le="+Inf"} 4 1700000000
`))
	if err != nil {
		t.Fatal(err)
	}
	if m[mConnected] != 100000 || m[mRenewals] != 1234000 || m["h_bucket"] != 7 {
		t.Fatalf("parsed %v", m)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567", -5000: "-5,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestSmallRun runs the whole plumbing with a few hundred nodes.
func TestSmallRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))); err != nil {
		t.Skipf("port %d taken", port+1)
	} else {
		l2.Close()
	}
	out := filepath.Join(t.TempDir(), "r.json")
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = mainArgs(ctx, []string{"--nodes=300", "--connections=3", "--base-port=" + strconv.Itoa(port),
		"--settle=500ms", "--hold=2s", "--register-timeout=1m", "--out=" + out}, &buf)
	t.Log(buf.String())
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Nodes != 300 || res.Registration.PerSecond <= 0 || res.Steady == nil || res.Steady.ConnectedAtEnd != 300 ||
		res.Steady.Renewals <= 0 || len(res.Goals) != 2 {
		t.Fatalf("result %+v, steady %+v", res, res.Steady)
	}
}
