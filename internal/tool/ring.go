package tool

import "sync"

// ring keeps the last len(buf) bytes written to it, for one reader that
// reads what is new since its last read: a background command's output.
// What was written and fell out before the reader got to it is counted.
type ring struct {
	mu    sync.Mutex
	buf   []byte
	total int64 // bytes ever written
	read  int64 // the reader's position: bytes before it were read or dropped
	lost  int64 // bytes dropped unread, in all
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

// Write implements io.Writer; it never fails.
func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	size := len(r.buf)
	if len(p) > size { // only the last size bytes can be kept
		r.total += int64(len(p) - size)
		p = p[len(p)-size:]
	}
	for len(p) > 0 {
		at := int(r.total % int64(size))
		k := copy(r.buf[at:], p)
		p = p[k:]
		r.total += int64(k)
	}
	return n, nil
}

// next returns what was written since the last call, and how many bytes
// written meanwhile were dropped (the oldest) before they could be read.
func (r *ring) next() (out []byte, dropped int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := int64(len(r.buf))
	from := max(r.read, r.total-size)
	dropped = from - r.read
	r.lost += dropped
	out = make([]byte, 0, r.total-from)
	for o := from; o < r.total; {
		at := o % size
		end := min(size, at+(r.total-o))
		out = append(out, r.buf[at:end]...)
		o += end - at
	}
	r.read = r.total
	return out, dropped
}

// counts returns how many bytes were written in all and how many of
// them were dropped unread (so far, and as of now if never read again).
func (r *ring) counts() (total, dropped int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := int64(len(r.buf))
	return r.total, r.lost + max(0, r.total-size-r.read)
}
