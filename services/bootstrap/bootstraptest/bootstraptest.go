// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package bootstraptest checks a server binary's version paths end to end:
// the test binary of the command's package runs the command's own main in a
// child process, so the test sees what a user running the binary sees (what
// it prints, its exit status, whether it keeps running) without building
// it.
package bootstraptest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nodepulse/nodepulse/services/version"
)

// Version is the version a child reports.
const Version = "v0.0.0-bootstraptest"

// argsEnv carries the child's arguments. Not NODEPULSE_*: the command would
// read that as a flag's value.
const argsEnv = "BOOTSTRAPTEST_MAIN_ARGS"

// Main is the command's TestMain: in a child started by CheckVersion it runs
// the command's main with the child's arguments instead of the tests.
func Main(m *testing.M, main func()) {
	if args, ok := os.LookupEnv(argsEnv); ok {
		os.Args = append([]string{os.Args[0]}, strings.Fields(args)...)
		version.Version = Version
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// wait bounds a child's run: printing a version takes milliseconds, a
// service that wrongly started would run until killed.
const wait = 30 * time.Second

// CheckVersion runs the command with --version and with the version
// subcommand: each must print Version alone on stdout and exit 0 at once,
// writing nothing on stderr (a starting service logs there). The test
// package's TestMain must call Main.
func CheckVersion(t *testing.T) {
	for _, args := range []string{"--version", "version", "--log.level=debug version"} {
		t.Run(args, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0])
			cmd.Env = append(os.Environ(), argsEnv+"="+args,
				// A command that wrongly starts must not take the
				// machine's real ports meanwhile.
				"NODEPULSE_GRPC_LISTEN_ADDRESS=127.0.0.1:0", "NODEPULSE_ADMIN_LISTEN_ADDRESS=127.0.0.1:0")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("%q still ran after %s: it started the service instead of printing its version; stderr:\n%s", args, wait, stderr.String())
			}
			if err != nil {
				t.Fatalf("%q: %v; stderr:\n%s", args, err, stderr.String())
			}
			if got := stdout.String(); got != Version+"\n" {
				t.Errorf("%q printed %q, want %q", args, got, Version+"\n")
			}
			if stderr.Len() > 0 {
				t.Errorf("%q wrote to stderr (a starting service logs there):\n%s", args, stderr.String())
			}
		})
	}
}
