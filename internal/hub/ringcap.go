package hub

import (
	"cmp"
	"slices"
	"time"
)

// The global cap on streaming rings (Config.RingBytes). Each session's
// ring is bounded by a count (RingSize); with many sessions that is
// still sessions × RingSize events, so the hub also bounds the bytes all
// rings hold together. When a publish takes the total over the cap, the
// publisher trims the rings down to trimTarget of the cap (the slack
// spares a scan of every session on each publish once the cap is
// reached):
//
//  1. sessions with no turn in flight first, least recently active
//     first, each ring from its oldest event;
//  2. then, if that is not enough, sessions with a turn in flight, in
//     the same order.
//
// Every event let go this way is counted (RingEvictions and the
// metis_stream_ring_evictions_total metric) and recorded in its ring as
// evicted, so a cursor before it gets streaming_gap, as with the
// per-session bound: never a silent loss.

// trimTarget is the fraction of the cap a trim brings the rings down to.
const (
	trimNum = 15
	trimDen = 16
)

// RingBytes returns what every session's ring holds, in the cap's units.
func (h *Hub) RingBytes() int64 { return h.ringBytes.Load() }

// RingEvictions returns how many streaming events the global cap has
// taken out of rings.
func (h *Hub) RingEvictions() int64 { return h.ringEvictions.Load() }

// ringGrew accounts for a ring that grew by delta bytes (negative when
// its own bound let more go than it took), trimming if over the cap.
func (h *Hub) ringGrew(delta int64) {
	total := h.ringBytes.Add(delta)
	if h.cfg.RingBytes > 0 && total > h.cfg.RingBytes {
		h.trim()
	} else if h.m != nil {
		h.m.RingBytes.Set(float64(total))
	}
}

// victim is a session whose ring a trim may shorten.
type victim struct {
	st         *sessionState
	busy       bool // a turn is in flight
	lastActive time.Time
}

// trim lets ring items go, in the order above, until every ring together
// is within trimTarget of the cap. Only one trim runs at a time; a
// publisher that finds one running leaves the work to it, and the
// running one checks again once it has let go of its lock, so nothing
// added meanwhile stays over the cap.
func (h *Hub) trim() {
	for h.ringBytes.Load() > h.cfg.RingBytes {
		if !h.trimMu.TryLock() {
			return
		}
		n := h.trimLocked()
		h.trimMu.Unlock()
		if n == 0 {
			return // nothing left to let go
		}
	}
}

// trimLocked does one trim with trimMu held and returns how many items
// it let go.
func (h *Hub) trimLocked() int64 {
	target := h.cfg.RingBytes / trimDen * trimNum
	var n int64
	for _, v := range h.victims() {
		if h.ringBytes.Load() <= target {
			break
		}
		v.st.mu.Lock()
		for !v.st.swept && v.st.ring.len() > 0 && h.ringBytes.Load() > target {
			h.ringBytes.Add(-v.st.ring.popOldest())
			n++
		}
		if v.st.ring.len() == 0 {
			v.st.ring.items = nil // let an emptied ring's buffer go too
		}
		v.st.mu.Unlock()
	}
	h.ringEvictions.Add(n)
	if h.m != nil {
		h.m.RingEvictions.Add(float64(n))
		h.m.RingBytes.Set(float64(h.ringBytes.Load()))
	}
	return n
}

// victims lists the sessions whose rings hold something, idle ones
// first, then least recently active first.
func (h *Hub) victims() []victim {
	h.mu.RLock()
	out := make([]victim, 0, len(h.sessions))
	for _, st := range h.sessions {
		st.mu.Lock()
		if st.ring.len() > 0 {
			out = append(out, victim{st: st, busy: st.currentTurn != "", lastActive: st.lastActive})
		}
		st.mu.Unlock()
	}
	h.mu.RUnlock()
	slices.SortFunc(out, func(a, b victim) int {
		if a.busy != b.busy {
			if a.busy {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.lastActive.UnixNano(), b.lastActive.UnixNano())
	})
	return out
}
