package stream

import (
	"net/http"

	"github.com/coder/websocket"
)

// AcceptBatched accepts a WebSocket the way the server does (compression
// off) on a connection that holds what is written between hold and
// release and sends it in writes of up to 64 KiB (batchConn): the
// benchmarks' floor writes its batches the way metis's feed does.
func AcceptBatched(w http.ResponseWriter, r *http.Request) (ws *websocket.Conn, hold func(), release func() error, err error) {
	hj := &batchHijacker{ResponseWriter: w}
	ws, err = websocket.Accept(hj, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, nil, nil, err
	}
	return ws, hj.conn.hold, hj.conn.release, nil
}
