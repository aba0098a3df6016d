// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command scaleout runs nodepulse scaled out on one machine (3 collectors
// behind the reporters' address list, 2 monitors, a three-member etcd, the
// fleet at one connection per node over several simulator processes),
// kills one collector and starts it again, and records the nodes per
// collector over time (docs/benchmarks.md, "Scale-out").
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
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(1)
	}
}
