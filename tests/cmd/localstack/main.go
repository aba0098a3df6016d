// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command localstack is what `make run` starts: a whole nodepulse pipeline on
// this machine without Docker — a real etcd, a collector, a monitor and a
// reporter for this machine, each its own process so each stage can be
// profiled on its own — and a live table of the nodes the monitor serves.
// Ctrl-C stops the processes in reverse order (reporter first, so nothing
// raises a false alarm) and removes the etcd data; logs stay in
// <data-dir>/logs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		os.Exit(1)
	}
}
