//go:build linux

package streamtest

import (
	"net"
	"net/http"
	"syscall"
	"testing"
)

// ConnectNarrow connects a client over tr whose socket has a tiny
// receive buffer and a small MSS, so that a client that stops reading
// fills the kernel's buffers after a few dozen frames instead of
// megabytes (on loopback the MSS is 64 KiB and the server's send buffer
// grows with it). Without this, "stops reading" would not back up into
// the server's per-client queue in any reasonable time. Off Linux, it
// skips the test.
func ConnectNarrow(t testing.TB, tr Transport, base, sessionID string) Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	// A transport of its own: a connection of it is never shared.
	ht := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(ht.CloseIdleConnections)
	return tr.Connect(t, base, sessionID, &http.Client{Transport: ht})
}
