package app

import (
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
