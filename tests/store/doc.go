// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package store runs the nodestore conformance suite against etcdstore on an
// embedded etcd: the suite memstore passes too, so the fake and the real
// store cannot disagree unnoticed.
package store
