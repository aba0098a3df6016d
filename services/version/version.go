// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package version holds the build version, set by the linker:
//
//	-ldflags "-X github.com/nodepulse/nodepulse/services/version.Version=v0.1.0"
package version

import "runtime/debug"

// Version of the nodepulse binaries; "dev" when not set at link time.
var Version = "dev"

// String returns the version, with the VCS revision when the binary carries it.
func String() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return Version
}
