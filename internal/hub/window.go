package hub

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// The replay window: each session's most recent committed catalog
// events, kept in memory as the items Publish framed for the live
// clients (the same *Item, so its frame and any transport's encoding of
// it, SSE's record head, are built once and shared by every client and
// every transport). A replay whose cursor is inside a session's window
// is served from it without reading the trace store; one whose cursor
// is older reads the store up to the window's floor and the window from
// there (replay.go), so the two join without a gap or a duplicate.
//
// The window is a cache of what is committed, never more:
//
//   - Publish adds a catalog event only after its commit, in the order
//     of delivery (id order per delegation tree, under the tree's outbox
//     lock), so a window holds every committed catalog event of its
//     session with an id after its floor, up to the tree's delivery
//     point: what a replay of (since, seam] needs.
//   - Whatever could break that forgets the window (invalidate): an
//     event that could not be committed (Resync), a delivery point moved
//     past events the hub was never handed (Skipped: cluster catch-up and
//     takeover, an emitter made from the store), and a tree a cluster
//     node starts following (Backfill, which fills it again from the
//     store, the node's projection).
//   - Retention: before the store deletes the events older than a cutoff,
//     the windows let the same events go (PruneWindows), and nothing
//     older than the latest cutoff is added afterwards.
//   - A restart starts with no window at all.
//
// Memory: every window together holds at most Config.WindowBytes (each
// event's frame plus itemOverhead, and windowOverhead per session); over
// it, windows are let go whole, least recently used (appended to or
// replayed from) first. A session's window holds at most WindowEvents
// events (default the replay limit), its oldest going first, each
// moving the floor up. The session being appended to is never let go
// whole: if it alone is over the cap, its oldest events go.

// windowOverhead approximates what a session's window costs besides its
// items: the struct, its map entry, its slice header and session id.
const windowOverhead = 256

// windowSet holds every session's replay window.
type windowSet struct {
	perSession int   // most events per window
	cap        int64 // bytes of every window together
	m          *metrics.Stream

	mu    sync.Mutex
	byID  map[string]*window
	lru   window // sentinel of the use order: lru.next is the most recent
	bytes int64
	// evictions counts windows let go whole for the cap.
	evictions int64
	// pruneBefore is the latest retention cutoff: no event older than
	// it is added (the store may have deleted it).
	pruneBefore time.Time
}

// window is one session's replay window.
type window struct {
	sid string
	// floor: the window holds every committed catalog event of its
	// session with an id after floor ("": every one), up to the delivery
	// point of its tree.
	floor string
	// items[start:] are held, oldest first, every id after floor. The
	// held part is never written: a replay keeps a slice of it without
	// the lock, so items go from the front by moving start, and the
	// slice is copied anew (never in place) when start grows.
	items      []*Item
	start      int
	bytes      int64
	prev, next *window
}

func newWindowSet(perSession int, capBytes int64, m *metrics.Stream) *windowSet {
	ws := &windowSet{perSession: perSession, cap: capBytes, m: m, byID: map[string]*window{}}
	ws.lru.prev, ws.lru.next = &ws.lru, &ws.lru
	return ws
}

func (w *window) held() []*Item { return w.items[w.start:] }

// last returns the newest id the window covers: its newest item's, or
// its floor.
func (w *window) last() string {
	if len(w.items) > w.start {
		return w.items[len(w.items)-1].ID
	}
	return w.floor
}

// popOldest lets the oldest held item go, moving the floor to it, and
// returns its cost.
func (w *window) popOldest() int64 {
	it := w.items[w.start]
	w.start++
	w.floor = it.ID
	c := cost(it)
	w.bytes -= c
	switch {
	case w.start == len(w.items):
		w.items, w.start = nil, 0
	case w.start >= 64 && w.start*4 >= len(w.items):
		w.items, w.start = slices.Clone(w.items[w.start:]), 0
	}
	return c
}

// create makes sid's window, empty, with floor; ws.mu is held.
func (ws *windowSet) create(sid, floor string) *window {
	w := &window{sid: sid, floor: floor, bytes: windowOverhead}
	ws.byID[sid] = w
	ws.bytes += windowOverhead
	ws.touch(w)
	return w
}

// touch makes w the most recently used window; ws.mu is held.
func (ws *windowSet) touch(w *window) {
	if w.prev != nil {
		w.prev.next, w.next.prev = w.next, w.prev
	}
	w.prev, w.next = &ws.lru, ws.lru.next
	ws.lru.next.prev = w
	ws.lru.next = w
}

// drop lets w go whole; ws.mu is held.
func (ws *windowSet) drop(w *window) {
	w.prev.next, w.next.prev = w.next, w.prev
	w.prev, w.next = nil, nil
	delete(ws.byID, w.sid)
	ws.bytes -= w.bytes
}

// add appends a committed catalog event's item to its session's window,
// creating the window (floor just below it) if there is none. It is
// called by Publish, in delivery order.
func (ws *windowSet) add(it *Item) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byID[it.SessionID]
	if w != nil && it.ID <= w.last() {
		// Out of order: never expected, but the window would then not
		// be the store's answer. Start again from this event.
		ws.drop(w)
		w = nil
	}
	if w == nil {
		floor, err := event.IDBefore(it.ID)
		if err != nil {
			return // not an event id: keep nothing
		}
		w = ws.create(it.SessionID, floor)
	} else {
		ws.touch(w)
	}
	w.items = append(w.items, it)
	c := cost(it)
	w.bytes += c
	ws.bytes += c
	for len(w.items)-w.start > ws.perSession {
		ws.bytes -= w.popOldest()
	}
	ws.enforce(w)
	ws.report()
}

// enforce brings every window together under the cap, to trimTarget of
// it: least recently used windows go whole first, never cur; then, if
// cur alone is over, its oldest items. ws.mu is held.
func (ws *windowSet) enforce(cur *window) {
	if ws.bytes <= ws.cap {
		return
	}
	target := ws.cap / trimDen * trimNum
	for ws.bytes > target {
		v := ws.lru.prev
		if v == &ws.lru || v == cur {
			break
		}
		ws.drop(v)
		ws.evictions++
		if ws.m != nil {
			ws.m.WindowEvictions.Inc()
		}
	}
	for ws.bytes > target && cur != nil && len(cur.items) > cur.start {
		ws.bytes -= cur.popOldest()
	}
}

// report updates the gauges; ws.mu is held.
func (ws *windowSet) report() {
	if ws.m != nil {
		ws.m.WindowBytes.Set(float64(ws.bytes))
		ws.m.WindowSessions.Set(float64(len(ws.byID)))
	}
}

// view returns what sid's window holds of a replay of (since, seam]:
// its floor, and its items with max(since, floor) < id <= seam; ok is
// false when the session has no window. The items are shared: callers
// must not modify them (the slice's capacity ends with it).
func (ws *windowSet) view(sid, since, seam string) (floor string, items []*Item, ok bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byID[sid]
	if w == nil {
		return "", nil, false
	}
	ws.touch(w)
	held := w.held()
	lo := max(since, w.floor)
	i := sort.Search(len(held), func(k int) bool { return held[k].ID > lo })
	j := sort.Search(len(held), func(k int) bool { return held[k].ID > seam })
	if j < i {
		j = i
	}
	return w.floor, held[i:j:j], true
}

// invalidate forgets the windows of the sessions.
func (ws *windowSet) invalidate(sids ...string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, sid := range sids {
		if w := ws.byID[sid]; w != nil {
			ws.drop(w)
		}
	}
	ws.report()
}

// prune lets go every held event older than before (by its emission
// time, as the store's retention deletes them), moving each floor up
// past the newest such event, and keeps events older than before out
// from now on. A window left with nothing held goes whole.
func (ws *windowSet) prune(before time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if before.After(ws.pruneBefore) {
		ws.pruneBefore = before
	}
	for _, w := range ws.byID {
		n := w.expired(ws.pruneBefore)
		for range n {
			ws.bytes -= w.popOldest()
		}
		if n > 0 && len(w.items) == w.start {
			ws.drop(w)
		}
	}
	ws.report()
}

// expired returns how many of w's oldest held items must go for
// nothing older than before to remain: up to the newest such item
// (emission times need not increase with ids).
func (w *window) expired(before time.Time) int {
	n := 0
	for i, it := range w.held() {
		if it.TS.Before(before) {
			n = i + 1
		}
	}
	return n
}

// fill replaces sid's window with items (oldest first, every id after
// floor): what the store holds of the session after floor, up to the
// delivery point of its tree.
func (ws *windowSet) fill(sid, floor string, items []*Item) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.byID[sid]; w != nil {
		ws.drop(w)
	}
	w := ws.create(sid, floor)
	w.items = items
	for _, it := range items {
		w.bytes += cost(it)
		ws.bytes += cost(it)
	}
	for range w.expired(ws.pruneBefore) {
		ws.bytes -= w.popOldest()
	}
	for len(w.items)-w.start > ws.perSession {
		ws.bytes -= w.popOldest()
	}
	ws.enforce(w)
	ws.report()
}

// WindowBytes returns what every session's replay window holds, in the
// cap's units.
func (h *Hub) WindowBytes() int64 {
	if h.win == nil {
		return 0
	}
	h.win.mu.Lock()
	defer h.win.mu.Unlock()
	return h.win.bytes
}

// WindowEvictions returns how many windows the cap has let go whole.
func (h *Hub) WindowEvictions() int64 {
	if h.win == nil {
		return 0
	}
	h.win.mu.Lock()
	defer h.win.mu.Unlock()
	return h.win.evictions
}

// Skipped implements bus.Skipper: the delivery point of the sessions'
// tree moved past events the hub was never handed, so their windows no
// longer hold every event they claim to: they are forgotten, and start
// again with the next event delivered.
func (h *Hub) Skipped(sessionIDs []string) {
	if h.win != nil {
		h.win.invalidate(sessionIDs...)
	}
}

// PruneWindows lets the replay windows go of every event emitted
// before the cutoff, and keeps such events out of them from then on.
// Call it before the trace store's retention deletes those events
// (store.Prune with the same cutoff), so that no replay is served from
// memory what the store no longer holds.
func (h *Hub) PruneWindows(before time.Time) {
	if h.win != nil {
		h.win.prune(before)
	}
}

// windowStore is what fillWindows reads: the newest events of a
// session (store.Store has it). A Store without it leaves the windows
// of a backfilled tree empty.
type windowStore interface {
	LatestEvents(ctx context.Context, sessionID, upToID string, limit int, fn func(r *store.EventRow) bool) (int, error)
}

// fillWindows fills the windows of a tree's sessions from the store (in
// cluster mode: this node's projection) as of asOf, the tree's delivery
// point: each gets its newest catalog events up to asOf, at most
// WindowEvents and the cap's worth, so that a replay on a node that just
// started following the tree is served from memory as on the node that
// wrote it. Called by Backfill, under the tree's outbox lock.
func (h *Hub) fillWindows(ctx context.Context, sessions []string, asOf string) error {
	if h.win == nil {
		return nil
	}
	ls, ok := h.store.(windowStore)
	if !ok || asOf == "" {
		h.win.invalidate(sessions...)
		return nil
	}
	for _, sid := range sessions {
		var items []*Item
		var size int64
		floor := "" // every event up to asOf is kept, unless a bound stops the read
		_, err := ls.LatestEvents(ctx, sid, asOf, h.win.perSession+1, func(r *store.EventRow) bool {
			if len(items) >= h.win.perSession || (h.win.cap > 0 && size >= h.win.cap) {
				floor = r.ID // kept: everything after it
				return false
			}
			it := &Item{ID: r.ID, SessionID: r.SessionID, Type: r.Type, Actor: r.Actor, TS: r.TS, Frame: protocol.EventFrame(r.Body)}
			size += cost(it)
			items = append(items, it)
			return true
		})
		if err != nil {
			h.win.invalidate(sessions...)
			return fmt.Errorf("hub: fill the replay window of %s: %w", sid, err)
		}
		slices.Reverse(items)
		h.win.fill(sid, floor, items)
	}
	return nil
}
