// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command healthprobe is the container health check of the nodepulse images.
// The images are built FROM scratch and have no shell, curl or wget, so
// docker compose cannot run `curl -f .../readyz`; it runs this instead:
//
//	healthprobe http://127.0.0.1:9190/readyz
//	healthprobe --timeout=3s http://127.0.0.1:2379/health
//
// It GETs every URL in turn and exits 0 when all answered 2xx, 1 otherwise,
// printing one line per URL (docker keeps the last lines in `docker inspect`).
// It deliberately has no dependencies beyond the standard library.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "deadline of each request")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: healthprobe [--timeout=2s] URL...\nExits 0 when every URL answers a GET with a 2xx status.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	client := &http.Client{
		// Never follow a redirect to somewhere else: a probe checks one process.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	code := 0
	for _, u := range fs.Args() {
		if err := probe(client, u, *timeout); err != nil {
			fmt.Fprintf(stdout, "FAIL %s: %v\n", u, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "ok %s\n", u)
	}
	return code
}

func probe(client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
