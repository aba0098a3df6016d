// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package e2e runs the built binaries as processes — the one-command local
// stack, a lost node's eviction, and the docker compose stack when a Docker
// engine answers — with short real timers, the last of the test layers before
// the benchmark.
package e2e
