package bus

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/metis-agent/metis/internal/event"
)

// Handler processes one committed catalog event. An error or a panic is
// reported as a bus.handler_warning and the subscriber goes on with the
// next event.
type Handler func(ctx context.Context, ev *event.Event) error

// SubscribeOptions configure a subscriber.
type SubscribeOptions struct {
	// Types selects event types; nil selects every catalog event.
	Types []event.Type
	// Queue bounds the subscriber's queue (default: the bus's).
	Queue int
	// FromSeq, when > 0 or CatchUp is set, makes the subscriber first
	// read every committed event with a larger store sequence, so a
	// subscriber with a durable cursor misses nothing across restarts.
	FromSeq int64
	CatchUp bool
}

// catchUpPage is how many events one store read returns during catch-up.
const catchUpPage = 512

type subscriber struct {
	bus     *Bus
	name    string
	h       Handler
	types   map[event.Type]bool
	ch      chan *event.Event
	lagging atomic.Bool
	// dropped is the store sequence of the first event refused while the
	// queue was full; every earlier matching event was queued.
	dropped atomic.Int64
	stop    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	lastSeq int64 // owned by the subscriber goroutine
}

// Subscribe starts a subscriber named name (used in warnings and logs)
// that receives committed catalog events in commit order. It must be
// called before events it should see are emitted (or with CatchUp).
func (b *Bus) Subscribe(name string, h Handler, opts SubscribeOptions) {
	q := opts.Queue
	if q <= 0 {
		q = b.qlen
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{bus: b, name: name, h: h, ch: make(chan *event.Event, q),
		stop: make(chan struct{}), ctx: ctx, cancel: cancel, lastSeq: opts.FromSeq}
	if opts.Types != nil {
		s.types = make(map[event.Type]bool, len(opts.Types))
		for _, t := range opts.Types {
			s.types[t] = true
		}
	}
	if opts.CatchUp || opts.FromSeq > 0 {
		s.lagging.Store(true)
	}
	b.mu.Lock()
	var subs []*subscriber
	if p := b.subs.Load(); p != nil {
		subs = append(subs, *p...)
	}
	subs = append(subs, s)
	b.subs.Store(&subs) // copy on write: deliver reads without the lock
	b.mu.Unlock()
	b.wg.Add(1)
	go s.run()
}

func (s *subscriber) match(ev *event.Event) bool {
	return s.types == nil || s.types[ev.Type]
}

// offer enqueues without blocking. On overflow the subscriber switches to
// catching up from the store and one warning is emitted.
func (s *subscriber) offer(ev *event.Event) {
	if !s.match(ev) || s.lagging.Load() {
		return
	}
	select {
	case s.ch <- ev:
	default:
		if s.lagging.CompareAndSwap(false, true) {
			s.dropped.Store(ev.Seq)
			s.bus.Warn(ev.SessionID, s.name, "subscriber_queue_overflow",
				map[string]any{"queue_capacity": cap(s.ch)})
		}
	}
}

func (s *subscriber) close()     { close(s.stop) }
func (s *subscriber) cancelNow() { s.cancel() }

func (s *subscriber) run() {
	defer s.bus.wg.Done()
	defer s.cancel()
	for {
		if s.lagging.Load() {
			s.drainQueue()
			s.catchUp()
		}
		select {
		case ev := <-s.ch:
			s.handle(ev)
		case <-s.stop:
			s.drainQueue()
			if s.lagging.Load() {
				s.catchUp()
			}
			return
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *subscriber) drainQueue() {
	for {
		select {
		case ev := <-s.ch:
			s.handle(ev)
		default:
			return
		}
	}
}

// catchUp reads committed events after lastSeq until the store has no
// more, then clears the lagging flag and reads once more so an event
// dropped just before the flag cleared is not lost. Events that also
// arrive through the queue are skipped by sequence.
func (s *subscriber) catchUp() {
	if d := s.dropped.Swap(0); d > 0 {
		s.lastSeq = max(s.lastSeq, d-1)
	}
	for s.readStore() {
	}
	s.lagging.Store(false)
	for s.readStore() {
	}
}

// readStore processes one page and reports whether a full page came back.
func (s *subscriber) readStore() bool {
	evs, err := s.bus.store.EventsAfterSeq(s.ctx, s.lastSeq, catchUpPage)
	if err != nil {
		if s.ctx.Err() == nil {
			s.bus.log.Error("subscriber catch-up", "subscription", s.name, "err", err)
			select { // back off briefly rather than spin on a failing store
			case <-time.After(100 * time.Millisecond):
			case <-s.ctx.Done():
			}
		}
		return false
	}
	for _, ev := range evs {
		if s.match(ev) {
			s.handle(ev)
		} else {
			s.lastSeq = ev.Seq
		}
	}
	return len(evs) == catchUpPage
}

func (s *subscriber) handle(ev *event.Event) {
	if ev.Seq <= s.lastSeq {
		return // already seen during catch-up
	}
	s.lastSeq = ev.Seq
	if err := s.call(ev); err != nil {
		s.bus.Warn(ev.SessionID, s.name, "handler_error", map[string]any{"event_id": ev.ID, "error": err.Error()})
	}
}

func (s *subscriber) call(ev *event.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.h(s.ctx, ev)
}
