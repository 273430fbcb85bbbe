package hub

import "github.com/metis-agent/metis/protocol"

// Gap implements bus.Gapper: in cluster mode, events of tree that its
// owner published after the last one relayed here, up to through,
// never reached the log. Every session of the tree this hub holds
// counts them as let go from its ring (a cursor before through replays
// with streaming_gap, as after a ring overflow), and every client
// following one of them live is closed with the close reason resync:
// it reconnects with its cursor, which is before the gap, and is told.
// Called under the tree's outbox lock; it never blocks.
func (h *Hub) Gap(tree, through string) {
	for _, id := range append([]string{tree}, h.descendants(tree)...) {
		h.mu.RLock()
		st := h.sessions[id]
		h.mu.RUnlock()
		if st == nil {
			continue
		}
		st.mu.Lock()
		st.ring.hole = max(st.ring.hole, through)
		clients := st.clients
		st.mu.Unlock()
		for _, c := range clients {
			c.resync(protocol.ReasonResync)
		}
	}
}
