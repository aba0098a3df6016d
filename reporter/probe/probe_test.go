// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package probe

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestSmokeThisMachine reads the real host.
func TestSmokeThisMachine(t *testing.T) {
	s := New("/").Read()
	if s.MachineErr != nil {
		t.Fatalf("machine: %v", s.MachineErr)
	}
	cpuinfo := 0
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "processor") {
				cpuinfo++
			}
		}
	}
	if s.NumCPU != runtime.NumCPU() && s.NumCPU != cpuinfo {
		t.Errorf("NumCPU = %d, want runtime.NumCPU() %d or /proc/cpuinfo count %d", s.NumCPU, runtime.NumCPU(), cpuinfo)
	}
	if want := memTotal(t); s.MemTotalBytes != want {
		t.Errorf("MemTotalBytes = %d, want %d", s.MemTotalBytes, want)
	}
	if s.BootID == "" {
		t.Error("empty boot id")
	}
	if _, err := os.Stat("/etc/machine-id"); err != nil {
		t.Logf("skipping the machine-id check: /etc/machine-id is absent here (%v)", err)
	} else if s.MachineID == "" {
		t.Error("empty machine id although /etc/machine-id exists")
	}
	if s.FSErr != nil || s.NodeFS.CapacityBytes <= 0 {
		t.Errorf("root fs: %+v %v", s.NodeFS, s.FSErr)
	}
	if s.PIDErr != nil || s.PIDMax <= 0 || s.Processes <= 0 {
		t.Errorf("pids: max %d used %d err %v", s.PIDMax, s.Processes, s.PIDErr)
	}
	if s.KernelVersion == "" {
		t.Error("empty kernel version")
	}
}

func memTotal(t *testing.T) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// TestHostRoot reads a fake host tree, proving nothing is read outside it.
func TestHostRoot(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/cpuinfo":                   "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n\nprocessor\t: 2\n",
		"proc/meminfo":                   "MemTotal:       2048 kB\nMemAvailable:   1024 kB\nHugePages_Total:       2\nHugepagesize:       2048 kB\n",
		"proc/sys/kernel/pid_max":        "4194304\n",
		"proc/sys/kernel/threads-max":    "1000\n",
		"proc/loadavg":                   "0.00 0.01 0.05 1/321 999\n",
		"proc/sys/kernel/osrelease":      "6.6.6-test\n",
		"proc/sys/kernel/random/boot_id": "boot-1\n",
		"etc/machine-id":                 "mid\n",
		"sys/class/dmi/id/product_uuid":  "uuid\n",
		"usr/lib/os-release":             "NAME=Test\nPRETTY_NAME=\"Test OS 1\"\n",
		"proc/net/route":                 "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\neth9\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\neth1\t00000000\t0101000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\neth0\t00000000\t0101000A\t0003\t0\t0\t50\t00000000\t0\t0\t0\n",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := New(root)
	s := p.Read()
	if err := s.Errs(); err != nil {
		t.Fatalf("errors: %v", err)
	}
	if s.NumCPU != 3 || s.MemTotalBytes != 2<<20 || s.MemAvailableBytes != 1<<20 || s.HugePages[2<<20] != 4<<20 {
		t.Errorf("machine: %+v", s)
	}
	if s.PIDMax != 1000 || s.Processes != 321 {
		t.Errorf("pids: max %d used %d", s.PIDMax, s.Processes)
	}
	if s.KernelVersion != "6.6.6-test" || s.OSImage != "Test OS 1" || s.MachineID != "mid" || s.SystemUUID != "uuid" || s.BootID != "boot-1" {
		t.Errorf("identity: %+v", s)
	}
	if ifc, err := p.DefaultRouteInterface(); err != nil || ifc != "eth0" {
		t.Errorf("default route interface = %q, %v; want eth0 (lowest metric)", ifc, err)
	}
}

func TestNodeIP(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/net"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/net/route"), []byte("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\neth0\t00000000\t0101000A\t0003\t0\t0\t0\t00000000\n"), 0o644)
	p := New(root)
	ips := func(s ...string) []net.IP {
		var out []net.IP
		for _, x := range s {
			out = append(out, net.ParseIP(x))
		}
		return out
	}
	hostIPs := ips("127.0.0.1", "10.0.0.5", "fe80::1", "fd00::5")
	tests := []struct {
		name, node, configured string
		dns                    []net.IP
		dnsErr                 error
		want                   string
		wantErr                string
	}{
		{"configured wins", "n", "10.0.0.5", ips("10.9.9.9"), nil, "10.0.0.5", ""},
		{"configured not on host", "n", "10.0.0.6", nil, nil, "", "not an address of this host"},
		{"configured loopback", "n", "127.0.0.1", nil, nil, "", "loopback"},
		{"node name is an IP", "10.1.2.3", "", nil, nil, "10.1.2.3", ""},
		{"dns prefers IPv4", "n", "", ips("fd00::9", "127.0.1.1", "10.2.2.2"), nil, "10.2.2.2", ""},
		{"dns IPv6 only", "n", "", ips("fd00::9"), nil, "fd00::9", ""},
		{"dns nothing valid: default route", "n", "", ips("127.0.1.1"), nil, "10.0.0.5", ""},
		{"dns error: default route", "n", "", nil, errors.New("no such host"), "10.0.0.5", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Resolver{
				LookupIP:     func(context.Context, string) ([]net.IP, error) { return tc.dns, tc.dnsErr },
				InterfaceIPs: func(string) ([]net.IP, error) { return hostIPs, nil },
			}
			ip, err := p.NodeIP(context.Background(), r, tc.node, tc.configured)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ip.String() != tc.want {
				t.Fatalf("NodeIP = %v, %v; want %s", ip, err, tc.want)
			}
		})
	}
	// Nothing anywhere: the spec's error text.
	r := Resolver{LookupIP: func(context.Context, string) ([]net.IP, error) { return nil, errors.New("nx") },
		InterfaceIPs: func(string) ([]net.IP, error) { return ips("127.0.0.1"), nil }}
	if _, err := p.NodeIP(context.Background(), r, "n", ""); err == nil || !strings.HasPrefix(err.Error(), "can't get ip address of node n") {
		t.Errorf("err = %v", err)
	}
	// The real resolver on this machine must not fail the whole lookup
	// chain in a way that panics; an error is acceptable in a sandbox.
	if _, err := New("/").NodeIP(context.Background(), SystemResolver(), "localhost", ""); err != nil {
		t.Logf("real host: %v (acceptable in a sandbox without a default route)", err)
	}
}
