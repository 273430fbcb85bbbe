package hub

import (
	"context"

	"github.com/metis-agent/metis/internal/event"
)

// The hub keeps the delegation trees it has seen (worker → planner and
// planner → workers) so that a planner's clients that asked for worker
// sessions receive their events live. Links are learned from
// session.created as it is published, or from the store when such a
// client subscribes (for workers created before this process). Sweep
// forgets the links of a tree none of whose sessions has state left: a
// later subscribe that wants workers learns them again from the store.

// learnParent records a worker's planner from its session.created.
func (h *Hub) learnParent(ev *event.Event) {
	var p struct {
		Parent *string `json:"parent_session_id"`
	}
	if ev.DecodePayload(&p) != nil || p.Parent == nil || *p.Parent == "" {
		return
	}
	h.setParent(ev.SessionID, *p.Parent)
}

func (h *Hub) setParent(child, parent string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.parents[child]; ok {
		return
	}
	h.parents[child] = parent
	h.children[parent] = append(h.children[parent], child)
}

// ancestors lists the planners above a session, nearest first.
func (h *Hub) ancestors(id string) []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []string
	for p, ok := h.parents[id]; ok && len(out) < 64; p, ok = h.parents[p] {
		out = append(out, p)
	}
	return out
}

// descendants lists the workers below a session known to the hub.
func (h *Hub) descendants(id string) []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.descendantsLocked(id)
}

func (h *Hub) descendantsLocked(id string) []string {
	var out []string
	queue := []string{id}
	for len(queue) > 0 && len(out) < 10000 {
		next := h.children[queue[0]]
		queue = append(queue[1:], next...)
		out = append(out, next...)
	}
	return out
}

// loadDescendants records the worker tree below id from the store, for
// sessions created before this process (their session.created was not
// seen live), and returns every descendant.
func (h *Hub) loadDescendants(ctx context.Context, id string) ([]string, error) {
	queue := []string{id}
	var out []string
	for len(queue) > 0 && len(out) < 10000 {
		kids, err := h.store.Children(ctx, queue[0])
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			h.setParent(k.ID, queue[0])
			out = append(out, k.ID)
			queue = append(queue, k.ID)
		}
		queue = queue[1:]
	}
	return out, nil
}

// pruneTreesLocked forgets the links of every delegation tree none of
// whose sessions has state in the hub (all swept, or never published
// to since a restart), and returns how many links it dropped. It is
// skipped while a subscribe is between learning its tree and attaching
// its client, which would otherwise lose the links it just learned.
// h.mu must be held for writing.
func (h *Hub) pruneTreesLocked() int {
	if h.subscribing.Load() > 0 {
		return 0
	}
	idle := map[string]bool{} // tree root → no session of the tree has state
	n := 0
	for child := range h.parents {
		root := child
		for range 64 {
			p, ok := h.parents[root]
			if !ok {
				break
			}
			root = p
		}
		quiet, seen := idle[root]
		if !seen {
			quiet = h.sessions[root] == nil
			for _, d := range h.descendantsLocked(root) {
				if !quiet {
					break
				}
				quiet = h.sessions[d] == nil
			}
			idle[root] = quiet
		}
		if quiet {
			delete(h.parents, child)
			n++
		}
	}
	for root, quiet := range idle {
		if quiet {
			for _, d := range h.descendantsLocked(root) {
				delete(h.children, d)
			}
			delete(h.children, root)
		}
	}
	return n
}
