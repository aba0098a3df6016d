// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package stream is the client side of the Report stream protocol
// (collector.proto, spec §3 and §4): the messages a node sends, what the
// collector's acks and commands mean, and every timing rule of the protocol:
// renewal phases, empty renewals, retry and reconnect delays, the report
// schedule that survives reconnects.
//
// It owns no goroutine, timer or connection. The reporter's heartbeat loop
// (one node, one stream, timers) and the tests module's fleet simulator
// (thousands of nodes per connection, one scheduler goroutine per
// connection with a heap of due events) both drive the same Session values,
// so a load test speaks exactly the protocol real reporters speak. That is
// why the package is exported: nothing else outside the reporter may
// re-implement these rules.
//
// A refused message with a retry_after (RetryAfter) is sent again after
// that delay: a lease renewal as a renewal, a status as a full status,
// whether or not it changed.
package stream
