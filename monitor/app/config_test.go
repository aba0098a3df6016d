// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestValidateGCPercent(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	cfg.GCPercent = -1 // GC off with no memory limit: unbounded memory
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "runtime.gc-percent") {
		t.Fatalf("negative GC target accepted: %v", err)
	}
}

// The defragmentation flags: sizes in MiB, and rules checked only when it
// is on.
func TestDefragFlags(t *testing.T) {
	parse := func(args ...string) (Config, error) {
		var c Config
		fs := flag.NewFlagSet("monitor", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		err := fs.Parse(args)
		return c, err
	}
	c, err := parse()
	if err != nil || !c.Defrag.Enabled || c.Defrag.MinSize != 64<<20 {
		t.Fatalf("defaults: enabled %v, min size %d, %v", c.Defrag.Enabled, c.Defrag.MinSize, err)
	}
	if c, err = parse("--etcd.defrag-min-size-mib=256"); err != nil || c.Defrag.MinSize != 256<<20 {
		t.Fatalf("--etcd.defrag-min-size-mib=256: %d bytes, %v", c.Defrag.MinSize, err)
	}
	if _, err = parse("--etcd.defrag-min-size-mib=1.5GB"); err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("--etcd.defrag-min-size-mib=1.5GB accepted or unclear: %v", err)
	}
	if c, _ = parse("--etcd.defrag-free-percent=0"); c.Validate() == nil || !strings.Contains(c.Validate().Error(), "--etcd.defrag-free-percent") {
		t.Fatalf("--etcd.defrag-free-percent=0: %v", c.Validate())
	}
	if c, _ = parse("--etcd.defrag=false", "--etcd.defrag-free-percent=0"); c.Validate() != nil {
		t.Fatalf("rules of a disabled defragmenter checked: %v", c.Validate())
	}
}
