package hub

// AttachedSessions returns the ids of the sessions that have at least
// one client attached.
func (h *Hub) AttachedSessions() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []string
	for id, st := range h.sessions {
		st.mu.Lock()
		n := len(st.clients)
		st.mu.Unlock()
		if n > 0 {
			out = append(out, id)
		}
	}
	return out
}
