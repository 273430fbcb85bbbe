package hub

import (
	"slices"
	"strings"

	"github.com/metis-agent/metis/internal/event"
)

// ring holds the most recent streaming events of one session, oldest
// first, so a client that drops mid-message gets its deltas back on
// reconnect. It is never persisted. It holds at most size items (the
// per-session bound, --stream-ring); the hub may also take its oldest
// items away to keep every ring together under the global byte cap
// (--stream-ring-bytes).
//
// Whatever leaves the ring is remembered per (type, actor) as the id of
// the newest such event let go, so a replay can tell whether events the
// client's filter asks for are missing after its cursor.
type ring struct {
	items   []*Item // items[start:] are held, oldest first
	start   int
	bytes   int64             // the cost of the held items
	evicted map[gapKey]string // newest id let go, per type and actor
	// hole is the newest id of streaming events of unknown type and
	// actor that never reached this process (Hub.Gap).
	hole string
}

// gapKey is the kind of a streaming event, as filters see it.
type gapKey struct {
	typ   event.Type
	actor string
}

// itemOverhead approximates what an Item costs besides its frame (the
// struct, its strings and the ring's pointer), so that the cap also
// bounds rings of many small events.
const itemOverhead = 160

// cost is what one held item counts against the byte cap.
func cost(it *Item) int64 { return int64(len(it.Frame)) + itemOverhead }

func (r *ring) len() int { return len(r.items) - r.start }

// push keeps it, then lets the oldest items go while more than size are
// held (size > 0). It returns the change in r.bytes.
func (r *ring) push(it *Item, size int) int64 {
	r.items = append(r.items, it)
	delta := cost(it)
	r.bytes += delta
	for r.len() > size {
		delta -= r.popOldest()
	}
	return delta
}

// popOldest lets the oldest held item go and returns its cost; 0 when
// the ring is empty.
func (r *ring) popOldest() int64 {
	if r.len() == 0 {
		return 0
	}
	it := r.items[r.start]
	r.items[r.start] = nil
	r.start++
	switch {
	case r.start == len(r.items):
		r.items, r.start = r.items[:0], 0
	case r.start >= 64 && r.start*2 >= len(r.items):
		// Slide the held items down so the slice does not creep.
		n := copy(r.items, r.items[r.start:])
		clear(r.items[n:])
		r.items, r.start = r.items[:n], 0
	}
	r.forget(it.Type, it.Actor, it.ID)
	c := cost(it)
	r.bytes -= c
	return c
}

// forget records that the event id of this type and actor is no longer
// (or never was) held.
func (r *ring) forget(typ event.Type, actor, id string) {
	if r.evicted == nil {
		r.evicted = map[gapKey]string{}
	}
	k := gapKey{typ, actor}
	r.evicted[k] = max(r.evicted[k], id)
}

// lost returns the newest id let go among the events f matches ("" if
// none).
func (r *ring) lost(f *filter) string {
	newest := ""
	if r.hole != "" && f.wantsStreaming() {
		newest = r.hole
	}
	for k, id := range r.evicted {
		if f.types[k.typ] && (f.actors == nil || f.actors[k.actor]) {
			newest = max(newest, id)
		}
	}
	return newest
}

// after returns the items with since < id <= upTo that match f, in order.
func (r *ring) after(since, upTo string, f *filter) []*Item {
	var out []*Item
	for _, it := range r.items[r.start:] {
		if it.ID > since && it.ID <= upTo && f.match(it) {
			out = append(out, it)
		}
	}
	return out
}

// between returns every held item with lo < id <= hi, in order.
func (r *ring) between(lo, hi string) []*Item {
	var out []*Item
	for _, it := range r.items[r.start:] {
		if it.ID > lo && it.ID <= hi {
			out = append(out, it)
		}
	}
	return out
}

// knows reports whether id is a streaming event this ring holds, or is
// at or before one it let go or never got (a hole): an id it does not
// know, at or after the session's heldFrom, is no event of this process.
func (r *ring) knows(id string) bool {
	if id <= r.hole {
		return true
	}
	for _, ev := range r.evicted {
		if id <= ev {
			return true
		}
	}
	_, found := slices.BinarySearchFunc(r.items[r.start:], id, func(it *Item, id string) int { return strings.Compare(it.ID, id) })
	return found
}

// lostAfter reports whether an event with an id after lo was let go
// (or never held).
func (r *ring) lostAfter(lo string) bool {
	for _, id := range r.evicted {
		if id > lo {
			return true
		}
	}
	return false
}
