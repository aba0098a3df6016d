// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package bootstrap owns what every nodepulse server binary (collector,
// monitor, reporter) does around its own work: the flag set with an
// environment variable for every flag, --help, --version and the version
// subcommand, the logger, the Go GC target, the Prometheus registry with the
// Go and process collectors, the admin HTTP endpoint (/metrics, /healthz,
// /readyz, /debug/pprof), and running the components until a signal, then
// stopping them within a deadline. An app wires only what is its own: its
// gRPC services, its store, its components.
//
// A binary's main calls Main with its app's Main; that builds a Service,
// lets the app register its flags on it and runs it:
//
//	svc := bootstrap.New("monitor", synopsis, &cfg.Log)
//	cfg.RegisterFlags(svc.Flags)
//	return svc.Run(ctx, args, func() (run.Component, error) { return New(cfg, svc.Logger, svc.Registry) })
//
// The app's New, which tests also call in-process, opens its admin endpoint
// and collects its components in a Server.
package bootstrap
