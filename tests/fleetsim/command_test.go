// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/nodepulse/nodepulse/services/flagenv"
)

// TestMainBadFlags: the flag checks "reporter simulate" had before it became
// fleetsim.
func TestMainBadFlags(t *testing.T) {
	for _, args := range [][]string{
		// GC off needs a memory limit, or the simulator's heap is unbounded.
		{"--runtime.gc-percent=-1", "--nodes=1", "--admin.listen-address="},
		{"--nodes=0", "--admin.listen-address="},
		{"stray"},
	} {
		if err := Main(t.Context(), append(args, "--log.level=error")); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

// TestUsage: --help documents the fault script and the admin endpoints the
// benchmark relies on, and the NODEPULSE_SIM_ environment.
func TestUsage(t *testing.T) {
	var buf bytes.Buffer
	var cfg CommandConfig
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	fs.SetOutput(&buf)
	cfg.RegisterFlags(fs)
	flagenv.PrintUsage(&buf, fs, EnvPrefix, synopsis)
	for _, want := range []string{"fleetsim --nodes", "--faults", "POST /debug/gc", "/debug/sendbins", "$NODEPULSE_SIM_NODES", "--collector.addresses"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}
