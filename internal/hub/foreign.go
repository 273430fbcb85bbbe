package hub

import (
	"context"
	"slices"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// A foreign cursor is an event id no process of this server's can place:
// a streaming event an earlier process streamed and never stored (it
// stopped inside a model call or a tool call), after the last event this
// process read from the store. Its client holds every event up to it
// that the earlier process gave, and nothing this process gave. The
// subscribe is sound only if every id this process gives the tree sorts
// after the cursor: then "after the cursor" is exactly what the client
// lacks. An earlier process whose clock ran ahead of this one's breaks
// that: this process would give ids below the cursor, which a replay
// from it skips and which a client drops as already seen.
//
// So a foreign cursor is accepted only while the tree's sequencer has
// given no id at or before it, and the sequencer then passes it (every
// later id sorts after it: bus.Emitter.Pass); otherwise it is refused
// with invalid_cursor, and the client takes a snapshot, which loses
// nothing. Whatever the earlier process streamed after the cursor died
// with it: the ack says streaming_gap.
//
// A cursor more than maxForeignLead ahead of this clock is refused
// instead of moving the tree's ids that far ahead.

// maxForeignLead is how far ahead of this server's clock a foreign
// cursor may be.
const maxForeignLead = time.Minute

// passForeign accepts the foreign cursor since for the tree of em, or
// returns the subscribe_error that refuses it.
func (h *Hub) passForeign(em *bus.Emitter, since string) *protocol.SubscribeError {
	if at, err := event.IDTime(since); err != nil || at.After(h.cfg.Now().Add(maxForeignLead)) {
		return h.refuse(protocol.CodeInvalidCursor,
			"since is an event this server never gave, more than a minute ahead of its clock; subscribe again with snapshot: true", "")
	}
	ok, err := em.Pass(since)
	if err != nil {
		return h.internal(err)
	}
	if !ok {
		return h.refuse(protocol.CodeInvalidCursor,
			"since is an event of an earlier server process that this one cannot place (it has since given the session ids before it: that process's clock ran ahead); subscribe again with snapshot: true", "")
	}
	return nil
}

// isForeign reports whether since, a cursor at or after the point this
// process holds the tree of sessionID from and held by none of the rings
// of tree (the sessions the subscription follows), is foreign: neither
// stored for a session of the tree nor held by its rings, yet after an
// event stored for it (one older than everything retention kept is not
// foreign: it is replayed from, as before). Every session of the tree is
// checked, not only those the subscription follows: a client may take
// its cursor from a subscription that had the workers to one that has
// not.
func (h *Hub) isForeign(ctx context.Context, sessionID, since string, tree []string) (bool, error) {
	at, err := h.store.EventAtOrBefore(ctx, tree, since)
	if err != nil || at == since {
		return false, err
	}
	desc, err := h.loadDescendants(ctx, sessionID)
	if err != nil {
		return false, err
	}
	var rest []string
	for _, d := range append(desc, h.descendants(sessionID)...) {
		if !slices.Contains(tree, d) && !slices.Contains(rest, d) {
			rest = append(rest, d)
		}
	}
	if len(rest) == 0 {
		return at != "", nil
	}
	for _, d := range rest {
		if h.ringKnows(d, since) {
			return false, nil
		}
	}
	more, err := h.store.EventAtOrBefore(ctx, rest, since)
	if err != nil || more == since {
		return false, err
	}
	return max(at, more) != "", nil
}

// ringKnows reports whether the ring of session sid knows the streaming
// event id (ring.knows).
func (h *Hub) ringKnows(sid, id string) bool {
	h.mu.RLock()
	st := h.sessions[sid]
	h.mu.RUnlock()
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.ring.knows(id)
}
