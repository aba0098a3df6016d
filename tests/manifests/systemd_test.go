// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	reporterapp "github.com/nodepulse/nodepulse/reporter/app"
	"github.com/nodepulse/nodepulse/services/flagenv"
)

// TestSystemdReporterEnvNamesEveryFlag: deploy/systemd/reporter.env holds
// every reporter flag as its NODEPULSE_* variable (set, or commented out at
// its default) and no variable the reporter does not read.
func TestSystemdReporterEnvNamesEveryFlag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "systemd", "reporter.env"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := reporterapp.DefaultConfig()
	fs := flag.NewFlagSet("reporter", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	var want []string
	fs.VisitAll(func(f *flag.Flag) { want = append(want, flagenv.EnvName("NODEPULSE", f.Name)) })
	if len(want) < 20 {
		t.Fatalf("only %d reporter flags found; has RegisterFlags moved?", len(want))
	}
	var have []string
	set := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(#?)(NODEPULSE_[A-Z0-9_]+)=(.*)$`).FindAllStringSubmatch(string(b), -1) {
		have = append(have, m[2])
		if m[1] == "" {
			set[m[2]] = m[3]
		}
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			t.Errorf("reporter.env lacks %s", w)
		}
	}
	for _, h := range have {
		if !slices.Contains(want, h) {
			t.Errorf("reporter.env sets %s, which is no reporter flag", h)
		}
	}
	// A plain machine reports over mTLS with its node certificate.
	for _, v := range []string{"NODEPULSE_COLLECTOR_ADDRESSES", "NODEPULSE_COLLECTOR_TLS_CERT", "NODEPULSE_COLLECTOR_TLS_KEY", "NODEPULSE_COLLECTOR_TLS_CA"} {
		if set[v] == "" {
			t.Errorf("reporter.env must set %s", v)
		}
	}
	if _, ok := set["NODEPULSE_COLLECTOR_INSECURE"]; ok {
		t.Error("reporter.env must not enable plaintext")
	}
}

// TestSystemdUnit: the unit runs the reporter unprivileged and read-only,
// without hiding the /proc files it reads; systemd-analyze verifies it
// where systemd is installed.
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join(repoRoot(t), "deploy", "systemd", "nodepulse-reporter.service")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, d := range []string{
		"EnvironmentFile=/etc/nodepulse/reporter.env", "ExecStart=/usr/local/bin/nodepulse-reporter",
		"DynamicUser=yes", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "ProtectSystem=strict",
		"Restart=always", "SystemCallFilter=@system-service",
	} {
		if !strings.Contains(unit, d) {
			t.Errorf("unit lacks %q", strings.TrimSpace(d))
		}
	}
	if regexp.MustCompile(`(?m)^ProcSubset=pid`).MatchString(unit) {
		t.Error("ProcSubset=pid hides /proc/meminfo and /proc/stat from the reporter")
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit syntax not verified")
		return
	}
	// Verify a copy whose ExecStart exists on this machine.
	dir := t.TempDir()
	cp := filepath.Join(dir, "nodepulse-reporter.service")
	if err := os.WriteFile(cp, []byte(strings.Replace(unit, "ExecStart=/usr/local/bin/nodepulse-reporter", "ExecStart=/bin/true", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", cp).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
