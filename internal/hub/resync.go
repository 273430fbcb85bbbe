package hub

// Resync implements bus.Resyncer: an event of sessionID was not
// committed, so it was never delivered, and the clients following the
// session live (directly, or from a planner above it with workers) may
// have seen streaming events around it. Each of them is closed the way a
// slow client is (its queue dropped, the transport closes it with the
// close reason that makes a client reconnect with its cursor): the
// replay then comes from the store, which never had the lost event, and
// the client resumes at a consistent point instead of waiting for an
// event that will never come. Called under the session's outbox lock; it
// never blocks. The session's replay window is forgotten too (the store
// is the truth: what it holds is read from it again).
func (h *Hub) Resync(sessionID string) {
	h.Skipped([]string{sessionID})
	ids := append([]string{sessionID}, h.ancestors(sessionID)...)
	for i, id := range ids {
		h.mu.RLock()
		st := h.sessions[id]
		h.mu.RUnlock()
		if st == nil {
			continue
		}
		st.mu.Lock()
		clients := st.clients
		st.mu.Unlock()
		for _, c := range clients {
			if i == 0 || c.filter.workers {
				c.resync()
			}
		}
	}
}
