package bus

import (
	"context"
	"fmt"

	"github.com/metis-agent/metis/internal/event"
)

// StreamingStore is a Store that also records streaming events: in
// cluster mode, the log other nodes read a tree's deltas from.
// AppendStreaming is called for each streaming event, in id order with
// the tree's Submits and under the same lock; it must not block. The
// event is delivered once done is called without an error, in the
// tree's id order like a committed catalog event (the store may hold it
// back: a cluster node that may have lost its tree confirms it still
// owns it first); with an error it is dropped and never delivered, as
// an event whose commit failed.
type StreamingStore interface {
	AppendStreaming(ev *event.Event, done func(error))
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
	o.relayed = true
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
	o.relayed = true
	b.moveLastOut(o, last, "")
	o.outMu.Unlock()
	return nil
}

// Backfiller is a live sink that keeps what a client needs of a tree
// besides the events delivered live (the hub: its rings of streaming
// events, its sessions' turns in flight). Backfill hands it a tree a
// node starts following (Bus.Backfill): every streaming event of the
// tree with an id at or after from, evs (this process never delivered
// them), and asOf, the tree's delivery point, as of which it must know
// the tree.
type Backfiller interface {
	Backfill(ctx context.Context, tree, from, asOf string, evs []*event.Event) error
}

// Backfill prepares the live sinks for a tree emitted and committed by
// another process, which this one starts following: it moves the
// tree's delivery point to through (the tree's newest event the store
// holds and the caller's feed will not relay) and past evs (streaming
// events of the tree, in id order, every one from from on) and hands
// the tree to the sinks that
// are Backfillers, under the tree's outbox lock, so that nothing is
// relayed meanwhile. A client's seam then covers those events exactly
// as events delivered here, and a replay from a cursor among them is
// served here. No client gets them live, and sinks that are not
// Backfillers never see them. tree is the root session of the tree.
func (b *Bus) Backfill(ctx context.Context, tree, from, through string, evs []*event.Event) error {
	em, err := b.Emitter(ctx, tree)
	if err != nil {
		return fmt.Errorf("bus: backfill: %w", err)
	}
	o := em.o
	o.outMu.Lock()
	defer o.outMu.Unlock()
	o.relayed = true
	o.lastOut = max(o.lastOut, through)
	if len(evs) > 0 {
		o.lastOut = max(o.lastOut, evs[len(evs)-1].ID)
	}
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			if bf, ok := s.(Backfiller); ok {
				if err := bf.Backfill(ctx, tree, from, o.lastOut, evs); err != nil {
					return fmt.Errorf("bus: backfill: %w", err)
				}
			}
		}
	}
	return nil
}

// Follow makes the emitter of a session whose events this process
// relays (as Relay does), without moving the delivery point of its tree
// to what the store holds: the store may be ahead of the relayed
// events. From then on the tree counts as relayed here: no emitter made
// for one of its sessions (a worker's, by a client that includes
// workers) moves its delivery point either; only what the bus delivers
// or relays, CatchUp, Backfill and Resume do.
func (b *Bus) Follow(ctx context.Context, sessionID string) error {
	em, err := b.emitter(ctx, sessionID, false)
	if err != nil {
		return fmt.Errorf("bus: follow %s: %w", sessionID, err)
	}
	em.o.outMu.Lock()
	em.o.relayed = true
	em.o.outMu.Unlock()
	return nil
}

// RelayGap tells the live sinks (Gapper) that events of a tree this
// process relays, emitted elsewhere after the last one relayed and up
// to through, never reached the log and never will be relayed: a
// streaming event its writer published that the log lost or refused.
// It runs in the tree's outbox, before the event that showed the gap
// is relayed, so every client of the tree here learns of it before it
// could take a later event as its cursor. tree is the tree's root
// session.
func (b *Bus) RelayGap(ctx context.Context, tree, through string) error {
	em, err := b.emitter(ctx, tree, false)
	if err != nil {
		return fmt.Errorf("bus: relay gap in %s: %w", tree, err)
	}
	o := em.o
	o.outMu.Lock()
	defer o.outMu.Unlock()
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			if g, ok := s.(Gapper); ok {
				g.Gap(tree, through)
			}
		}
	}
	return nil
}
