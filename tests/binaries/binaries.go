// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package binaries builds the nodepulse binaries once per test process, so
// end-to-end tests run the real programs. NODEPULSE_BIN_DIR points at
// prebuilt binaries (CI builds them with `make build` first) and skips the
// build.
package binaries

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	err  error
)

// packages maps binary names to their main packages, relative to the repository root.
var packages = map[string]string{
	"etcd":       "./deploy/etcd",
	"collector":  "./collector/cmd/collector",
	"monitor":    "./monitor/cmd/monitor",
	"reporter":   "./reporter/cmd/reporter",
	"nodepulse":  "./monitor/cmd/nodepulse",
	"localstack": "./tests/cmd/localstack",
	"fleetsim":   "./tests/cmd/fleetsim",
}

// RepoRoot is the repository root (the directory holding go.work).
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate source file")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Dir returns a directory with every binary, building them on first use.
func Dir(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if d := os.Getenv("NODEPULSE_BIN_DIR"); d != "" {
			dir, err = filepath.Abs(d)
			for name := range packages {
				if _, serr := os.Stat(filepath.Join(dir, name)); serr != nil {
					err = fmt.Errorf("NODEPULSE_BIN_DIR=%s lacks %s: %w", d, name, serr)
				}
			}
			return
		}
		root, rerr := RepoRoot()
		if rerr != nil {
			err = rerr
			return
		}
		dir, err = os.MkdirTemp("", "nodepulse-bin-")
		if err != nil {
			return
		}
		args := []string{"build", "-o", dir + "/"}
		for _, p := range packages {
			args = append(args, p)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, berr := cmd.CombinedOutput()
		if berr != nil {
			err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), berr, out)
		}
	})
	if err != nil {
		t.Fatalf("binaries: %v", err)
	}
	return dir
}
