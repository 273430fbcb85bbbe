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
//   - a replay server writes a fixed list of frames, held in memory, to
//     every new connection before it joins the broadcast;
//   - a run of frames (a drained FIFO, or floorBatch replayed frames)
//     leaves in one write: the connection under the library holds what
//     the library writes until the run ends, and sends it in writes of
//     up to 64 KiB, as metis's WebSocket edge does (stream.AcceptBatched
//     wraps the connection with metis's own batchConn).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/stream"
)

// floorBatch is how many replayed frames the floor writes as one run,
// as many as metis's replay hands its writer at a time.
const floorBatch = 512

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
	ws, hold, release, err := stream.AcceptBatched(w, r)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := ws.CloseRead(context.Background())
	// writeRun writes frames as one run: one write to the socket per
	// 64 KiB.
	writeRun := func(frames [][]byte) bool {
		hold()
		for _, fr := range frames {
			if ws.Write(context.Background(), websocket.MessageText, fr) != nil {
				return false
			}
		}
		return release() == nil
	}
	for i := 0; i < len(f.replay); i += floorBatch {
		if !writeRun(f.replay[i:min(i+floorBatch, len(f.replay))]) {
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
			if !writeRun(batch) {
				return
			}
			clear(batch)
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
