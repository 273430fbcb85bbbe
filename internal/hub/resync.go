package hub

import "github.com/metis-agent/metis/protocol"

// Resync implements bus.Resyncer: an event of sessionID was not
// committed, so it was never delivered, and the clients following the
// session live (directly, or from a planner above it with workers) may
// have seen streaming events around it. Each of them is closed the way a
// slow client is (its queue dropped, the close reason storage_failure
// with resync set, which makes a client reconnect with its cursor): the
// replay then comes from the store, which never had the lost event, and
// the client resumes at a consistent point instead of waiting for an
// event that will never come. Called under the session's outbox lock;
// it never blocks. The session's replay window is forgotten too (the
// store is the truth: what it held is read from it again).
func (h *Hub) Resync(sessionID string) { h.resync(sessionID, protocol.ReasonStorageFailure) }

// ResyncMoved implements bus.MoveResyncer: in cluster mode this node
// lost the tree of sessionID to another node, which writes it from now
// on. Its clients are closed as Resync closes them, with the close
// reason owner_changed: they reconnect and follow the tree from the log.
func (h *Hub) ResyncMoved(sessionID string) { h.resync(sessionID, protocol.ReasonOwnerChanged) }

func (h *Hub) resync(sessionID string, reason protocol.CloseReason) {
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
				c.resync(reason)
			}
		}
	}
}
