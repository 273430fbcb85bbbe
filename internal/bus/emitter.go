package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// Spec describes an event to emit.
type Spec struct {
	Type    event.Type
	TurnID  string
	Actor   string
	Payload any // marshalled with encoding/json; json.RawMessage is used as is
	// Ops are store writes committed in the same transaction as a
	// catalog event (for example the message row a turn.started carries).
	// Streaming events must not carry ops.
	Ops []store.Op
}

// Emitter emits the events of one session. It is safe for concurrent
// use; events are ordered by the time their Emit acquires the emitter.
//
// The sessions of one delegation tree (a planner and every worker it
// started, nested ones included) share one outbox: one id sequence, one
// order of delivery. A client that follows a planner with its workers
// therefore sees one stream in strictly increasing id order, and a single
// cursor resumes it exactly.
type Emitter struct {
	bus       *Bus
	sessionID string
	o         *outbox
}

// outbox orders the events of one delegation tree.
type outbox struct {
	seq *event.Sequencer

	// submitMu orders id assignment with the store submission, so the
	// store's append order equals id order. It may be held while the
	// store's queue is full; outMu never is.
	submitMu sync.Mutex

	outMu   sync.Mutex
	pending []*pending // in id order; head is the oldest undelivered
	lastOut string     // id of the last event delivered
	// relayed is set once this process relays the tree (Follow, Relay,
	// Backfill, CatchUp: cluster mode, another node writes it). From
	// then on an emitter made for one of its sessions never moves
	// lastOut: the store may be ahead of the relayed events.
	relayed bool

	// suspended, when set, is the error every emit into the tree fails
	// with (Suspend, handover.go).
	suspended atomic.Pointer[error]
}

type pending struct {
	ev    *event.Event
	ready bool
	err   error
	done  chan struct{} // closed on delivery (or failure); nil if unused
}

// SessionID returns the session this emitter serves.
func (e *Emitter) SessionID() string { return e.sessionID }

// Emit assigns an id, encodes the event and queues it for delivery. It
// returns without waiting for the commit; the event reaches subscribers
// and the live sink once it (and every earlier event of the session) is
// committed. It blocks only while the store's write queue is full.
func (e *Emitter) Emit(s Spec) (*event.Event, error) {
	ev, _, err := e.emit(s, false)
	return ev, err
}

// EmitWait emits like Emit and waits until the event is committed and
// delivered. ctx bounds the wait only: the event is emitted regardless.
// A catalog event whose commit failed returns an error wrapping
// ErrNotCommitted (and the store's error): nothing of it was stored.
func (e *Emitter) EmitWait(ctx context.Context, s Spec) (*event.Event, error) {
	ev, p, err := e.emit(s, true)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrNotCommitted, ev.Type, p.err)
		}
		return ev, nil
	case <-ctx.Done():
		return ev, fmt.Errorf("bus: wait for %s: %w", ev.Type, ctx.Err())
	}
}

// LastDelivered returns the id of the newest event of this session's
// tree that has been delivered to the live sink (the newest stored one
// if none since start).
func (e *Emitter) LastDelivered() string {
	e.o.outMu.Lock()
	defer e.o.outMu.Unlock()
	return e.o.lastOut
}

// WithDelivered runs f while no event of this session's tree can be
// delivered, passing the id of the last delivered one. The streaming
// server uses it to register a client and fix its seam atomically (spec
// §3.7). f must not block or emit.
func (e *Emitter) WithDelivered(f func(lastID string)) {
	e.o.outMu.Lock()
	defer e.o.outMu.Unlock()
	f(e.o.lastOut)
}

// Pass makes every id the session's tree is given from now on sort
// after id, a cursor this process never issued (an earlier process's
// streaming event, never stored), and reports true; or reports false if
// the tree was already given an id at or before it, which nothing can
// reorder (event.Sequencer.Pass).
func (e *Emitter) Pass(id string) (bool, error) {
	return e.o.seq.Pass(id)
}

func (e *Emitter) emit(s Spec, wait bool) (*event.Event, *pending, error) {
	info, ok := event.Lookup(s.Type)
	if !ok {
		return nil, nil, fmt.Errorf("bus: emit unknown event type %q", s.Type)
	}
	if info.Family == event.Streaming && len(s.Ops) > 0 {
		return nil, nil, fmt.Errorf("bus: streaming event %s cannot carry store ops", s.Type)
	}
	payload, marshalled, err := encodePayload(s.Payload)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: %s payload: %w", s.Type, err)
	}
	if e.bus.isClosed() {
		return nil, nil, ErrClosed
	}

	o := e.o
	o.submitMu.Lock()
	defer o.submitMu.Unlock()
	if err := o.suspended.Load(); err != nil {
		return nil, nil, *err
	}
	id, ts := o.seq.Next()
	ev := &event.Event{ID: id, Type: s.Type, SessionID: e.sessionID, TurnID: s.TurnID, TS: ts, Actor: s.Actor, Payload: payload}
	if marshalled {
		ev.SealMarshalled()
	} else if err := ev.Seal(); err != nil {
		return nil, nil, err
	}
	p := &pending{ev: ev}
	if wait {
		p.done = make(chan struct{})
	}

	if info.Family == event.Streaming {
		o.outMu.Lock()
		o.pending = append(o.pending, p)
		if e.bus.stream == nil {
			p.ready = true
			o.flushLocked(e.bus)
		}
		o.outMu.Unlock()
		// A store that keeps streaming events too (cluster mode: the
		// log) gets them here, in id order with the catalog groups, and
		// says when they may be delivered.
		if e.bus.stream != nil {
			e.bus.stream.AppendStreaming(ev, func(err error) { o.committed(e.bus, p, err) })
		}
		return ev, p, nil
	}

	o.outMu.Lock()
	o.pending = append(o.pending, p)
	o.outMu.Unlock()
	ops := make([]store.Op, 0, len(s.Ops)+1)
	for _, op := range s.Ops {
		if st, ok := op.(store.EventStamper); ok {
			op = st.StampEvent(ev.ID)
		}
		ops = append(ops, op)
	}
	ops = append(ops, store.AppendEvent{Event: ev})
	e.bus.store.Submit(ops, func(err error) { o.committed(e.bus, p, err) })
	return ev, p, nil
}

// committed runs on the store's writer goroutine after the commit.
func (o *outbox) committed(b *Bus, p *pending, err error) {
	o.outMu.Lock()
	defer o.outMu.Unlock()
	p.ready = true
	p.err = err
	o.flushLocked(b)
}

// flushLocked delivers the ready prefix of the outbox in id order.
func (o *outbox) flushLocked(b *Bus) {
	n := 0
	for _, p := range o.pending {
		if !p.ready {
			break
		}
		n++
		if p.err != nil {
			// Never hand out an event the store lost; clients that
			// follow the session live rebuild from the store. An event
			// of a tree written elsewhere now (ErrMoved) is no fault
			// here: the node that lost the tree logs that once, and its
			// clients follow the tree where it is written.
			switch {
			case errors.Is(p.err, ErrMoved):
				b.log.Debug("event of a tree this process no longer writes; dropped", "event", p.ev.String(), "err", p.err)
				b.resyncMoved(p.ev.SessionID)
			default:
				b.log.Error("event not committed; dropped", "event", p.ev.String(), "err", p.err)
				b.resync(p.ev.SessionID)
			}
		} else {
			o.lastOut = p.ev.ID
			b.deliver(p.ev)
		}
		if p.done != nil {
			close(p.done)
		}
	}
	if n > 0 {
		clear(o.pending[:n])
		o.pending = o.pending[n:]
	}
}

// encodePayload marshals a payload; marshalled reports whether
// encoding/json produced it (valid and compact: no need to check again).
func encodePayload(v any) (p json.RawMessage, marshalled bool, err error) {
	switch p := v.(type) {
	case nil:
		return nil, true, nil
	case json.RawMessage:
		return p, false, nil
	case []byte:
		return json.RawMessage(p), false, nil
	}
	p, err = json.Marshal(v)
	return p, true, err
}

// Barrier waits until every event emitted by this session before the
// call has been committed and delivered.
func (e *Emitter) Barrier(ctx context.Context) error {
	done := make(chan struct{})
	e.o.submitMu.Lock()
	e.bus.store.Submit(nil, func(error) { close(done) })
	e.o.submitMu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bus: barrier for %s: %w", e.sessionID, ctx.Err())
	}
}
