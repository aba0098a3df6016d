// Command monitor runs a nodepulse monitor. See `monitor --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepulse/nodepulse/monitor/app"
)

func main() {
	// SIGTERM resigns leadership (another replica takes over at once) and
	// drains the API; a second signal kills the process the default way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "monitor:", err)
		os.Exit(1)
	}
}
