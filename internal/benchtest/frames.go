package benchtest

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/coder/websocket"
)

// ReadMessage reads one whole WebSocket message into buf, growing it
// (by doubling) as needed, and returns buf, now holding the message in
// buf[:n], and n. Reusing the returned buffer, a reader allocates
// nothing per message once it holds the largest one.
func ReadMessage(ctx context.Context, ws *websocket.Conn, buf []byte) ([]byte, int, error) {
	if len(buf) == 0 {
		buf = make([]byte, 4096)
	}
	_, rd, err := ws.Reader(ctx)
	if err != nil {
		return buf, 0, err
	}
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		k, err := rd.Read(buf[n:])
		n += k
		if err == io.EOF {
			return buf, n, nil
		}
		if err != nil {
			return buf, n, err
		}
	}
}

var eventPrefix = []byte(`{"type":"event"`)

// ReadEvents reads frames until n of them are event frames, skipping
// the others, and returns the event frames' total size and, if keep,
// copies of them.
func ReadEvents(ctx context.Context, ws *websocket.Conn, n int, keep bool) ([][]byte, int64, error) {
	var frames [][]byte
	var total int64
	buf := make([]byte, 4096)
	for got := 0; got < n; {
		var m int
		var err error
		buf, m, err = ReadMessage(ctx, ws, buf)
		if err != nil {
			return nil, 0, fmt.Errorf("after %d events: %w", got, err)
		}
		if !bytes.HasPrefix(buf[:m], eventPrefix) {
			continue
		}
		got++
		total += int64(m)
		if keep {
			frames = append(frames, bytes.Clone(buf[:m]))
		}
	}
	return frames, total, nil
}
