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
	"github.com/metis-agent/metis/protocol"
)

// Store is what the hub reads from the trace store.
type Store interface {
	Events(ctx context.Context, q store.EventQuery) ([]*event.Event, error)
	CountEvents(ctx context.Context, q store.EventQuery) (int, error)
	EventAtOrBefore(ctx context.Context, sessionIDs []string, id string) (string, error)
	ScanEvents(ctx context.Context, q store.EventQuery, fn func(store.EventRow) error) error
	ScanEventBatch(ctx context.Context, q store.EventQuery, limit int, fn func(*store.EventRow)) (int, error)
	Session(ctx context.Context, id string) (store.Session, error)
	MessagesAsOf(ctx context.Context, sessionID, eventID string, limit int) ([]message.Message, bool, error)
	SummaryAsOf(ctx context.Context, sessionID, asOf string) (store.Session, error)
	Children(ctx context.Context, parentID string) ([]store.Session, error)
	Delegations(ctx context.Context, sessionID, upToID string) ([]*event.Event, error)
	TreeRoot(ctx context.Context, id string) (store.Session, error)
}

// Config sets the hub's limits (contract §1 names them).
type Config struct {
	ClientQueue int // per-client queue bound, events (default 1000)
	// ClientQueueBytes bounds each client's queue by the bytes of its
	// frames too (default 8 MiB); see Client.
	ClientQueueBytes int64
	ReplayLimit      int           // most events one replay may carry (default 10000)
	Retention        time.Duration // cursors older than this are expired (default 168h)
	SnapshotMessages int           // messages in a snapshot (0: none)
	RingSize         int           // streaming events kept per session (0: none)
	// RingBytes caps the streaming rings of all sessions together, in
	// bytes (frames plus a fixed per-event overhead); 0: no global cap.
	// Over it, the oldest events of idle sessions' rings go first (see
	// trim).
	RingBytes int64
	Logger    *slog.Logger
	Metrics   *metrics.Stream // nil: none
	Now       func() time.Time
	// Counters, if set, returns a session's turn_count and
	// cost_so_far_usd exactly as of an event id, for snapshots; without
	// it the snapshot reports the session row as read.
	Counters func(ctx context.Context, sessionID string, descendants []string, asOf string) (int, float64, error)
	// PolicyVersion, if set, is the routing policy in force, reported as
	// the snapshot's routing_policy_version (as GET /sessions does).
	PolicyVersion func() string
	// Background, if set, lists a session's background commands as they
	// are now (live state, at least as new as the snapshot's seam: the
	// tool.background_* events after the seam set the same again).
	Background func(sessionID string) []protocol.BackgroundCommand
	// Emits, if set, reports whether this process may emit into a
	// session (its meta-events: bus.subscriber_registered and
	// _unregistered, a slow client's bus.handler_warning). In cluster
	// mode only the owner of the session's tree emits into it; a node
	// serving a client of a tree owned elsewhere emits none itself.
	Emits func(sessionID string) bool
	// Forward, if set, takes the meta-events of the sessions Emits
	// refuses, with their payloads as this process would have emitted
	// them, and has them emitted by the process that may (in cluster
	// mode: the owner of the session's tree). It must not block: it is
	// called while events are delivered (a slow client's warning).
	Forward func(sessionID string, typ event.Type, payload map[string]any)
	// Node, if set, is added to every subscription name
	// ("stream-N@node"), so that names stay unique among the nodes of a
	// cluster, whose meta-events share one tree log.
	Node string
	// AwaitCursor, if set, is called by Subscribe when the cursor
	// (since) is past what the session's tree has delivered here: it
	// may wait, bounded, until the tree's delivery point catches up.
	// In cluster mode a cursor taken on another node can be a moment
	// ahead of what this node has relayed. Subscribe then goes on from
	// wherever the delivery point is.
	AwaitCursor func(ctx context.Context, sessionID, since string)

	// WindowBytes caps the replay windows of all sessions together, in
	// bytes (frames plus fixed per-event and per-session overheads);
	// 0: no window, every replay reads the trace store. WindowEvents
	// bounds each session's window (default ReplayLimit). See window.go.
	WindowBytes  int64
	WindowEvents int
}

// DefaultClientQueueBytes is the default byte bound of a client's
// queue: about a thousand large events (8 KiB each), far more than a
// thousand deltas.
const DefaultClientQueueBytes = 8 << 20

// Hub fans events out to attached clients. It implements bus.LiveSink.
type Hub struct {
	cfg   Config
	store Store
	bus   *bus.Bus
	log   *slog.Logger
	m     *metrics.Stream
	ids   atomic.Int64
	// subscribing counts subscribes between learning their delegation
	// tree and attaching their client; Sweep keeps every tree meanwhile.
	subscribing atomic.Int64

	ringBytes     atomic.Int64 // the cost of every ring's held items
	ringEvictions atomic.Int64 // items let go to honour RingBytes
	trimMu        sync.Mutex   // one trim at a time

	win *windowSet // the replay windows; nil: off

	mu       sync.RWMutex
	sessions map[string]*sessionState
	parents  map[string]string   // worker session → its planner
	children map[string][]string // planner → its workers
}

// sessionState is the hub's view of one session.
type sessionState struct {
	mu      sync.Mutex
	clients []*Client // copy on write
	ring    ring
	// heldFrom: every streaming event of this session with an id >= heldFrom
	// was pushed to the ring in this process (older ones are unknown).
	heldFrom    string
	currentTurn string    // as of the last delivered event
	call        *openCall // the model call in flight, as of the last delivered event
	lastActive  time.Time // emission time of the last event, for Sweep
	// swept is set, under mu, when Sweep removes the state from the hub:
	// whoever locks it afterwards must look the session up again
	// (lockState), or its client or event would land in a state nobody
	// reads.
	swept bool
}

// New returns a hub reading from st and emitting meta-events through b.
// Add it to the bus with b.AddLive before any event is emitted.
func New(st Store, b *bus.Bus, cfg Config) *Hub {
	if cfg.ClientQueue <= 0 {
		cfg.ClientQueue = 1000
	}
	if cfg.ClientQueueBytes <= 0 {
		cfg.ClientQueueBytes = DefaultClientQueueBytes
	}
	if cfg.ReplayLimit <= 0 {
		cfg.ReplayLimit = 10000
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 168 * time.Hour
	}
	cfg.SnapshotMessages = max(cfg.SnapshotMessages, 0)
	cfg.RingSize = max(cfg.RingSize, 0)
	cfg.RingBytes = max(cfg.RingBytes, 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WindowEvents <= 0 {
		cfg.WindowEvents = cfg.ReplayLimit
	}
	h := &Hub{cfg: cfg, store: st, bus: b, log: cfg.Logger, m: cfg.Metrics, sessions: map[string]*sessionState{},
		parents: map[string]string{}, children: map[string][]string{}}
	if cfg.WindowBytes > 0 {
		h.win = newWindowSet(cfg.WindowEvents, cfg.WindowBytes, cfg.Metrics)
	}
	return h
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

// lockState returns the session's state, created with heldFrom if new,
// with its mu held. It never returns a state Sweep has removed: a
// state created by this very call may be swept before it is locked
// (it has no client and no event yet), and is then looked up again.
func (h *Hub) lockState(sessionID, heldFrom string) *sessionState {
	for {
		st := h.state(sessionID, heldFrom)
		st.mu.Lock()
		if !st.swept {
			return st
		}
		st.mu.Unlock()
	}
}

// Publish implements bus.LiveSink. It is called under the session's
// outbox lock, once per event, in id order: it frames the event once,
// keeps streaming events in the ring, and offers the item to every
// matching client without blocking.
func (h *Hub) Publish(ev *event.Event) {
	streaming := event.FamilyOf(ev.Type) == event.Streaming
	if ev.Type == event.SessionCreated {
		h.learnParent(ev)
	}
	// Frame the event only if someone needs the bytes: the ring, or a
	// client of this session or of a planner above it.
	var it *Item
	frame := func() *Item {
		if it == nil {
			it = newItem(ev)
		}
		return it
	}
	st := h.lockState(ev.SessionID, ev.ID)
	st.lastActive = ev.TS
	var grown int64
	switch {
	case streaming && h.cfg.RingSize > 0:
		grown = st.ring.push(frame(), h.cfg.RingSize)
	case streaming:
		// Kept nowhere: a gap for any cursor before it.
		st.ring.forget(ev.Type, ev.Actor, ev.ID)
	}
	switch ev.Type {
	case event.TurnStarted:
		st.currentTurn = ev.TurnID
	case event.TurnCompleted, event.TurnCancelled:
		if st.currentTurn == ev.TurnID {
			st.currentTurn = ""
		}
	}
	st.track(ev)
	clients := st.clients
	st.mu.Unlock()
	if grown != 0 {
		h.ringGrew(grown)
	}
	if !streaming && h.win != nil {
		h.win.add(frame()) // committed: delivered after its commit
	}
	h.offer(clients, false, ev, frame)
	// Planners above a worker see its events if they asked for workers
	// (spec §7.2), and its approval requests in any case (the user
	// watches the planner, and answers there). The whole delegation tree
	// shares one outbox, so this runs in the tree's id order.
	for _, anc := range h.ancestors(ev.SessionID) {
		h.mu.RLock()
		ast := h.sessions[anc]
		h.mu.RUnlock()
		if ast == nil {
			continue
		}
		ast.mu.Lock()
		aclients := ast.clients
		ast.mu.Unlock()
		h.offer(aclients, true, ev, frame)
	}
}

// offer queues the event for each matching client; workersOnly keeps
// the clients that asked for worker sessions, and, for the events that
// reach planners (reachesPlanners), every client.
func (h *Hub) offer(clients []*Client, workersOnly bool, ev *event.Event, frame func() *Item) {
	for _, c := range clients {
		if workersOnly && !c.filter.workers && !reachesPlanners(ev.Type) {
			continue
		}
		if ev.ID <= c.after || !c.filter.matchEvent(ev) {
			continue
		}
		if c.offer(frame()) {
			h.slow(c)
		}
	}
}

// Sweep forgets the state (ring included) of sessions that have no
// client attached, no turn in flight and saw no event for idle, and the
// delegation links of trees left with no state at all. A forgotten
// session is rebuilt on demand; a cursor into its forgotten ring is
// reported as a streaming gap, as after a restart. A session whose turn
// is in flight is kept however quiet the turn is (a long tool call): its
// state is what snapshots read the current turn from.
func (h *Hub) Sweep(idle time.Duration) int {
	cutoff := h.cfg.Now().Add(-idle)
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for id, st := range h.sessions {
		st.mu.Lock()
		if len(st.clients) == 0 && st.currentTurn == "" && st.lastActive.Before(cutoff) {
			st.swept = true
			h.ringBytes.Add(-st.ring.bytes)
			delete(h.sessions, id)
			n++
		}
		st.mu.Unlock()
	}
	h.pruneTreesLocked()
	if h.m != nil {
		h.m.RingBytes.Set(float64(h.ringBytes.Load()))
	}
	return n
}

// slow reports a client whose queue overflowed (spec §8.2, step 2): the
// transport closes it when its writer wakes.
func (h *Hub) slow(c *Client) {
	o, _ := c.Overflow()
	detail := map[string]any{"queue_capacity": c.max, "queue_capacity_bytes": c.maxBytes,
		"queue_events": o.Events, "queue_bytes": o.Bytes}
	if h.cfg.Emits != nil && !h.cfg.Emits(c.SessionID) {
		if h.cfg.Forward != nil {
			h.cfg.Forward(c.SessionID, event.BusHandlerWarning,
				bus.WarningPayload(c.Name, protocol.ReasonClientTooSlow.Code, detail))
		}
	} else {
		h.bus.Warn(c.SessionID, c.Name, protocol.ReasonClientTooSlow.Code, detail)
	}
	close(c.reported)
	// The transport logs the close, with these numbers (one line per
	// slow client).
	h.log.Debug("client too slow", "subscription", c.Name, "session", c.SessionID, "queue_events", o.Events, "queue_bytes", o.Bytes)
}

// Unsubscribe detaches a client (spec §3.6): its queue is dropped and a
// bus.subscriber_unregistered meta-event is emitted. Idempotent.
func (h *Hub) Unsubscribe(c *Client) {
	if h.detach(c) {
		if o, over := c.Overflow(); over && !o.Resync {
			// The unregistration follows the client's warning: wait
			// until it is queued (the writer may see the overflow
			// first), then until the bus emitted it.
			ctx, cancel := context.WithTimeout(context.Background(), warningWait)
			select {
			case <-c.reported:
				_ = h.bus.WaitWarnings(ctx)
			case <-ctx.Done():
			}
			cancel()
		}
		h.meta(c.SessionID, event.BusSubscriberUnregister, c.Name)
	}
}

// warningWait bounds how long a slow client's unregistration waits for
// its warning to be emitted.
const warningWait = time.Second

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

// meta emits a bus meta-event about a subscription, without waiting;
// a session this process may not emit into gets it through Forward.
func (h *Hub) meta(sessionID string, typ event.Type, name string) {
	if h.cfg.Emits != nil && !h.cfg.Emits(sessionID) {
		if h.cfg.Forward != nil {
			h.cfg.Forward(sessionID, typ, map[string]any{"subscription_name": name})
		}
		return
	}
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

// nextName names a new client: "stream-N", or "stream-N@node" with
// Config.Node set.
func (h *Hub) nextName() string {
	if h.cfg.Node != "" {
		return fmt.Sprintf("stream-%d@%s", h.ids.Add(1), h.cfg.Node)
	}
	return fmt.Sprintf("stream-%d", h.ids.Add(1))
}
