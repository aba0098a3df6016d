// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package integration runs the collector and monitor in-process over real
// loopback gRPC on one embedded etcd: the whole pipeline, mTLS, drains, etcd
// outages, monitor failover and etcd maintenance. Nothing here is mocked.
package integration
