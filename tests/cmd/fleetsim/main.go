// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command fleetsim runs a fleet of virtual nodes against the collectors, the
// load generator of the benchmarks and the local stack (see fleetsim --help
// and tests/fleetsim). It is a test tool, not part of the product: the
// reporter binary carries no simulator.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepulse/nodepulse/tests/fleetsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := fleetsim.Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}
