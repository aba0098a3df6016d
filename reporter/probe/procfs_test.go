// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package probe

import (
	"os"
	"path/filepath"
	"testing"
)

func writeTree(t *testing.T, files map[string]string, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPIDsWithoutLoadavg: without /proc/loadavg the processes are counted
// through procfs' process list (numeric directories only).
func TestPIDsWithoutLoadavg(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/sys/kernel/pid_max":     "32768\n",
		"proc/sys/kernel/threads-max": "64000\n",
	}, "proc/1", "proc/22", "proc/self-not-a-pid", "proc/sys/x")
	limit, used, err := New(root).pids()
	if err != nil || limit != 32768 || used != 2 {
		t.Fatalf("pids = %d, %d, %v; want 32768, 2", limit, used, err)
	}
}

// TestMeminfoEdges pins where procfs differs from the parser it replaced:
// a line the kernel would never write fails the whole reading (the old
// parser skipped it), so the node reports the machine as unreadable rather
// than a total from a damaged file; a missing MemAvailable still counts
// total as available; no huge page size means no huge pages.
func TestMeminfoEdges(t *testing.T) {
	read := func(meminfo string) *Snapshot {
		root := writeTree(t, map[string]string{"proc/meminfo": meminfo})
		s := &Snapshot{}
		s.MachineErr = New(root).readMeminfo(s)
		return s
	}
	if s := read("MemTotal: 2048 kB\nGarbage: x kB\n"); s.MachineErr == nil {
		t.Errorf("damaged meminfo read as %+v", s)
	}
	if s := read("MemTotal: 2048 kB\n"); s.MachineErr != nil || s.MemAvailableBytes != 2<<20 || s.HugePages != nil {
		t.Errorf("old kernel: %+v", s)
	}
	if s := read("MemFree: 2048 kB\n"); s.MachineErr == nil {
		t.Error("meminfo without MemTotal accepted")
	}
}
