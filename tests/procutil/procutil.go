// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package procutil supervises child processes and samples /proc for the
// benchmark tools (tests/cmd/bench and tests/cmd/simbench): start a binary
// with its output in a log file, wait for it to be ready, stop it, and read
// its CPU time, memory and disk writes from /proc. Linux only.
package procutil

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is one supervised child process.
type Proc struct {
	Name string    // as given to Start; names the log file
	Cmd  *exec.Cmd // the started command
	Log  string    // path of the file with the child's stdout and stderr
	// Started is when the child was started, just before exec: what a Go
	// child's runtime counts its own clock from (gctrace's @ times).
	Started time.Time
	done    chan struct{}
	err     error
}

// Start starts bin with args, stdout and stderr to logDir/name.log. The
// child gets its own process group and is SIGKILLed if the parent dies.
func Start(name, logDir, bin string, args ...string) (*Proc, error) {
	return StartEnv(name, logDir, bin, nil, args...)
}

// StartEnv is Start with env added to the parent's environment (later
// entries win, as in exec.Cmd.Env).
func StartEnv(name, logDir, bin string, env []string, args ...string) (*Proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, Started: started, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// Renice sets the scheduling niceness of every thread of the process.
// Linux applies setpriority(PRIO_PROCESS) to one thread, and a Go process
// has several; threads created later inherit it from the thread that
// creates them. Two passes catch a thread started during the first.
func (p *Proc) Renice(nice int) error {
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	for range 2 {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("renice %s: %w", p.Name, err)
		}
		for _, t := range tasks {
			var tid int
			if _, err := fmt.Sscan(t.Name(), &tid); err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("renice %s (thread %d) to %d: %w", p.Name, tid, nice, err)
			}
		}
	}
	return nil
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

// Err is the result of waiting for the process (nil for exit status 0);
// nil while it runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// DeadErr describes a process that exited on its own: its name, how it
// ended and the last 20 lines of its log.
func (p *Proc) DeadErr() error {
	return fmt.Errorf("%s exited (%v); log tail:\n%s", p.Name, p.Err(), Tail(p.Log, 20))
}

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

// WaitHTTP polls url until it answers 200, the process exits, ctx ends, or
// timeout.
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

// WaitTCP dials addr until it accepts, the process exits, ctx ends, or
// timeout.
func (p *Proc) WaitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return p.DeadErr()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after %s (%v); log tail:\n%s", p.Name, addr, timeout, err, Tail(p.Log, 20))
		}
	}
}

// Tail returns the last n lines of a file ("" if it cannot be read).
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
