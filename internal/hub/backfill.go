package hub

import (
	"slices"
	"strings"

	"github.com/metis-agent/metis/internal/event"
)

// Backfill implements bus.Backfiller: it keeps streaming events this
// process did not deliver (in cluster mode, those a tree's owner
// emitted before this node followed the tree, read back from the log)
// in their sessions' rings, so that a client reconnecting here with a
// cursor taken on another node gets the rest of the stream as the
// owner would give it. No client gets them live; catalog events are
// ignored (the store has them).
//
// evs must be every streaming event of their sessions from the first
// one on (the log drops them oldest first): each session's ring then
// holds everything from its first backfilled event, merged in id order
// with what the ring held. Older held items are let go, as if evicted,
// since what came between them and the backfill is unknown.
func (h *Hub) Backfill(evs []*event.Event) {
	if h.cfg.RingSize <= 0 {
		return
	}
	bySession := map[string][]*Item{}
	for _, ev := range evs {
		if event.FamilyOf(ev.Type) == event.Streaming {
			bySession[ev.SessionID] = append(bySession[ev.SessionID], newItem(ev))
		}
	}
	for sid, items := range bySession {
		slices.SortFunc(items, func(x, y *Item) int { return strings.Compare(x.ID, y.ID) })
		st := h.lockState(sid, items[0].ID)
		grown := st.ring.merge(items, h.cfg.RingSize)
		st.heldFrom = items[0].ID
		st.mu.Unlock()
		if grown != 0 {
			h.ringGrew(grown)
		}
	}
}

// merge lets go the held items older than items[0], keeps items (in id
// order) with the rest in id order and without duplicates, then lets
// the oldest go while more than size are held. It returns the change in
// r.bytes.
func (r *ring) merge(items []*Item, size int) int64 {
	var delta int64
	for r.len() > 0 && r.items[r.start].ID < items[0].ID {
		delta -= r.popOldest()
	}
	held := r.items[r.start:]
	merged := make([]*Item, 0, len(held)+len(items))
	i, j := 0, 0
	for i < len(held) || j < len(items) {
		switch {
		case j == len(items) || i < len(held) && held[i].ID < items[j].ID:
			merged = append(merged, held[i])
			i++
		case i == len(held) || items[j].ID < held[i].ID:
			merged = append(merged, items[j])
			r.bytes += cost(items[j])
			delta += cost(items[j])
			j++
		default: // held already
			merged = append(merged, held[i])
			i++
			j++
		}
	}
	r.items, r.start = merged, 0
	for r.len() > size {
		delta -= r.popOldest()
	}
	return delta
}
