// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package procutil

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// Fields after the command name: state(3) ... utime(14)=250 stime(15)=50.
	for _, stat := range []string{
		"42 (a b) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0",
		"4242 (my (weird) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000 10 18446744073709551615",
	} {
		if cpu, err := parseStatCPU([]byte(stat)); err != nil || cpu != 3 {
			t.Errorf("parseStatCPU(%q) = %v, %v; want 3", stat, cpu, err)
		}
	}
	for stat, want := range map[string]string{
		"42 no parens": "bad /proc stat",
		"42 (a) S 1 2": "short /proc stat",
		"42 (a) S 1 42 42 0 -1 4194304 100 0 0 0 x 50 0": "bad /proc stat times",
	} {
		if _, err := parseStatCPU([]byte(stat)); err == nil || err.Error() != want {
			t.Errorf("parseStatCPU(%q) error %v, want %q", stat, err, want)
		}
	}
}

func TestParseKBField(t *testing.T) {
	b := []byte("Name:\tx\nVmPeak:\t  2048 kB\nVmRSS:\t    1500 kB\n")
	if got := parseKBField(b, "VmRSS:"); got != 1500*1024 {
		t.Errorf("VmRSS = %d", got)
	}
	if got := parseKBField(b, "VmSwap:"); got != 0 {
		t.Errorf("absent field = %d", got)
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, []byte("1\n2\n3\n4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := Tail(path, 2); got != "3\n4" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail(path, 10); got != "1\n2\n3\n4" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 2); got != "" {
		t.Errorf("Tail of a missing file = %q", got)
	}
}

func TestSampleSelf(t *testing.T) {
	s, err := Sample(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUSeconds < 0 || s.RSSBytes <= 0 || s.At.IsZero() {
		t.Errorf("sample %+v", s)
	}
	if _, err := Sample(-1); err == nil {
		t.Error("want an error for a missing process")
	}
}

func TestStartExitsEarly(t *testing.T) {
	dir := t.TempDir()
	p, err := Start("early", dir, "/bin/sh", "-c", "echo hello; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if p.Log != filepath.Join(dir, "early.log") {
		t.Errorf("log %s", p.Log)
	}
	err = p.WaitTCP(context.Background(), "127.0.0.1:1", 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "early exited (exit status 3); log tail:\nhello") {
		t.Fatalf("WaitTCP: %v", err)
	}
	if !p.Exited() || p.Err() == nil {
		t.Errorf("exited %v, err %v", p.Exited(), p.Err())
	}
}

func TestStopAndWaitTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := Start("sleeper", t.TempDir(), "/bin/sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitTCP(context.Background(), l.Addr().String(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Exited() || p.Err() != nil {
		t.Fatal("sleeper ended early")
	}
	if _, err := Sample(p.Pid()); err != nil {
		t.Error(err)
	}
	p.Stop(5 * time.Second)
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	p.Kill() // no-op once ended
}

// TestHelperIdle is the child of TestReniceEveryThread: a Go process with
// several threads that waits to be killed.
func TestHelperIdle(t *testing.T) {
	if os.Getenv("PROCUTIL_HELPER") != "1" {
		t.Skip("helper process only")
	}
	time.Sleep(time.Minute)
}

// Renice reaches every thread of a multi-threaded child, not only the one
// whose id is the pid.
func TestReniceEveryThread(t *testing.T) {
	os.Setenv("PROCUTIL_HELPER", "1")
	p, err := Start("threads", t.TempDir(), os.Args[0], "-test.run=^TestHelperIdle$")
	os.Unsetenv("PROCUTIL_HELPER")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	time.Sleep(200 * time.Millisecond) // the runtime starts its threads
	if err := p.Renice(7); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.Pid()), "task"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 2 {
		t.Fatalf("child has %d threads; the test needs several", len(tasks))
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.Pid()), "task", task.Name(), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		// Field 19 is nice; fields after the ")" that ends comm start at 3.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if f[16] != "7" {
			t.Errorf("thread %s: nice %s, want 7", task.Name(), f[16])
		}
	}
}

// TestSystemCPUTimes reads this machine's /proc/stat: busy and steal are
// parts of the total, and time only grows.
func TestSystemCPUTimes(t *testing.T) {
	a := SystemCPUTimes()
	if a.Total <= 0 {
		t.Skip("no /proc/stat")
	}
	if a.Busy < 0 || a.Busy > a.Total || a.Steal < 0 || a.Steal > a.Busy {
		t.Fatalf("inconsistent CPU times %+v", a)
	}
	b := SystemCPUTimes()
	if b.Busy < a.Busy || b.Total < a.Total || b.Steal < a.Steal {
		t.Fatalf("CPU times went back: %+v, then %+v", a, b)
	}
}
