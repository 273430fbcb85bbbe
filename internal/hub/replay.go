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

// replayPlan is a replay decided at subscribe time: the store query for
// the catalog events of (since, seam] and the ring's streaming events.
type replayPlan struct {
	h       *Hub
	q       store.EventQuery
	scan    bool // there are catalog events to read: catalog, or workers
	catalog bool // the filter wants catalog events (of q)
	ring    []*Item
	// workers, when not nil, reads the approval events of the session's
	// workers for a client that did not ask for the workers' events
	// (approvals.go).
	workers *store.EventQuery
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

// planReplay decides the replay of (since, seam] for a client: its
// exact size (catalog events counted in the store with the client's
// types and actors, plus the ring's matching streaming events) and the
// query that StreamReplay will run. Past the limit it refuses with
// replay_too_large.
//
// A filter taking every catalog type from every actor (preset:full,
// and every filter listing the whole catalog) queries without a type
// condition: the store holds catalog events only, and the count then
// reads the (session, id) index alone instead of every event's row.
func (h *Hub) planReplay(ctx context.Context, c *Client, sessions, workers []string, since, seam string, ringItems []*Item) (*replayPlan, int, *protocol.SubscribeError) {
	p := &replayPlan{h: h, ring: ringItems,
		q: store.EventQuery{SessionIDs: sessions, AfterID: since, UpToID: seam, Types: c.filter.catalogTypes(), Actors: c.filter.actorList()}}
	n := 0
	if len(workers) > 0 {
		p.workers = &store.EventQuery{SessionIDs: workers, AfterID: since, UpToID: seam, Types: c.filter.plannerTypes(),
			Actors: c.filter.actorList()}
		m, err := h.store.CountEvents(ctx, *p.workers)
		if err != nil {
			return nil, 0, h.internal(err)
		}
		n += m
	}
	if p.catalog = len(p.q.Types) > 0; p.catalog {
		if len(p.q.Types) == catalogCount && p.q.Actors == nil {
			p.q.Types = nil
		}
		m, err := h.store.CountEvents(ctx, p.q)
		if err != nil {
			return nil, 0, h.internal(err)
		}
		n += m
	}
	p.scan = p.catalog || p.workers != nil
	n += len(ringItems)
	if n > h.cfg.ReplayLimit {
		return nil, 0, h.refuse(protocol.CodeReplayTooLarge,
			fmt.Sprintf("Gap exceeds the replay limit of %d events. Reconnect with snapshot: true.", h.cfg.ReplayLimit), "")
	}
	return p, n, nil
}

// StreamReplay calls fn with each replayed event in id order: the
// catalog events, read from the store on a goroutine of its own while
// earlier ones are being written, merged with the ring's streaming
// events. It stops at fn's first error and returns it; it returns only
// once the reading goroutine has ended. fn may keep the items.
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
func (a *Attachment) StreamReplayBatches(ctx context.Context, fn func([]*Item) error) error {
	p := a.plan
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan []*Item, replayAhead)
	scanErr := make(chan error, 1)
	go func() {
		defer close(ch)
		if !p.scan {
			scanErr <- nil
			return
		}
		scanErr <- p.read(ctx, ch)
	}()
	var err error
	send := func(items []*Item) {
		if err == nil && len(items) > 0 {
			if err = fn(items); err != nil {
				cancel() // stop reading; the loop drains what is left
			}
		}
	}
	ring, i := p.ring, 0
	out := make([]*Item, 0, replayBatch)
	for batch := range ch {
		out = out[:0]
		for _, it := range batch {
			for ; i < len(ring) && ring[i].ID < it.ID; i++ {
				out = append(out, ring[i])
			}
			out = append(out, it)
		}
		send(out)
	}
	for i < len(ring) {
		n := min(len(ring)-i, replayBatch)
		send(ring[i : i+n : i+n])
		i += n
	}
	if serr := <-scanErr; err == nil && serr != nil {
		err = fmt.Errorf("hub: replay: %w", serr)
	}
	return err
}

// read reads the plan's catalog events in id order and sends them on
// ch in batches of replayBatch, each framed around its stored bytes,
// until the last, or until ctx ends. Each session of the plan is read
// in its own ordered batches (from the store's (session, id) index, so
// no batch sorts anything), and the sessions are merged by id.
func (p *replayPlan) read(ctx context.Context, ch chan<- []*Item) error {
	var cs []*replayCursor
	add := func(base store.EventQuery) error {
		for _, sid := range base.SessionIDs {
			q := base
			q.SessionIDs = []string{sid}
			c := &replayCursor{q: q}
			if err := c.fill(ctx, p.h.store); err != nil {
				return err
			}
			cs = append(cs, c)
		}
		return nil
	}
	if p.catalog {
		if err := add(p.q); err != nil {
			return err
		}
	}
	if p.workers != nil {
		if err := add(*p.workers); err != nil {
			return err
		}
	}
	out := make([]*Item, 0, replayBatch)
	for {
		var next *replayCursor
		for _, c := range cs {
			if c.pos < len(c.buf) && (next == nil || c.buf[c.pos].ID < next.buf[next.pos].ID) {
				next = c
			}
		}
		if next != nil {
			out = append(out, &next.buf[next.pos])
			next.pos++
			if next.pos == len(next.buf) && !next.done {
				if err := next.fill(ctx, p.h.store); err != nil {
					return err
				}
			}
		}
		if len(out) == replayBatch || (next == nil && len(out) > 0) {
			select {
			case ch <- out:
			case <-ctx.Done():
				return ctx.Err()
			}
			out = make([]*Item, 0, replayBatch)
		}
		if next == nil {
			return nil
		}
	}
}

// replayCursor reads one session's part of a replay, a batch at a time.
type replayCursor struct {
	q    store.EventQuery // AfterID moves on with each batch
	buf  []Item           // the batch read last: new for each batch, since the writer keeps its items
	pos  int
	done bool // the last batch has been read
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
