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
// events, kept in memory as copies of the items Publish framed for the
// live clients (the same frame bytes, encoded once), shared by every
// client and every transport (a transport's encoding of an item, SSE's
// record head, is built by its first replay and kept with it). A
// replay whose cursor is inside a session's window is served from it
// without reading the trace store; one whose cursor is older reads the
// store up to the window's floor and the window from there (replay.go),
// so the two join without a gap or a duplicate.
//
// Layout: a replay's cost is writing its frames, so a window keeps them
// where reading them in order is cheapest. Its items are values in one
// slice (not pointers to items scattered across the heap, each a cache
// miss to reach), and their frames are copied back to back into large
// byte chunks (the arena) instead of one allocation each: a replay of
// thousands of events walks two contiguous runs of memory, and the
// garbage collector has a few large objects to mark per window instead
// of three small ones per event.
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

// Arena chunks: a window's first chunk holds arenaMin bytes, each next
// one twice the last, up to arenaMax, so that a short window wastes
// little and a long one wastes at most its last chunk's free end. A
// frame of arenaMax/2 or more gets an allocation of its own (it would
// waste most of a chunk).
const (
	arenaMin = 4 << 10
	arenaMax = 16 << 10
)

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
	// items[start:] are held, oldest first, every id after floor, each
	// with its frame in an arena chunk. An item is never written once
	// appended (but for its atomic encoding): a replay keeps a slice of
	// the held part and pointers into it without the lock, so items go
	// from the front by moving start, new ones are written past the end
	// of every slice handed out, and the held part is copied to a new
	// slice (never in place) when the slice is full or mostly let go.
	items []Item
	start int
	// arena is the chunk frames are copied to: arena[len:] is free.
	// Chunks are referenced by the items' frames alone, and freed by the
	// collector once none is held (or read by a replay).
	arena      []byte
	bytes      int64
	prev, next *window
}

func newWindowSet(perSession int, capBytes int64, m *metrics.Stream) *windowSet {
	ws := &windowSet{perSession: perSession, cap: capBytes, m: m, byID: map[string]*window{}}
	ws.lru.prev, ws.lru.next = &ws.lru, &ws.lru
	return ws
}

func (w *window) held() []Item { return w.items[w.start:] }

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
	it := &w.items[w.start]
	w.start++
	w.floor = it.ID
	c := cost(it)
	w.bytes -= c
	switch {
	case w.start == len(w.items):
		w.items, w.start = nil, 0
	case w.start >= 64 && w.start*4 >= len(w.items):
		w.moveHeld(len(w.items) - w.start)
	}
	return c
}

// push appends a copy of it, its frame copied to the arena, and returns
// its cost. Nothing is written to an item a replay may read: the new
// item goes past the end of every slice handed out, and a full slice
// is copied to a new one.
func (w *window) push(it *Item) int64 {
	if len(w.items) == cap(w.items) {
		held := len(w.items) - w.start
		w.moveHeld(max(held+held/2, 8))
	}
	w.items = w.items[:len(w.items)+1]
	dst := &w.items[len(w.items)-1]
	dst.ID, dst.SessionID, dst.Type, dst.Actor, dst.TS = it.ID, it.SessionID, it.Type, it.Actor, it.TS
	dst.Frame = w.keep(it.Frame)
	return cost(dst)
}

// moveHeld copies the held items to a new slice of capacity n: the old
// one stays as it is for the replays that read it.
func (w *window) moveHeld(n int) {
	held := w.items[w.start:]
	items := make([]Item, len(held), max(n, len(held)))
	for i := range held {
		src, dst := &held[i], &items[i]
		dst.ID, dst.SessionID, dst.Type, dst.Actor, dst.TS, dst.Frame = src.ID, src.SessionID, src.Type, src.Actor, src.TS, src.Frame
		dst.enc.Store(src.enc.Load())
	}
	w.items, w.start = items, 0
}

// keep copies frame to the arena and returns the copy, its capacity
// ending with it.
func (w *window) keep(frame []byte) []byte {
	n := len(frame)
	if n >= arenaMax/2 {
		return slices.Clip(slices.Clone(frame))
	}
	if n > cap(w.arena)-len(w.arena) {
		w.arena = make([]byte, 0, min(max(2*cap(w.arena), arenaMin), arenaMax))
	}
	off := len(w.arena)
	w.arena = append(w.arena, frame...)
	return w.arena[off:len(w.arena):len(w.arena)]
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
	c := w.push(it)
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
// must not modify them (the slice's capacity ends with it), but may
// keep pointers to them.
func (ws *windowSet) view(sid, since, seam string) (floor string, items []Item, ok bool) {
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
	held := w.held()
	for i := range held {
		if held[i].TS.Before(before) {
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
	w.items = make([]Item, 0, len(items))
	for _, it := range items {
		c := w.push(it)
		w.bytes += c
		ws.bytes += c
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
