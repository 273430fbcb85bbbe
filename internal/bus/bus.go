package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
)

// ErrClosed is returned by emits after Close.
var ErrClosed = errors.New("bus: closed")

// ErrNotCommitted is returned (wrapped, with the store's error) by
// EmitWait for a catalog event whose transaction failed (a disk full, an
// I/O error): the event and its ops were not stored and the event was
// never delivered.
var ErrNotCommitted = errors.New("bus: event not committed")

// Store is what the bus needs of the trace store.
type Store interface {
	// Submit queues ops for one transaction and calls done after commit.
	Submit(ops []store.Op, done func(error))
	// LastEventID returns the newest event id of a session ("" if none).
	LastEventID(ctx context.Context, sessionID string) (string, error)
	// EventsAfterSeq returns committed events in global append order.
	EventsAfterSeq(ctx context.Context, afterSeq int64, limit int) ([]*event.Event, error)
	// Session returns a session row (for its parent), or an error
	// wrapping store.ErrNotFound.
	Session(ctx context.Context, id string) (store.Session, error)
}

// LiveSink receives every delivered event of both families, per session
// in id order. Publish must not block: it is called with the session's
// outbox held.
type LiveSink interface {
	Publish(ev *event.Event)
}

// Resyncer is a LiveSink that is told when an event of a session was not
// committed, and so never delivered. Clients that follow the session
// live may have seen streaming events around the lost one, and a turn
// they watch ends with events they must not miss: the sink makes them
// rebuild from the store (reconnect with their cursor). Resync must not
// block: it is called with the session's outbox held.
type Resyncer interface {
	Resync(sessionID string)
}

// MoveResyncer is a Resyncer that tells its clients apart when the
// events they miss are written elsewhere from now on (cluster mode: the
// node lost the tree; Suspend): they are told the session's owner
// changed rather than that an event was lost.
type MoveResyncer interface {
	ResyncMoved(sessionID string)
}

// Gapper is a live sink that is told of events of a tree relayed here
// that this process will never get: they were emitted elsewhere and
// never reached the log (RelayGap). Gap must not block: it is called
// with the tree's outbox held.
type Gapper interface {
	Gap(tree, through string)
}

// Options configure a Bus.
type Options struct {
	Logger *slog.Logger
	// SubscriberQueue bounds each subscriber's queue (default 4096).
	SubscriberQueue int
	// Live is the streaming server; nil drops live delivery.
	Live LiveSink
}

// Bus is the in-process event bus. Create it with New, obtain a
// session's Emitter with Emitter, attach subscribers with Subscribe, and
// Close it after every emitter has stopped.
type Bus struct {
	store  Store
	stream StreamingStore // store, if it keeps streaming events too (cluster mode)
	log    *slog.Logger
	qlen   int
	live   atomic.Pointer[[]LiveSink] // copy on write
	closed atomic.Bool

	mu       sync.Mutex
	emitters map[string]*Emitter
	subs     atomic.Pointer[[]*subscriber] // copy on write; read without mu

	warnings chan warning
	wg       sync.WaitGroup
	stop     chan struct{}
}

// New returns a bus writing through st.
func New(st Store, opts Options) *Bus {
	b := &Bus{
		store:    st,
		log:      opts.Logger,
		qlen:     opts.SubscriberQueue,
		emitters: make(map[string]*Emitter),
		warnings: make(chan warning, 256),
		stop:     make(chan struct{}),
	}
	b.stream, _ = st.(StreamingStore)
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.qlen <= 0 {
		b.qlen = 4096
	}
	if opts.Live != nil {
		b.AddLive(opts.Live)
	}
	b.wg.Add(1)
	go b.warnLoop()
	return b
}

// AddLive adds a live sink (the streaming server; tests add recorders).
// Events delivered before it is added are not sent to it.
func (b *Bus) AddLive(s LiveSink) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sinks []LiveSink
	if p := b.live.Load(); p != nil {
		sinks = append(sinks, *p...)
	}
	sinks = append(sinks, s)
	b.live.Store(&sinks)
}

// Emitter returns the emitter of an existing session, creating it on
// first use. A worker's emitter joins its tree's outbox (the parent is
// read from the store); a session not in the store yet is a root.
func (b *Bus) Emitter(ctx context.Context, sessionID string) (*Emitter, error) {
	return b.emitter(ctx, sessionID, true)
}

// emitter is Emitter; see attach for deliveredToo.
func (b *Bus) emitter(ctx context.Context, sessionID string, deliveredToo bool) (*Emitter, error) {
	b.mu.Lock()
	if e, ok := b.emitters[sessionID]; ok {
		b.mu.Unlock()
		return e, nil
	}
	b.mu.Unlock()
	parent := ""
	s, err := b.store.Session(ctx, sessionID)
	switch {
	case err == nil:
		parent = s.ParentSessionID
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("bus: emitter for %s: %w", sessionID, err)
	}
	return b.attach(ctx, sessionID, parent, deliveredToo)
}

// Attach returns the emitter of sessionID, creating it as a member of
// parentID's delegation tree ("" for a root). Session creation uses it
// before the session row exists.
func (b *Bus) Attach(ctx context.Context, sessionID, parentID string) (*Emitter, error) {
	return b.attach(ctx, sessionID, parentID, true)
}

// attach is Attach; deliveredToo moves the tree's delivery point to the
// session's newest stored event, as an emitter of a session that
// emits here must. Relay creates emitters without it: the events it
// relays (committed elsewhere, and already in the store) are what
// moves it. Nor does a session that joins a tree this process relays
// (outbox.relayed), whoever asks for its emitter: a client that
// includes workers makes theirs from the store, which may hold events
// the tree's feed has not relayed yet, and moving the delivery point
// past them would make Relay drop them, and everything in between, as
// delivered.
func (b *Bus) attach(ctx context.Context, sessionID, parentID string, deliveredToo bool) (*Emitter, error) {
	var o *outbox
	if parentID != "" {
		pe, err := b.emitter(ctx, parentID, deliveredToo)
		if err != nil {
			return nil, err
		}
		o = pe.o
	}
	last, err := b.store.LastEventID(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("bus: emitter for %s: %w", sessionID, err)
	}
	if o == nil {
		seq, err := event.NewSequencer(last, nil)
		if err != nil {
			return nil, fmt.Errorf("bus: emitter for %s: %w", sessionID, err)
		}
		// An earlier process may have streamed after its last stored
		// event, in the same millisecond: its deltas' ids were never
		// stored, and a client may hold them as its cursor.
		seq.LeaveMillisecond()
		o = &outbox{seq: seq}
		if deliveredToo {
			o.lastOut = last
		}
	} else {
		// Joining a tree: its ids, and the seam of a tree this process
		// writes, move past this session's own. (outMu is never taken
		// under b.mu: delivery takes them the other way round.)
		if err := o.seq.Observe(last); err != nil {
			return nil, fmt.Errorf("bus: emitter for %s: %w", sessionID, err)
		}
		if deliveredToo {
			o.outMu.Lock()
			if !o.relayed {
				b.moveLastOut(o, last, sessionID)
			}
			o.outMu.Unlock()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.emitters[sessionID]; ok {
		return e, nil
	}
	e := &Emitter{bus: b, sessionID: sessionID, o: o}
	b.emitters[sessionID] = e
	return e, nil
}

// Lookup returns the emitter of a session if one exists.
func (b *Bus) Lookup(sessionID string) (*Emitter, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.emitters[sessionID]
	return e, ok
}

func (b *Bus) isClosed() bool { return b.closed.Load() }

// deliver hands a committed (or streaming) event to its consumers. It
// runs under the session's outbox lock and never blocks.
func (b *Bus) deliver(ev *event.Event) {
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			s.Publish(ev)
		}
	}
	if ev.Seq == 0 { // streaming family: live only
		return
	}
	if subs := b.subs.Load(); subs != nil {
		for _, s := range *subs {
			s.offer(ev)
		}
	}
}

// resync tells the live sinks that can rebuild their clients that an
// event of sessionID was lost.
func (b *Bus) resync(sessionID string) {
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			if r, ok := s.(Resyncer); ok {
				r.Resync(sessionID)
			}
		}
	}
}

// resyncMoved tells the live sinks that can rebuild their clients that
// sessionID is written elsewhere from now on.
func (b *Bus) resyncMoved(sessionID string) {
	if p := b.live.Load(); p != nil {
		for _, s := range *p {
			switch r := s.(type) {
			case MoveResyncer:
				r.ResyncMoved(sessionID)
			case Resyncer:
				r.Resync(sessionID)
			}
		}
	}
}

// Warn emits a bus.handler_warning into a session asynchronously. It
// never blocks; warnings beyond the bus's small buffer are logged only.
func (b *Bus) Warn(sessionID, subscription, reason string, detail map[string]any) {
	w := warning{sessionID: sessionID, subscription: subscription, reason: reason, detail: detail}
	select {
	case b.warnings <- w:
	default:
		b.log.Warn("bus warning dropped", "session", sessionID, "subscription", subscription, "reason", reason)
	}
}

type warning struct {
	sessionID, subscription, reason string
	detail                          map[string]any
	// done, when set, makes this a barrier (WaitWarnings), not a
	// warning: it is closed once the warnings queued before it are
	// emitted.
	done chan struct{}
}

// WaitWarnings waits until every warning Warn queued before the call
// has been emitted (its event has its id, so anything emitted into the
// same tree afterwards sorts after it), or until ctx is done or the bus
// closes. A slow client's bus.subscriber_unregistered waits on it, so
// it follows the client's bus.handler_warning.
func (b *Bus) WaitWarnings(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case b.warnings <- warning{done: done}:
	case <-b.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-b.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Bus) warnLoop() {
	defer b.wg.Done()
	for {
		select {
		case w := <-b.warnings:
			b.emitWarning(w)
		case <-b.stop:
			for {
				select {
				case w := <-b.warnings:
					b.emitWarning(w)
				default:
					return
				}
			}
		}
	}
}

func (b *Bus) emitWarning(w warning) {
	if w.done != nil {
		close(w.done)
		return
	}
	b.log.Warn("bus handler warning", "session", w.sessionID, "subscription", w.subscription, "reason", w.reason)
	if w.sessionID == "" {
		return
	}
	em, err := b.Emitter(context.Background(), w.sessionID)
	if err != nil {
		b.log.Error("bus warning: no emitter", "err", err)
		return
	}
	payload := WarningPayload(w.subscription, w.reason, w.detail)
	if _, err := em.Emit(Spec{Type: event.BusHandlerWarning, Actor: event.ActorBus, Payload: payload}); err != nil && !errors.Is(err, ErrClosed) {
		b.log.Error("bus warning: emit", "err", err)
	}
}

// WarningPayload is the payload of a bus.handler_warning: the
// subscription's name, the reason, and the detail's fields. A process
// that has another emit a warning (cluster mode) sends this payload.
func WarningPayload(subscription, reason string, detail map[string]any) map[string]any {
	payload := map[string]any{"subscription_name": subscription, "reason": reason}
	for k, v := range detail {
		payload[k] = v
	}
	return payload
}

// Flush waits until every event emitted so far, in every session, has
// been committed and delivered.
func (b *Bus) Flush(ctx context.Context) error {
	b.mu.Lock()
	ems := make([]*Emitter, 0, len(b.emitters))
	for _, e := range b.emitters {
		ems = append(ems, e)
	}
	b.mu.Unlock()
	seen := map[*outbox]bool{}
	for _, e := range ems {
		if seen[e.o] {
			continue
		}
		seen[e.o] = true
		if err := e.Barrier(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the bus: later emits fail with ErrClosed, pending
// warnings are emitted, and subscribers drain their queues before their
// goroutines exit (bounded by ctx). Call it after every agent loop has
// stopped and before closing the store.
func (b *Bus) Close(ctx context.Context) error {
	if b.closed.Load() {
		return nil
	}
	// Let every event already emitted reach the subscribers first.
	if err := b.Flush(ctx); err != nil {
		b.log.Warn("bus close: flush", "err", err)
	}
	if b.closed.Swap(true) {
		return nil
	}
	// Warnings may still be emitted while closing; let the loop drain
	// them with the bus marked closed (their emits then fail quietly).
	close(b.stop)
	var subs []*subscriber
	if p := b.subs.Load(); p != nil {
		subs = *p
	}
	for _, s := range subs {
		s.close()
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, s := range subs {
			s.cancelNow()
		}
		<-done
		return fmt.Errorf("bus: close: %w", ctx.Err())
	}
}
