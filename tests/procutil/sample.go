// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package procutil

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcSample is what /proc says about a process at one instant.
type ProcSample struct {
	At         time.Time // when the sample was taken
	CPUSeconds float64   // utime+stime since start
	RSSBytes   int64     // VmRSS
	WriteBytes int64     // /proc/<pid>/io write_bytes (storage layer)
}

// clkTck is USER_HZ; 100 on every Linux the benchmarks run on.
const clkTck = 100

// Sample reads /proc/<pid>/stat, status and io. The error is that of
// reading or parsing stat; RSSBytes and WriteBytes stay 0 when status or
// io cannot be read.
func Sample(pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.CPUSeconds, err = parseStatCPU(b); err != nil {
		return s, err
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		s.RSSBytes = parseKBField(st, "VmRSS:")
	}
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(io))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
				s.WriteBytes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return s, nil
}

// parseStatCPU returns utime+stime in seconds from /proc/<pid>/stat.
func parseStatCPU(b []byte) (float64, error) {
	// The command name may contain spaces; fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state is field 3 of the line, utime 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc stat times")
	}
	return float64(ut+st) / clkTck, nil
}

// parseKBField returns the "key  N kB" value of a /proc file in bytes (0
// if absent).
func parseKBField(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

// LoadAvg is the first three fields of /proc/loadavg ("" if unreadable).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Load1 is the one-minute load average (0 if unreadable).
func Load1() float64 {
	f := strings.Fields(LoadAvg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// CPUTimes are the machine's CPU seconds since boot, all CPUs together,
// to show how busy the whole machine was (other tenants).
type CPUTimes struct {
	// Busy is everything but idle and iowait, steal included.
	Busy, Total float64
	// Steal is time a virtual machine's CPUs were ready to run but the
	// hypervisor ran something else: on a shared VM, the other tenants.
	Steal float64
}

// SystemCPUTimes reads the first line of /proc/stat (zero if it cannot).
func SystemCPUTimes() CPUTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return CPUTimes{}
	}
	var t CPUTimes
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		t.Total += n
		if i != 3 && i != 4 { // idle, iowait
			t.Busy += n
		}
		if i == 7 {
			t.Steal = n / clkTck
		}
	}
	t.Busy /= clkTck
	t.Total /= clkTck
	return t
}

// CPUModel is the first "model name" of /proc/cpuinfo ("" if none).
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return ""
}

// MemTotal is MemTotal of /proc/meminfo in bytes (0 if unreadable).
func MemTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseKBField(b, "MemTotal:")
}
