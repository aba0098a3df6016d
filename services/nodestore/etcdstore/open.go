// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Open returns given when it is set (a test's memstore or embedded etcd,
// which its owner closes) with a close that does nothing, else a Store
// connected to cfg with a close that closes it: the app that opened the
// connection is the one that ends it.
func Open(given nodestore.Store, cfg Config, lg *zap.Logger) (nodestore.Store, func(), error) {
	if given != nil {
		return given, func() {}, nil
	}
	s, err := New(cfg, lg)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}
