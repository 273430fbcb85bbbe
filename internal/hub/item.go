package hub

import (
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// Item is one event ready to write: its id, type, actor and emission
// time (for filtering and latency), and its event frame, encoded once
// and shared by every client. Items replayed from the trace store carry
// no time: only streaming events (which come from the ring) are timed.
type Item struct {
	ID        string
	SessionID string
	Type      event.Type
	Actor     string
	TS        time.Time
	Frame     []byte
}

func newItem(ev *event.Event) *Item {
	return &Item{ID: ev.ID, SessionID: ev.SessionID, Type: ev.Type, Actor: ev.Actor, TS: ev.TS, Frame: protocol.EventFrame(ev.JSON())}
}
