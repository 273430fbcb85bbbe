package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// Backfill implements bus.Backfiller. In cluster mode a node that
// starts following a tree owned elsewhere calls it (through the bus,
// under the tree's outbox lock, asOf being the tree's delivery point)
// so that the hub knows of the tree what it would know had it delivered
// the tree's events itself:
//
//   - the streaming events the log still holds, evs, go into their
//     sessions' rings, so that a client reconnecting here with a cursor
//     taken on another node gets the rest of the stream as the owner
//     would give it (no client gets them live; catalog events are
//     ignored, the store has them);
//   - each session of the tree counts as held from from on (evs is
//     every streaming event with an id at or after from: the log drops
//     them oldest first, and only once they are older than its TTL), so
//     a replay from a cursor after from has no streaming gap;
//   - each session's turn in flight as of asOf, read from the store, is
//     the one a snapshot names, as if its turn.started had been
//     delivered here; so is its model call in flight, whose streaming
//     message a snapshot builds from the backfilled ring;
//   - each session's replay window is filled again from the store (this
//     node's projection) up to asOf (fillWindows), since what it held,
//     if anything, may have missed events while the node did not follow
//     the tree.
//
// Each session's ring keeps its backfilled events merged in id order
// with what it held; held items older than from and than the session's
// first backfilled event are let go, as if evicted, since what came
// between them and the backfill is unknown.
func (h *Hub) Backfill(ctx context.Context, tree, from, asOf string, evs []*event.Event) error {
	sessions, err := h.loadDescendants(ctx, tree)
	if err != nil {
		return fmt.Errorf("hub: backfill %s: %w", tree, err)
	}
	sessions = append([]string{tree}, sessions...)
	bySession := map[string][]*Item{}
	for _, ev := range evs {
		if event.FamilyOf(ev.Type) == event.Streaming && h.cfg.RingSize > 0 {
			bySession[ev.SessionID] = append(bySession[ev.SessionID], newItem(ev))
		}
	}
	for _, sid := range sessions {
		turn, err := h.turnAsOf(ctx, sid, asOf)
		if err != nil {
			return fmt.Errorf("hub: backfill %s: %w", tree, err)
		}
		call, err := h.callAsOf(ctx, sid, asOf)
		if err != nil {
			return fmt.Errorf("hub: backfill %s: %w", tree, err)
		}
		items := bySession[sid]
		slices.SortFunc(items, func(x, y *Item) int { return strings.Compare(x.ID, y.ID) })
		held := from
		if len(items) > 0 {
			held = min(held, items[0].ID)
		}
		st := h.lockState(sid, held)
		grown := st.ring.merge(held, items, h.cfg.RingSize)
		st.heldFrom = held
		st.currentTurn = turn // what it held may be stale: its feed stopped
		st.call = call
		st.mu.Unlock()
		if grown != 0 {
			h.ringGrew(grown)
		}
	}
	return h.fillWindows(ctx, sessions, asOf)
}

// turnAsOf returns the session's turn in flight as of event id asOf,
// from the store: the turn of its last turn.started, unless a
// turn.completed or turn.cancelled came after it.
func (h *Hub) turnAsOf(ctx context.Context, sessionID, asOf string) (string, error) {
	var last []byte
	err := h.store.ScanEvents(ctx, store.EventQuery{SessionIDs: []string{sessionID}, UpToID: asOf,
		Types: []event.Type{event.TurnStarted, event.TurnCompleted, event.TurnCancelled}},
		func(r store.EventRow) error {
			last = r.Body
			return nil
		})
	if err != nil || last == nil {
		return "", err
	}
	ev, err := event.Decode(last)
	if err != nil || ev.Type != event.TurnStarted {
		return "", err
	}
	return ev.TurnID, nil
}

// merge lets go the held items older than lo, keeps items (in id order,
// none older than lo) with the rest in id order and without duplicates,
// then lets the oldest go while more than size are held. It returns the
// change in r.bytes.
func (r *ring) merge(lo string, items []*Item, size int) int64 {
	var delta int64
	for r.len() > 0 && r.items[r.start].ID < lo {
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
