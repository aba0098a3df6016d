// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command monitor runs a nodepulse monitor. See `monitor --help`.
package main

import (
	"github.com/nodepulse/nodepulse/monitor/app"
	"github.com/nodepulse/nodepulse/services/bootstrap"
)

// SIGTERM resigns leadership (another replica takes over at once) and
// drains the API; a second signal kills the process the default way.
func main() { bootstrap.Main("monitor", app.Main) }
