package stream

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// batchPair is a server-side WebSocket over a batchConn (its socket
// writes counted) and the client dialled to it.
type batchPair struct {
	ws     *websocket.Conn // server side
	bc     *batchConn
	sock   *countingConn
	client *websocket.Conn
}

func newBatchPair(t *testing.T) *batchPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	got := make(chan *batchPair, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj := &batchHijacker{ResponseWriter: w}
		ws, err := websocket.Accept(hj, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		sock := &countingConn{Conn: hj.conn.Conn}
		hj.conn.Conn = sock
		got <- &batchPair{ws: ws, bc: hj.conn, sock: sock}
	}))
	t.Cleanup(srv.Close)
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	client.SetReadLimit(1 << 20)
	p := <-got
	p.client = client
	t.Cleanup(func() {
		p.client.CloseNow()
		p.ws.CloseNow()
	})
	return p
}

func (p *batchPair) write(t *testing.T, msg []byte) {
	t.Helper()
	if err := p.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
}

func (p *batchPair) expect(t *testing.T, want [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, w := range want {
		_, got, err := p.client.Read(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("message %d: %d bytes %.40q, want %d bytes %.40q", i, len(got), got, len(w), w)
		}
	}
}

func messages(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%06d%s", i, strings.Repeat("x", size-6))
	}
	return out
}

// TestBatchOneWrite: the frames of a batch reach the socket in one
// write, at the release, and arrive whole and in order; outside a batch
// every frame is written at once.
func TestBatchOneWrite(t *testing.T) {
	p := newBatchPair(t)
	msgs := messages(100, 200)
	p.bc.hold()
	for _, m := range msgs {
		p.write(t, m)
	}
	if n := p.sock.writes.Load(); n != 0 {
		t.Fatalf("%d socket writes before the release", n)
	}
	if err := p.bc.release(); err != nil {
		t.Fatal(err)
	}
	if n := p.sock.writes.Load(); n != 1 {
		t.Fatalf("%d socket writes for a batch of %d frames, want 1", n, len(msgs))
	}
	p.expect(t, msgs)

	p.write(t, msgs[0])
	p.write(t, msgs[1])
	if n := p.sock.writes.Load(); n != 3 {
		t.Fatalf("%d socket writes after two frames outside a batch, want 3", n)
	}
	p.expect(t, msgs[:2])
}

// TestBatchLarge: a batch larger than batchBytes, and frames larger
// than it, go out in writes of at most batchBytes (or the one large
// frame), whole and in order.
func TestBatchLarge(t *testing.T) {
	p := newBatchPair(t)
	msgs := append(messages(40, 5000), messages(1, 3*batchBytes)...)
	msgs = append(msgs, messages(5, 100)...)
	p.bc.hold()
	for _, m := range msgs {
		p.write(t, m)
	}
	if err := p.bc.release(); err != nil {
		t.Fatal(err)
	}
	p.expect(t, msgs)
	total := 0
	for _, m := range msgs {
		total += len(m)
	}
	if n := p.sock.writes.Load(); n > int64(total/batchBytes+4) {
		t.Fatalf("%d socket writes for %d bytes", n, total)
	}
}

// TestBatchPongHeld: a pong the library writes on its own during a
// batch leaves with the batch, at its release.
func TestBatchPongHeld(t *testing.T) {
	p := newBatchPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // the server reads, so that it answers pings
		for {
			if _, _, err := p.ws.Read(ctx); err != nil {
				return
			}
		}
	}()
	go func() { // the client reads, so that it sees pongs
		for {
			if _, _, err := p.client.Read(ctx); err != nil {
				return
			}
		}
	}()
	p.bc.hold()
	pinged := make(chan error, 1)
	go func() { pinged <- p.client.Ping(ctx) }()
	for {
		p.bc.mu.Lock()
		held := len(*p.bc.held)
		p.bc.mu.Unlock()
		if held > 0 {
			break
		}
		select {
		case err := <-pinged:
			t.Fatalf("the ping was answered during the batch: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case err := <-pinged:
		t.Fatalf("the ping was answered while its pong was held: %v", err)
	default:
	}
	if err := p.bc.release(); err != nil {
		t.Fatal(err)
	}
	if err := <-pinged; err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// TestBatchKill: closing the connection makes a release stuck on a
// client that does not read fail.
func TestBatchKill(t *testing.T) {
	p := newBatchPair(t)
	p.bc.hold()
	big := bytes.Repeat([]byte("y"), batchBytes-100)
	released := make(chan error, 1)
	go func() {
		for range 400 { // 25 MiB: more than the socket buffers hold
			if err := p.ws.Write(context.Background(), websocket.MessageText, big); err != nil {
				released <- err
				return
			}
		}
		released <- p.bc.release()
	}()
	time.Sleep(50 * time.Millisecond)
	p.ws.CloseNow()
	select {
	case err := <-released:
		if err == nil {
			t.Fatal("the release succeeded although the client never read")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release is still blocked after the connection was closed")
	}
}
