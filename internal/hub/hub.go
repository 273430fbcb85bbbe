package hub

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/store"
)

// Store is what the hub reads from the trace store.
type Store interface {
	Events(ctx context.Context, q store.EventQuery) ([]*event.Event, error)
	CountEvents(ctx context.Context, q store.EventQuery) (int, error)
	Session(ctx context.Context, id string) (store.Session, error)
	MessagesAsOf(ctx context.Context, sessionID, eventID string, limit int) ([]message.Message, bool, error)
}

// Config sets the hub's limits (contract §1 names them).
type Config struct {
	ClientQueue      int           // per-client queue bound, events (default 1000)
	ReplayLimit      int           // most events one replay may carry (default 10000)
	Retention        time.Duration // cursors older than this are expired (default 168h)
	SnapshotMessages int           // messages in a snapshot (0: none)
	RingSize         int           // streaming events kept per session (0: none)
	Logger           *slog.Logger
	Metrics          *metrics.Stream // nil: none
	Now              func() time.Time
}

// Hub fans events out to attached clients. It implements bus.LiveSink.
type Hub struct {
	cfg   Config
	store Store
	bus   *bus.Bus
	log   *slog.Logger
	m     *metrics.Stream
	ids   atomic.Int64

	mu       sync.RWMutex
	sessions map[string]*sessionState
}

// sessionState is the hub's view of one session.
type sessionState struct {
	mu      sync.Mutex
	clients []*Client // copy on write
	ring    ring
	// heldFrom: every streaming event of this session with an id >= heldFrom
	// was pushed to the ring in this process (older ones are unknown).
	heldFrom    string
	currentTurn string // as of the last delivered event
}

// New returns a hub reading from st and emitting meta-events through b.
// Add it to the bus with b.AddLive before any event is emitted.
func New(st Store, b *bus.Bus, cfg Config) *Hub {
	if cfg.ClientQueue <= 0 {
		cfg.ClientQueue = 1000
	}
	if cfg.ReplayLimit <= 0 {
		cfg.ReplayLimit = 10000
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 168 * time.Hour
	}
	cfg.SnapshotMessages = max(cfg.SnapshotMessages, 0)
	cfg.RingSize = max(cfg.RingSize, 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Hub{cfg: cfg, store: st, bus: b, log: cfg.Logger, m: cfg.Metrics, sessions: map[string]*sessionState{}}
}

// state returns the session's state, creating it with heldFrom if new.
func (h *Hub) state(sessionID, heldFrom string) *sessionState {
	h.mu.RLock()
	st := h.sessions[sessionID]
	h.mu.RUnlock()
	if st != nil {
		return st
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st = h.sessions[sessionID]; st == nil {
		st = &sessionState{heldFrom: heldFrom}
		h.sessions[sessionID] = st
	}
	return st
}

// Publish implements bus.LiveSink. It is called under the session's
// outbox lock, once per event, in id order: it frames the event once,
// keeps streaming events in the ring, and offers the item to every
// matching client without blocking.
func (h *Hub) Publish(ev *event.Event) {
	it := newItem(ev)
	st := h.state(ev.SessionID, ev.ID)
	st.mu.Lock()
	if event.FamilyOf(ev.Type) == event.Streaming {
		st.ring.push(it, h.cfg.RingSize)
	}
	switch ev.Type {
	case event.TurnStarted:
		st.currentTurn = ev.TurnID
	case event.TurnCompleted, event.TurnCancelled:
		if st.currentTurn == ev.TurnID {
			st.currentTurn = ""
		}
	}
	clients := st.clients
	st.mu.Unlock()
	for _, c := range clients {
		if it.ID > c.after && c.filter.match(&it) && c.offer(it) {
			h.slow(c)
		}
	}
}

// slow reports a client whose queue overflowed (spec §8.2, step 2): the
// transport closes it when its writer wakes.
func (h *Hub) slow(c *Client) {
	h.bus.Warn(c.SessionID, c.Name, "client_too_slow", map[string]any{"queue_capacity": c.max})
	h.log.Warn("client too slow; closing", "subscription", c.Name, "session", c.SessionID, "queue", c.max)
}

// Unsubscribe detaches a client (spec §3.6): its queue is dropped and a
// bus.subscriber_unregistered meta-event is emitted. Idempotent.
func (h *Hub) Unsubscribe(c *Client) {
	if h.detach(c) {
		h.meta(c.SessionID, event.BusSubscriberUnregister, c.Name)
	}
}

// detach removes a client from its session and drops its queue,
// reporting whether it was attached. A subscribe that is refused after
// the seam detaches its client this way: it was never announced with
// bus.subscriber_registered, so no bus.subscriber_unregistered follows.
func (h *Hub) detach(c *Client) bool {
	h.mu.RLock()
	st := h.sessions[c.SessionID]
	h.mu.RUnlock()
	if st == nil {
		c.close()
		return false
	}
	st.mu.Lock()
	i := slices.Index(st.clients, c)
	if i >= 0 {
		next := make([]*Client, 0, len(st.clients)-1)
		next = append(append(next, st.clients[:i]...), st.clients[i+1:]...)
		st.clients = next
	}
	st.mu.Unlock()
	c.close()
	return i >= 0
}

// meta emits a bus meta-event about a subscription, without waiting.
func (h *Hub) meta(sessionID string, typ event.Type, name string) {
	em, err := h.bus.Emitter(context.Background(), sessionID)
	if err == nil {
		_, err = em.Emit(bus.Spec{Type: typ, Actor: event.ActorBus, Payload: map[string]string{"subscription_name": name}})
	}
	if err != nil {
		h.log.Debug("subscription meta-event not emitted", "type", typ, "err", err)
	}
}

// Clients returns how many clients are attached to a session.
func (h *Hub) Clients(sessionID string) int {
	h.mu.RLock()
	st := h.sessions[sessionID]
	h.mu.RUnlock()
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.clients)
}

func (h *Hub) nextName() string { return fmt.Sprintf("stream-%d", h.ids.Add(1)) }
