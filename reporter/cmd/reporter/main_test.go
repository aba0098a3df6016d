// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"testing"

	"github.com/nodepulse/nodepulse/services/bootstrap/bootstraptest"
)

func TestMain(m *testing.M) { bootstraptest.Main(m, main) }

// `reporter --version` and `reporter version` print the version and exit
// without starting a reporter.
func TestVersion(t *testing.T) { bootstraptest.CheckVersion(t) }
