package bus

import (
	"context"
	"fmt"

	"github.com/metis-agent/metis/internal/event"
)

// StreamingStore is a Store that also records streaming events: in
// cluster mode, the log other nodes read a tree's deltas from.
// AppendStreaming is called for each streaming event, in id order with
// the tree's Submits and under the same lock, before the event is
// delivered; it must not block.
type StreamingStore interface {
	AppendStreaming(ev *event.Event)
}

// Relay delivers an event that was emitted and committed by another
// process (cluster mode: the tree's owner on another node) to this
// bus's live sinks, in the outbox of its session's tree, so a client's
// seam (Emitter.WithDelivered) covers it exactly as a local event.
// Events must be relayed in id order per tree; one at or before the
// last event the tree delivered is dropped (already delivered, or
// covered by the store). Bus subscribers do not get relayed events:
// the owner's subscribers handled them. It reads the store only to
// create the session's emitter, the first time.
func (b *Bus) Relay(ctx context.Context, ev *event.Event) error {
	// A session first seen here (a worker created on the owner) gets its
	// emitter without moving the delivery point to what the store holds:
	// the projection applied its events before the feed relays them, and
	// they must still reach the clients following the tree.
	em, err := b.emitter(ctx, ev.SessionID, false)
	if err != nil {
		return fmt.Errorf("bus: relay %s: %w", ev.ID, err)
	}
	o := em.o
	o.outMu.Lock()
	defer o.outMu.Unlock()
	if ev.ID <= o.lastOut {
		return nil
	}
	o.lastOut = ev.ID
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			s.Publish(ev)
		}
	}
	return nil
}

// CatchUp moves the delivery point of a session's tree to the newest
// event the store holds for the session, for a node that starts
// relaying a tree whose earlier events it never delivered: what the
// store holds is served from the store (snapshot, replay), what comes
// after is relayed.
func (b *Bus) CatchUp(ctx context.Context, sessionID string) error {
	em, err := b.Emitter(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("bus: catch up %s: %w", sessionID, err)
	}
	last, err := b.store.LastEventID(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("bus: catch up %s: %w", sessionID, err)
	}
	o := em.o
	o.outMu.Lock()
	o.lastOut = max(o.lastOut, last)
	o.outMu.Unlock()
	return nil
}

// Backfiller is a live sink that keeps streaming events for replays
// (the hub's rings); Backfill hands it those this process never
// delivered.
type Backfiller interface {
	Backfill(evs []*event.Event)
}

// Backfill hands streaming events of one delegation tree, emitted and
// committed by another process before this one followed the tree (in
// id order, every one from the first on), to the live sinks that are
// Backfillers, and moves the tree's delivery point past them: a
// client's seam then covers them exactly as events delivered here, and
// a replay from a cursor among them is served here. No client gets
// them live, and sinks that are not Backfillers never see them.
func (b *Bus) Backfill(ctx context.Context, evs []*event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	em, err := b.Emitter(ctx, evs[0].SessionID)
	if err != nil {
		return fmt.Errorf("bus: backfill: %w", err)
	}
	o := em.o
	o.outMu.Lock()
	defer o.outMu.Unlock()
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			if bf, ok := s.(Backfiller); ok {
				bf.Backfill(evs)
			}
		}
	}
	o.lastOut = max(o.lastOut, evs[len(evs)-1].ID)
	return nil
}
