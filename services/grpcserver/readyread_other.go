// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

//go:build !linux

package grpcserver

import "net"

// wrapConn gives c its slot's bookkeeping (readyread_linux.go adds
// grpc-go's ready reads on Linux).
func wrapConn(_ net.Conn, lc *limitedConn) net.Conn { return lc }
