// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package probe reads the host signals the reporter's setters need: CPU and
// memory, the root filesystem's space and inodes, PID headroom, kernel and OS
// identity, machine and boot ids. Every file is read under a host root
// (default "/"), so the reporter can run in a container with the host's
// filesystem mounted at e.g. /host and still describe the host, not itself.
//
// A probe never fails as a whole: each part records its own error and leaves
// its fields zero, because a node with an unreadable DMI table must still
// report that it is alive (the Ready setter turns missing capacity into a
// NotReady reason instead).
//
// The package is exported (not internal) only for the tests module's fleet
// simulator, which fills a Snapshot by hand for the setters instead of
// probing a host.
package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
)

// Prober reads the host under Root.
type Prober struct {
	// Root is where the host's filesystem is visible ("/" when the reporter
	// runs directly on the host).
	Root string
}

// New returns a prober for the host mounted at root ("" means "/").
func New(root string) *Prober {
	if root == "" {
		root = "/"
	}
	return &Prober{Root: root}
}

// FS is the space and inode usage of one filesystem.
type FS struct {
	CapacityBytes  int64
	AvailableBytes int64
	Inodes         int64
	InodesFree     int64
}

// Snapshot is one reading of the host. A part that could not be read has its
// error set and its fields zero.
type Snapshot struct {
	// NumCPU is the number of logical CPUs of the host.
	NumCPU int
	// MemTotalBytes and MemAvailableBytes come from /proc/meminfo.
	MemTotalBytes     int64
	MemAvailableBytes int64
	// HugePages maps a page size in bytes to the bytes of pre-allocated huge
	// pages of that size (HugePages_Total × Hugepagesize).
	HugePages map[int64]int64
	// MachineErr is set when CPU or memory could not be read.
	MachineErr error

	// NodeFS is the root filesystem (the kubelet's nodefs; without a
	// container runtime it also stands for imagefs).
	NodeFS FS
	FSErr  error

	// PIDMax is min(kernel.pid_max, kernel.threads-max), the number of
	// process ids the host can hand out; Processes is how many are in use.
	PIDMax    int64
	Processes int64
	PIDErr    error

	// Identity of the machine and its software.
	KernelVersion string
	OSImage       string
	MachineID     string
	SystemUUID    string
	BootID        string
	// InfoErrs lists the identity fields that could not be read.
	InfoErrs []error
}

// Errs returns every error of the snapshot, for logging.
func (s *Snapshot) Errs() error {
	return errors.Join(append([]error{s.MachineErr, s.FSErr, s.PIDErr}, s.InfoErrs...)...)
}

// Read takes a snapshot of the host.
func (p *Prober) Read() *Snapshot {
	s := &Snapshot{}
	s.NumCPU = p.numCPU()
	if err := p.readMeminfo(s); err != nil {
		s.MachineErr = err
	}
	fs, err := p.statfs(p.Root)
	s.NodeFS, s.FSErr = fs, err
	s.PIDMax, s.Processes, s.PIDErr = p.pids()

	var errs []error
	read := func(dst *string, what string, paths ...string) {
		v, err := p.firstLine(paths...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		*dst = v
	}
	read(&s.KernelVersion, "kernel version", "proc/sys/kernel/osrelease")
	read(&s.MachineID, "machine id", "etc/machine-id", "var/lib/dbus/machine-id")
	read(&s.SystemUUID, "system uuid", "sys/class/dmi/id/product_uuid")
	read(&s.BootID, "boot id", "proc/sys/kernel/random/boot_id")
	if v, err := p.osImage(); err != nil {
		errs = append(errs, fmt.Errorf("os image: %w", err))
	} else {
		s.OSImage = v
	}
	s.InfoErrs = errs
	return s
}

func (p *Prober) path(rel string) string { return filepath.Join(p.Root, rel) }

// procFS opens the host's /proc for github.com/prometheus/procfs.
func (p *Prober) procFS() (procfs.FS, error) {
	fs, err := procfs.NewFS(p.path("proc"))
	if err != nil {
		return procfs.FS{}, fmt.Errorf("open %s: %w", p.path("proc"), err)
	}
	return fs, nil
}

// numCPU counts the processors of the host's /proc/cpuinfo (procfs). Under
// the host root "/", runtime.NumCPU would honour this process's CPU
// affinity and so could undercount the machine; elsewhere it would describe
// the container rather than the host. It is only the fallback when cpuinfo
// is unreadable or procfs cannot parse it (its parser is per architecture).
func (p *Prober) numCPU() int {
	if fs, err := p.procFS(); err == nil {
		if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
			return len(cpus)
		}
	}
	return runtime.NumCPU()
}

func (p *Prober) readMeminfo(s *Snapshot) error {
	fs, err := p.procFS()
	if err != nil {
		return fmt.Errorf("read meminfo: %w", err)
	}
	m, err := fs.Meminfo()
	if err != nil {
		return fmt.Errorf("read meminfo: %w", err)
	}
	if m.MemTotalBytes == nil {
		return errors.New("meminfo has no MemTotal")
	}
	s.MemTotalBytes = int64(*m.MemTotalBytes)
	if m.MemAvailableBytes != nil {
		s.MemAvailableBytes = int64(*m.MemAvailableBytes)
	} else {
		// Kernels before 3.14 lack MemAvailable; pretend nothing is free
		// would invent pressure, so count total as available and say so.
		s.MemAvailableBytes = s.MemTotalBytes
	}
	if m.HugepagesizeBytes != nil && *m.HugepagesizeBytes > 0 {
		var total int64
		if m.HugePagesTotal != nil {
			total = int64(*m.HugePagesTotal)
		}
		size := int64(*m.HugepagesizeBytes)
		s.HugePages = map[int64]int64{size: total * size}
	}
	return nil
}

func (p *Prober) statfs(path string) (FS, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return FS{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := int64(st.Bsize) //nolint:unconvert // int32 on some platforms
	return FS{
		CapacityBytes:  int64(st.Blocks) * bs,
		AvailableBytes: int64(st.Bavail) * bs,
		Inodes:         int64(st.Files),
		InodesFree:     int64(st.Ffree),
	}, nil
}

// pids returns the PID limit and the number of scheduling entities in use.
// Like the kubelet, the limit is the smaller of pid_max and threads-max and
// usage counts threads (the 4th field of /proc/loadavg, "running/total"),
// because threads consume PIDs too. procfs reads the sysctls; its LoadAvg
// has only the three averages, so the thread count is read here, with
// procfs' process list as the fallback (processes, not threads).
func (p *Prober) pids() (limit, used int64, err error) {
	fs, err := p.procFS()
	if err != nil {
		return 0, 0, err
	}
	pidMax, err := sysctlInt(fs, "kernel.pid_max")
	if err != nil {
		return 0, 0, err
	}
	limit = pidMax
	if tm, err := sysctlInt(fs, "kernel.threads-max"); err == nil && tm < limit {
		limit = tm
	}
	la, err := p.firstLine("proc/loadavg")
	if err == nil {
		f := strings.Fields(la)
		if len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				if n, perr := strconv.ParseInt(total, 10, 64); perr == nil {
					return limit, n, nil
				}
			}
		}
	}
	procs, derr := fs.AllProcs()
	if derr != nil {
		return limit, 0, fmt.Errorf("count processes: %w", errors.Join(err, derr))
	}
	return limit, int64(len(procs)), nil
}

// sysctlInt reads a one-value sysctl ("kernel.pid_max").
func sysctlInt(fs procfs.FS, name string) (int64, error) {
	v, err := fs.SysctlInts(name)
	if err != nil {
		return 0, fmt.Errorf("sysctl %s: %w", name, err)
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("sysctl %s: %d values, want 1", name, len(v))
	}
	return int64(v[0]), nil
}

// firstLine returns the trimmed first line of the first readable file.
func (p *Prober) firstLine(rels ...string) (string, error) {
	var errs []error
	for _, rel := range rels {
		data, err := os.ReadFile(p.path(rel))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		line, _, _ := strings.Cut(string(data), "\n")
		if line = strings.TrimSpace(line); line != "" {
			return line, nil
		}
		errs = append(errs, fmt.Errorf("%s is empty", p.path(rel)))
	}
	return "", errors.Join(errs...)
}

// osImage returns PRETTY_NAME from os-release (/etc first, then /usr/lib, as
// os-release(5) prescribes).
func (p *Prober) osImage() (string, error) {
	var errs []error
	for _, rel := range []string{"etc/os-release", "usr/lib/os-release"} {
		data, err := os.ReadFile(p.path(rel))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
				if uq, err := strconv.Unquote(v); err == nil {
					v = uq
				} else {
					v = strings.Trim(v, `"'`)
				}
				return v, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s has no PRETTY_NAME", p.path(rel)))
	}
	return "", errors.Join(errs...)
}
