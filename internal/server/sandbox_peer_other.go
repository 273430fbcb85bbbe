//go:build !linux

package server

import "net"

// peerPid: no shell call is tracked here (there is no supervisor).
func peerPid(net.Conn) (int, bool) { return 0, false }
