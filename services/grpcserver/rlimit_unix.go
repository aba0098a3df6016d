// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

//go:build unix

package grpcserver

import "syscall"

// fileLimit is the process's soft RLIMIT_NOFILE (which the Go runtime
// raises to the hard limit at start on Linux).
func fileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
