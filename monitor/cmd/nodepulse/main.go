// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command nodepulse is the nodepulse CLI. See `nodepulse --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepulse/nodepulse/monitor/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodepulse:", err)
		os.Exit(1)
	}
}
