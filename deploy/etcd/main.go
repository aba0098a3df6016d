// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command etcd is the upstream etcd server, built from the go.etcd.io/etcd
// module at the version pinned in this directory's go.mod. nodepulse ships it
// this way because its container images are built FROM scratch from static
// binaries (no registry to pull an etcd image from), and `make run` and the
// benchmark need a real etcd process. It takes etcd's own flags unchanged.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
