// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command kubectl is an unmodified kubectl built from the k8s.io/kubectl module
// at a pinned version, for the tests that check nodepulse's Kubernetes-compatible
// API against the real client. It is a separate module, outside go.work, so
// kubectl's dependency graph never moves the versions the product builds with;
// `make kubectl` builds it into bin/kubectl with GOWORK=off.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
