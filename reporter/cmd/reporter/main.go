// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command reporter reports one machine's health to the nodepulse collectors.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepulse/nodepulse/reporter/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := app.Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reporter:", err)
		os.Exit(1)
	}
}
