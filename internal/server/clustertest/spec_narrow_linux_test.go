//go:build linux

package clustertest_test

import (
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// connectNarrow connects a client of node h whose socket has a tiny
// receive buffer and a small MSS, so that a client that stops reading
// fills the kernel's buffers after a few dozen frames instead of
// megabytes, and backs up into the node's queue for it.
func connectNarrow(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string) streamtest.Conn {
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
	ht := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(ht.CloseIdleConnections)
	return tr.Connect(t, h.URL, sid, &http.Client{Transport: ht})
}
