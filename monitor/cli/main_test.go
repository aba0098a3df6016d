// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain keeps the developer's environment out of the tests: no
// NODEPULSE_* variable, and a KUBECONFIG that does not exist, so a
// current nodepulse context of their own does not redirect a test.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, EnvPrefix+"_") {
			os.Unsetenv(k)
		}
	}
	dir, err := os.MkdirTemp("", "nodepulse-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("KUBECONFIG", filepath.Join(dir, "absent"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
