// Package feed is the transport-neutral subscription core: it serves
// one subscribed client. It writes the subscribe_ack, the snapshot or
// the replay, then the live events of the client's hub queue, in order
// and from one goroutine, every write under a deadline; it sends a
// heartbeat when the client has been idle, gives up a client whose
// queue overflowed (the write in progress gets a short grace, then the
// client_too_slow close), flushes what is queued and closes going-away
// on shutdown, and ends every client with one End: the close code, the
// close detail with its numbers, and the write error that ended it.
// The metrics, the log line and the close the client gets are all made
// from that one End.
//
// A transport plugs in through Transport (write a frame, flush, send a
// heartbeat, close with a code and reason, kill now, tell that the
// client has gone). A transport whose client sends frames while
// subscribed (the WebSocket's cancel, ping and pong) also implements
// Receiver; the feed then hands those frames back to it between writes,
// so every write stays on the feed's goroutine.
//
// Files: transport.go (the interfaces), feed.go (a feed, its sends and
// heartbeats), deadline.go (the write deadline and the overflow grace),
// serve.go (attachment, replay and the live loop), end.go (how a feed
// ends, and its accounting), clients.go (a transport's set of served
// clients, for its shutdown), hold.go (what a stream keeps alive past
// its HTTP handler: a cluster node's follow of a tree, released when a
// hijacked WebSocket ends).
//
// feed is core: it imports hub, event, protocol and metrics, never a
// transport; the WebSocket edge (stream), the SSE edge (sse) and the
// HTTP API's cluster front (api, for Hold) import it.
package feed
