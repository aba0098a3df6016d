// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bootstrap

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is a server binary's main: it runs appMain with the process's
// arguments and a context that SIGINT or SIGTERM ends, and exits with
// status 1, the error on stderr, when appMain fails (0 otherwise).
func Main(name string, appMain func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts the app's ordered stop (a drain can take
	// seconds); the handler is removed then, so a second signal kills the
	// process the default way instead of waiting for it.
	context.AfterFunc(ctx, stop)
	err := appMain(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
