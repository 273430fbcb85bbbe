package hub

// RaceEnabled tells the external tests that the race detector is on, so
// their stress loops can shrink to fit the slowdown.
const RaceEnabled = raceEnabled

// GapTypes are the event types the streaming-gap check counts.
var GapTypes = gapTypes

// WindowOf reports a session's replay window: its floor and how many
// events it holds; ok is false when it has none.
func (h *Hub) WindowOf(sid string) (floor string, held int, ok bool) {
	if h.win == nil {
		return "", 0, false
	}
	h.win.mu.Lock()
	defer h.win.mu.Unlock()
	w := h.win.byID[sid]
	if w == nil {
		return "", 0, false
	}
	return w.floor, len(w.held()), true
}
