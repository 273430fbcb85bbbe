package hub

import (
	"slices"
	"testing"
)

// TestPruneTreesForgetsOnlyStatelessTrees: Sweep's pruning drops the
// links of a delegation tree none of whose sessions has state, keeps a
// tree with any session still held (here a worker two levels down), and
// prunes nothing while a subscribe is learning its tree.
func TestPruneTreesForgetsOnlyStatelessTrees(t *testing.T) {
	h := &Hub{sessions: map[string]*sessionState{}, parents: map[string]string{}, children: map[string][]string{}}
	h.setParent("w1", "p") // quiet tree: p → w1 → w2
	h.setParent("w2", "w1")
	h.setParent("v1", "q") // held tree: q → v1 → v2, v2 has state
	h.setParent("v2", "v1")
	h.sessions["v2"] = &sessionState{}

	h.subscribing.Add(1)
	h.mu.Lock()
	n := h.pruneTreesLocked()
	h.mu.Unlock()
	if n != 0 || len(h.parents) != 4 {
		t.Fatalf("pruned %d links during a subscribe; %d left", n, len(h.parents))
	}
	h.subscribing.Add(-1)

	h.mu.Lock()
	n = h.pruneTreesLocked()
	h.mu.Unlock()
	if n != 2 {
		t.Fatalf("pruned %d links, want the quiet tree's 2", n)
	}
	if got := h.descendants("p"); len(got) != 0 {
		t.Fatalf("quiet tree still has descendants %v", got)
	}
	if _, ok := h.children["w1"]; ok {
		t.Fatal("quiet tree's inner planner still listed")
	}
	if got := h.descendants("q"); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Fatalf("held tree's descendants %v", got)
	}
	if got := h.ancestors("v2"); !slices.Equal(got, []string{"v1", "q"}) {
		t.Fatalf("held tree's ancestors %v", got)
	}
}
