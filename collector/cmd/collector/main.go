// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command collector runs a nodepulse collector. See `collector --help`.
package main

import (
	"github.com/nodepulse/nodepulse/collector/app"
	"github.com/nodepulse/nodepulse/services/bootstrap"
)

// SIGTERM starts the drain (reporters are told to move, pending writes
// are flushed); a second signal kills the process the default way.
func main() { bootstrap.Main("collector", app.Main) }
