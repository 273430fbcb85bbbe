package hub

// ring holds the most recent streaming events of one session, oldest
// first, so a client that drops mid-message gets its deltas back on
// reconnect. It is never persisted. It grows to size items, then each
// push overwrites the oldest; evicted is the id of the newest item pushed
// out, so a cursor older than it has lost deltas.
type ring struct {
	buf     []*Item
	head    int // index of the oldest item once the ring is full
	evicted string
}

func (r *ring) push(it *Item, size int) {
	switch {
	case size <= 0:
		r.evicted = it.ID
	case len(r.buf) < size:
		r.buf = append(r.buf, it)
	default:
		r.evicted = r.buf[r.head].ID
		r.buf[r.head] = it
		r.head = (r.head + 1) % len(r.buf)
	}
}

// after returns the items with since < id <= upTo that match f, in order.
func (r *ring) after(since, upTo string, f *filter) []*Item {
	var out []*Item
	for i := range r.buf {
		it := r.buf[(r.head+i)%len(r.buf)]
		if it.ID > since && it.ID <= upTo && f.match(it) {
			out = append(out, it)
		}
	}
	return out
}
