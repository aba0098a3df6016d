// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

//go:build !unix

package grpcserver

// fileLimit: no RLIMIT_NOFILE here; --grpc.max-connections is then the only cap.
func fileLimit() (uint64, bool) { return 0, false }
