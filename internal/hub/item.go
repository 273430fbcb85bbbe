package hub

import (
	"sync/atomic"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// Item is one event ready to write: its id, type, actor and emission
// time (for filtering and latency), and its event frame, encoded once
// and shared by every client. Items replayed from the trace store carry
// no time: only streaming events (which come from the ring) are timed.
//
// A transport that frames the event frame further (SSE's id: and data:
// lines) keeps that framing in the item too, built by the first of its
// clients to write the item and shared by the others: see Encoding.
type Item struct {
	ID        string
	SessionID string
	Type      event.Type
	Actor     string
	TS        time.Time
	Frame     []byte

	enc atomic.Pointer[encoded] // one transport's encoding, once built
}

func newItem(ev *event.Event) *Item {
	return &Item{ID: ev.ID, SessionID: ev.SessionID, Type: ev.Type, Actor: ev.Actor, TS: ev.TS, Frame: protocol.EventFrame(ev.JSON())}
}

// An Encoding is a transport's own encoding of items, derived from an
// item alone (its id and frame), computed at most once per item and
// shared by every client of that transport. The hub knows nothing of
// the bytes: it keeps them for the edge. An item has room for one
// encoding; an item already holding another Encoding's bytes is
// encoded again on every call (no transport but SSE uses one today).
//
// The bytes live as long as the item (in client queues and the ring),
// so an encoding should add little to the frame it is built from: the
// ring's byte cap counts the frame and a fixed overhead per item
// (itemOverhead), not the encoding.
type Encoding struct {
	encode func(*Item) []byte
}

// NewEncoding returns an encoding computed by encode, which must depend
// on the item's ID and Frame only, and must not keep the item.
func NewEncoding(encode func(*Item) []byte) *Encoding { return &Encoding{encode: encode} }

type encoded struct {
	by *Encoding
	b  []byte
}

// Encoded returns the item's encoding by e: built on the first call,
// the same bytes (not a copy) on every later one, from any goroutine.
// Callers must not modify them.
func (it *Item) Encoded(e *Encoding) []byte {
	if p := it.enc.Load(); p != nil {
		if p.by == e {
			return p.b
		}
		return e.encode(it)
	}
	p := &encoded{by: e, b: e.encode(it)}
	if it.enc.CompareAndSwap(nil, p) {
		return p.b
	}
	// Another client built it at the same time: share the stored bytes.
	if q := it.enc.Load(); q.by == e {
		return q.b
	}
	return p.b
}
