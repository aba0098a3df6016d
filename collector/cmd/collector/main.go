// Command collector runs a nodepulse collector. See `collector --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepulse/nodepulse/collector/app"
)

func main() {
	// SIGTERM starts the drain (reporters are told to move, pending writes
	// are flushed); a second signal kills the process the default way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "collector:", err)
		os.Exit(1)
	}
}
