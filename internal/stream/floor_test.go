package stream_test

// The floor of the streaming benchmarks (bench_test.go): a bare
// broadcaster on the same WebSocket library (coder/websocket), with no
// protocol, no bus, no store and no metrics. It is what any server
// pushing the same pre-encoded frames to the same clients must pay:
//
//   - the HTTP handler accepts with coder/websocket (compression off, as
//     metis does) and is the client's one writer goroutine; CloseRead
//     gives the connection the reader goroutine the library needs to
//     answer control frames and notice the peer going away;
//   - each client has an unbounded FIFO (a slice behind a mutex) and a
//     one-slot notify channel; the writer swaps the slice out and writes
//     every frame with a background context (no per-write timer);
//   - broadcast appends the same []byte to every client's FIFO (frames
//     are pre-encoded, so nothing is encoded or copied per client);
//   - a replay server writes a fixed list of frames to every new
//     connection before it joins the broadcast.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

type floorClient struct {
	mu     sync.Mutex
	q      [][]byte
	notify chan struct{}
}

type floorServer struct {
	srv    *httptest.Server
	replay [][]byte // written to every new connection first

	mu      sync.Mutex
	clients atomic.Pointer[[]*floorClient] // copy on write
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startFloor starts a floor server on loopback. replay may be nil.
func startFloor(replay [][]byte) *floorServer {
	f := &floorServer{replay: replay, stop: make(chan struct{})}
	empty := []*floorClient{}
	f.clients.Store(&empty)
	f.srv = httptest.NewServer(f)
	return f
}

// URL is the ws:// address of the stream.
func (f *floorServer) URL() string { return "ws" + f.srv.URL[len("http"):] + "/stream" }

// Clients is the number of connections registered for broadcast.
func (f *floorServer) Clients() int { return len(*f.clients.Load()) }

// Close stops every connection and the HTTP server.
func (f *floorServer) Close() {
	close(f.stop)
	f.wg.Wait()
	f.srv.Close()
}

func (f *floorServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.wg.Add(1)
	defer f.wg.Done()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := ws.CloseRead(context.Background())
	for _, fr := range f.replay {
		if ws.Write(context.Background(), websocket.MessageText, fr) != nil {
			return
		}
	}
	c := &floorClient{notify: make(chan struct{}, 1)}
	f.add(c)
	defer f.remove(c)
	var batch [][]byte
	for {
		select {
		case <-c.notify:
			c.mu.Lock()
			batch, c.q = c.q, batch[:0]
			c.mu.Unlock()
			for i, fr := range batch {
				if ws.Write(context.Background(), websocket.MessageText, fr) != nil {
					return
				}
				batch[i] = nil
			}
		case <-ctx.Done():
			return
		case <-f.stop:
			return
		}
	}
}

func (f *floorServer) add(c *floorClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.clients.Load()
	next := append(old[:len(old):len(old)], c)
	f.clients.Store(&next)
}

func (f *floorServer) remove(c *floorClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.clients.Load()
	next := make([]*floorClient, 0, len(old))
	for _, x := range old {
		if x != c {
			next = append(next, x)
		}
	}
	f.clients.Store(&next)
}

// broadcast queues frame for every client; it never blocks on a socket.
func (f *floorServer) broadcast(frame []byte) {
	for _, c := range *f.clients.Load() {
		c.mu.Lock()
		c.q = append(c.q, frame)
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// waitClients waits until n connections are registered.
func (f *floorServer) waitClients(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for f.Clients() != n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
