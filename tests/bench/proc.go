// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/nodepulse/nodepulse/tests/procutil"
)

// MachineInfo describes the machine for the report.
type MachineInfo struct {
	CPUModel  string  `json:"cpuModel"`
	CPUs      int     `json:"cpus"`
	MemoryGiB float64 `json:"memoryGiB"`
	Kernel    string  `json:"kernel"`
	FDLimit   string  `json:"fdLimit"`
	LoadStart string  `json:"loadAtStart"`
	LoadEnd   string  `json:"loadAtEnd"`
	GoVersion string  `json:"goVersion"`
}

// ReadMachine gathers MachineInfo from /proc.
func ReadMachine() MachineInfo {
	m := MachineInfo{CPUModel: procutil.CPUModel(), MemoryGiB: float64(procutil.MemTotal()) / (1 << 30)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "processor") {
				m.CPUs++
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.FDLimit = fmt.Sprintf("soft %d, hard %d", rl.Cur, rl.Max)
	}
	m.LoadStart = procutil.LoadAvg()
	return m
}
