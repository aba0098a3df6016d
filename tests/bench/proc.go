// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is one child process of the benchmark.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
}

// StartProc starts bin with args, stdout and stderr to logDir/name.log. The
// child gets its own process group and is killed if the benchmark dies.
func StartProc(name, logDir, bin string, args ...string) (*Proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// Pid of the process.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM, waits up to timeout, then SIGKILLs.
func (p *Proc) Stop(timeout time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Kill sends SIGKILL and waits.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// WaitHTTP polls url until it answers 200, the process exits, or timeout.
func (p *Proc) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	var last error
	for {
		resp, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		last = err
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before it was ready; log tail:\n%s", p.Name, p.err, Tail(p.Log, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (%v); log tail:\n%s", p.Name, timeout, last, Tail(p.Log, 20))
		}
	}
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ProcSample is what /proc says about a process at one instant.
type ProcSample struct {
	CPUSeconds float64 `json:"cpuSeconds"` // utime+stime since start
	RSSBytes   int64   `json:"rssBytes"`
	WriteBytes int64   `json:"writeBytes"` // /proc/<pid>/io write_bytes (storage layer)
	OK         bool    `json:"ok"`
}

// clkTck is USER_HZ; 100 on every Linux the benchmark runs on.
const clkTck = 100

// SampleProc reads /proc/<pid>/stat, status and io.
func SampleProc(pid int) ProcSample {
	var s ProcSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s
	}
	cpu, err := parseStatCPU(b)
	if err != nil {
		return s
	}
	s.CPUSeconds, s.OK = cpu, true
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
	return s
}

// parseStatCPU returns utime+stime in seconds from /proc/<pid>/stat.
func parseStatCPU(b []byte) (float64, error) {
	// The command name may contain spaces; fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state(3) ... utime is field 14, stime 15 (1-based over the whole line).
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad stat times")
	}
	return float64(ut+st) / clkTck, nil
}

func parseKBField(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

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
	var m MachineInfo
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok && m.CPUModel == "" {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
			}
			if strings.HasPrefix(l, "processor") {
				m.CPUs++
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryGiB = float64(parseKBField(b, "MemTotal:")) / (1 << 30)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.FDLimit = fmt.Sprintf("soft %d, hard %d", rl.Cur, rl.Max)
	}
	m.LoadStart = LoadAvg()
	return m
}

// LoadAvg is the first three fields of /proc/loadavg.
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

// Load1 is the one-minute load average.
func Load1() float64 {
	f := strings.Fields(LoadAvg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// SystemCPU returns the machine's busy and total CPU seconds from
// /proc/stat, to show how busy the whole machine was (other tenants).
func SystemCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / clkTck, total / clkTck
}
