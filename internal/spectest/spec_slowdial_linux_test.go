//go:build linux

package spectest_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

// attachNarrow attaches a client whose socket has a tiny receive buffer
// and a small MSS, so that a client that stops reading fills the
// kernel's buffers after a few dozen frames instead of megabytes (on
// loopback the MSS is 64 KiB and the server's send buffer grows with
// it). Without this, "stops reading" would not back up into the
// server's per-client queue in any reasonable time.
func attachNarrow(t *testing.T, h *servertest.Harness, sid string) *streamtest.Client {
	t.Helper()
	var info struct {
		WSURL string `json:"ws_url"`
	}
	if st := h.Do("GET", "/sessions/"+sid, nil, &info); st != http.StatusOK {
		t.Fatalf("GET /sessions/%s: %d", sid, st)
	}
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
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	ws, _, err := websocket.Dial(context.Background(), info.WSURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &streamtest.Client{T: t, WS: ws, SessionID: sid, Log: slog.Default(), AutoPong: true}
}
