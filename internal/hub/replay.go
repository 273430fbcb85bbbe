package hub

import (
	"context"
	"fmt"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// A replay costs what writing its bytes costs: its catalog events are
// read from the trace store in large ordered batches, on a goroutine of
// their own while earlier batches are written, and each is framed
// around its stored bytes without decoding them.

// replayBatch is how many catalog events one store read returns: one
// short query per batch (the read connection is free between batches,
// however slowly the client reads), and one hand-off between the
// reading and writing goroutines per batch instead of per event.
const replayBatch = 512

// replayAhead bounds the batches read ahead of the writer.
const replayAhead = 2

// replayPlan is a replay decided at subscribe time: for each session
// of the tree, the catalog events of (since, seam] to read from the
// store and those the session's replay window holds, and the ring's
// streaming events.
type replayPlan struct {
	h     *Hub
	parts []replayPart // one per session of the tree, and per worker whose approvals the client wants
	ring  []*Item
}

// replayPart is one session's catalog events of a replay: the store's
// q (its (since, upTo], with the client's types and actors) if
// fromStore, then those of mem (the window's) that match takes (nil:
// every one), whose ids are all after q's upTo.
type replayPart struct {
	q         store.EventQuery
	fromStore bool
	mem       []Item
	match     func(*Item) bool
}

// catalogCount is the number of catalog types.
var catalogCount = func() int {
	n := 0
	for _, i := range event.All() {
		if i.Family == event.Catalog {
			n++
		}
	}
	return n
}()

// planReplay decides the replay of (since, seam] for a client: where
// each session's catalog events are read (replayPart), its exact size
// (the store's part counted in the store with the client's types and
// actors, the windows' and the ring's matching events counted in
// memory), and the queries StreamReplay will run. Past the limit it
// refuses with replay_too_large.
//
// A session whose replay window covers since (its floor is at or
// before it) is read from the window alone; one whose window starts
// later is read from the store up to the window's floor, then from the
// window; one with no window, from the store.
//
// A filter taking every catalog type from every actor (preset:full,
// and every filter listing the whole catalog) queries without a type
// condition: the store holds catalog events only, and the count then
// reads the (session, id) index alone instead of every event's row.
func (h *Hub) planReplay(ctx context.Context, c *Client, sessions, workers []string, since, seam string, ringItems []*Item) (*replayPlan, int, *protocol.SubscribeError) {
	p := &replayPlan{h: h, ring: ringItems}
	f := &c.filter
	stored := 0
	// Without include_worker_sessions, the workers' approval events the
	// client asks for (approvals.go).
	if wq := (store.EventQuery{SessionIDs: workers, AfterID: since, UpToID: seam, Types: f.plannerTypes(),
		Actors: f.actorList()}); len(workers) > 0 && len(wq.Types) > 0 {
		parts, m, err := h.replayParts(ctx, wq, func(it *Item) bool { return reachesPlanners(it.Type) && f.match(it) })
		if err != nil {
			return nil, 0, h.internal(err)
		}
		p.parts, stored = append(p.parts, parts...), stored+m
	}
	if q := (store.EventQuery{SessionIDs: sessions, AfterID: since, UpToID: seam, Types: f.catalogTypes(),
		Actors: f.actorList()}); len(q.Types) > 0 {
		match := f.match
		if len(q.Types) == catalogCount && q.Actors == nil {
			q.Types, match = nil, nil
		}
		parts, m, err := h.replayParts(ctx, q, match)
		if err != nil {
			return nil, 0, h.internal(err)
		}
		p.parts, stored = append(p.parts, parts...), stored+m
	}
	mem := 0
	for _, part := range p.parts {
		mem += part.memCount()
	}
	if len(p.parts) > 0 {
		h.countReplay(stored, mem)
	}
	n := stored + mem + len(ringItems)
	if n > h.cfg.ReplayLimit {
		return nil, 0, h.refuse(protocol.CodeReplayTooLarge,
			fmt.Sprintf("Gap exceeds the replay limit of %d events. Reconnect with snapshot: true.", h.cfg.ReplayLimit), "")
	}
	return p, n, nil
}

// replayParts splits q (one query of several sessions, up to the seam)
// into one part per session, by what the sessions' windows hold, and
// counts the store's parts: the sessions read from the store up to the
// seam together, in one query as before windows, the others each up to
// its window's floor. match is q's types and actors in memory, nil for
// every event.
func (h *Hub) replayParts(ctx context.Context, q store.EventQuery, match func(*Item) bool) ([]replayPart, int, error) {
	parts := make([]replayPart, len(q.SessionIDs))
	var whole []string // read from the store up to the seam
	stored := 0
	for i, sid := range q.SessionIDs {
		part := replayPart{q: q, fromStore: true}
		part.q.SessionIDs = []string{sid}
		if h.win != nil {
			if floor, items, ok := h.win.view(sid, q.AfterID, q.UpToID); ok {
				part.mem, part.match = items, match
				part.fromStore = q.AfterID < floor
				part.q.UpToID = min(floor, q.UpToID)
			}
		}
		parts[i] = part
		switch {
		case !part.fromStore:
		case part.q.UpToID == q.UpToID:
			whole = append(whole, sid)
		default:
			n, err := h.store.CountEvents(ctx, part.q)
			if err != nil {
				return nil, 0, err
			}
			stored += n
		}
	}
	if len(whole) > 0 {
		wq := q
		wq.SessionIDs = whole
		n, err := h.store.CountEvents(ctx, wq)
		if err != nil {
			return nil, 0, err
		}
		stored += n
	}
	return parts, stored, nil
}

// memCount returns how many of the window's items the part replays.
func (p *replayPart) memCount() int {
	if p.match == nil {
		return len(p.mem)
	}
	n := 0
	for i := range p.mem {
		if p.match(&p.mem[i]) {
			n++
		}
	}
	return n
}

// countReplay counts a replay of catalog events by where they are read.
func (h *Hub) countReplay(stored, mem int) {
	if h.m == nil {
		return
	}
	source := "mixed"
	switch {
	case stored == 0:
		source = "memory"
	case mem == 0:
		source = "store"
	}
	h.m.Replays.WithLabelValues(source).Inc()
	h.m.ReplayCatalog.WithLabelValues("memory").Add(float64(mem))
	h.m.ReplayCatalog.WithLabelValues("store").Add(float64(stored))
}

// needsStore reports whether a part of the plan is read from the store.
func (p *replayPlan) needsStore() bool {
	for _, part := range p.parts {
		if part.fromStore {
			return true
		}
	}
	return false
}

// StreamReplay calls fn with each replayed event in id order: the
// catalog events, read from the replay windows and from the store (on a
// goroutine of its own while earlier ones are being written), merged
// with the ring's streaming events. It stops at fn's first error and
// returns it; it returns only once the reading goroutine has ended. fn
// may keep the items.
func (a *Attachment) StreamReplay(ctx context.Context, fn func(*Item) error) error {
	return a.StreamReplayBatches(ctx, func(items []*Item) error {
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		return nil
	})
}

// StreamReplayBatches is StreamReplay handing over the events a batch
// at a time (at most a store batch plus the ring's events between its
// ids), so that a writer can write each batch under one deadline. fn
// may keep the items but not the slice, which is reused.
//
// A replay read from memory alone (every session's part in its window)
// runs on the caller's goroutine: there is nothing to read ahead.
func (a *Attachment) StreamReplayBatches(ctx context.Context, fn func([]*Item) error) error {
	p := a.plan
	if p == nil {
		return nil
	}
	m := &ringMerge{ring: p.ring, out: make([]*Item, 0, replayBatch), fn: fn}
	if !p.needsStore() {
		err := p.read(ctx, m.batch, false)
		if err == nil {
			err = m.rest()
		}
		if err != nil && !m.failed {
			err = fmt.Errorf("hub: replay: %w", err)
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan []*Item, replayAhead)
	scanErr := make(chan error, 1)
	go func() {
		defer close(ch)
		scanErr <- p.read(ctx, func(batch []*Item) error {
			select {
			case ch <- batch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, true)
	}()
	var err error
	for batch := range ch {
		if err == nil {
			if err = m.batch(batch); err != nil {
				cancel() // stop reading; the loop drains what is left
			}
		}
	}
	if err == nil {
		err = m.rest()
	}
	if serr := <-scanErr; err == nil && serr != nil {
		err = fmt.Errorf("hub: replay: %w", serr)
	}
	return err
}

// ringMerge merges the ring's streaming events into the catalog events'
// batches, by id, and hands each batch to fn.
type ringMerge struct {
	ring   []*Item
	i      int
	out    []*Item
	fn     func([]*Item) error
	failed bool // fn returned an error
}

// batch hands fn the catalog events of batch with the ring's events
// before each.
func (m *ringMerge) batch(batch []*Item) error {
	m.out = m.out[:0]
	for _, it := range batch {
		for ; m.i < len(m.ring) && m.ring[m.i].ID < it.ID; m.i++ {
			m.out = append(m.out, m.ring[m.i])
		}
		m.out = append(m.out, it)
	}
	return m.send(m.out)
}

// rest hands fn the ring's events after the last catalog event.
func (m *ringMerge) rest() error {
	for m.i < len(m.ring) {
		n := min(len(m.ring)-m.i, replayBatch)
		if err := m.send(m.ring[m.i : m.i+n : m.i+n]); err != nil {
			return err
		}
		m.i += n
	}
	return nil
}

func (m *ringMerge) send(items []*Item) error {
	if len(items) == 0 {
		return nil
	}
	if err := m.fn(items); err != nil {
		m.failed = true
		return err
	}
	return nil
}

// read reads the plan's catalog events in id order and hands them to
// emit in batches of replayBatch, until the last, or until emit fails
// or ctx ends. Each session's part is read in its own ordered batches
// (from the store's (session, id) index, so no batch sorts anything),
// then from its window, and the sessions are merged by id. emit may
// keep the batch if keeps (each batch is then a new slice); otherwise
// the slice is reused.
func (p *replayPlan) read(ctx context.Context, emit func([]*Item) error, keeps bool) error {
	cs := make([]*replayCursor, len(p.parts))
	for i, part := range p.parts {
		cs[i] = &replayCursor{q: part.q, done: !part.fromStore, mem: part.mem, match: part.match}
		cs[i].skip()
		if part.fromStore {
			if err := cs[i].fill(ctx, p.h.store); err != nil {
				return err
			}
		}
	}
	out := make([]*Item, 0, replayBatch)
	for {
		var next *replayCursor
		var head *Item
		for _, c := range cs {
			if h := c.head(); h != nil && (head == nil || h.ID < head.ID) {
				next, head = c, h
			}
		}
		if next != nil {
			out = append(out, head)
			if err := next.advance(ctx, p.h.store); err != nil {
				return err
			}
		}
		if len(out) == replayBatch || (next == nil && len(out) > 0) {
			if err := emit(out); err != nil {
				return err
			}
			if keeps {
				out = make([]*Item, 0, replayBatch)
			} else {
				out = out[:0]
			}
		}
		if next == nil {
			return nil
		}
		if len(out) == 0 && ctx.Err() != nil {
			return ctx.Err() // between batches: the client left
		}
	}
}

// replayCursor reads one session's part of a replay: the store's part a
// batch at a time, then the window's.
type replayCursor struct {
	q     store.EventQuery // AfterID moves on with each batch
	buf   []Item           // the batch read last: new for each batch, since the writer keeps its items
	pos   int
	done  bool             // the store's last batch has been read (or there is none)
	mem   []Item           // the window's part, after the store's: mem[0] is next, once skip ran
	match func(*Item) bool // which of mem are replayed (nil: every one)
}

// head returns the cursor's next event, nil at its end.
func (c *replayCursor) head() *Item {
	if c.pos < len(c.buf) {
		return &c.buf[c.pos]
	}
	if len(c.mem) > 0 {
		return &c.mem[0]
	}
	return nil
}

// skip moves past the window's items match does not take.
func (c *replayCursor) skip() {
	if c.match == nil {
		return
	}
	for len(c.mem) > 0 && !c.match(&c.mem[0]) {
		c.mem = c.mem[1:]
	}
}

// advance moves past head, reading the store's next batch when the
// last one is used up.
func (c *replayCursor) advance(ctx context.Context, st Store) error {
	if c.pos < len(c.buf) {
		c.pos++
		if c.pos == len(c.buf) && !c.done {
			return c.fill(ctx, st)
		}
		return nil
	}
	c.mem = c.mem[1:]
	c.skip()
	return nil
}

func (c *replayCursor) fill(ctx context.Context, st Store) error {
	c.buf, c.pos = make([]Item, 0, replayBatch), 0
	n, err := st.ScanEventBatch(ctx, c.q, replayBatch, func(r *store.EventRow) {
		c.buf = append(c.buf, Item{ID: r.ID, SessionID: r.SessionID, Type: r.Type, Actor: r.Actor, Frame: protocol.EventFrame(r.Body)})
	})
	if err != nil {
		return err
	}
	c.done = n < replayBatch
	if n > 0 {
		c.q.AfterID = c.buf[n-1].ID
	}
	return nil
}

// Collect reads the whole replay into Replay.
func (a *Attachment) Collect(ctx context.Context) error {
	a.Replay = a.Replay[:0]
	return a.StreamReplay(ctx, func(it *Item) error {
		a.Replay = append(a.Replay, it)
		return nil
	})
}
