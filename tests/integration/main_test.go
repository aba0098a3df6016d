// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package integration

import (
	"testing"

	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// TestMain shares one embedded etcd member across the package; every test
// works under its own key prefix (etcdtest.NewStore).
func TestMain(m *testing.M) { etcdtest.Main(m) }
