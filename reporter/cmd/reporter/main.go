// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command reporter reports one machine's health to the nodepulse collectors.
package main

import (
	"github.com/nodepulse/nodepulse/reporter/app"
	"github.com/nodepulse/nodepulse/services/bootstrap"
)

// SIGTERM sends Leaving (the node is gone on purpose, not failed); a second
// signal kills the process the default way.
func main() { bootstrap.Main("reporter", app.Main) }
