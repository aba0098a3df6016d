// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command bench is the nodepulse scale benchmark (make bench): see
// tests/bench and `bench --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/tests/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "k8s-writer" {
		return bench.RunWriter(ctx, args[1:])
	}
	var cfg bench.Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := flagenv.Parse(fs, "NODEPULSE_BENCH", bench.Synopsis, args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Quick {
		cfg.ApplyQuick(set)
	}
	_, err := bench.Run(ctx, cfg, "bench "+strings.Join(args, " "), os.Stdout)
	return err
}
