package acp

import (
	"context"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestUsageUpdateCarriesTheWindow: each usage_update after a model call
// gives the conversation's size as the server counted it (used) and the
// model's context window (size).
func TestUsageUpdateCarriesTheWindow(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) {
		c.Models = map[string]price.Limits{"builtin:demo": {ContextWindow: 50000}}
	})
	s := serveAgent(t, h.URL)
	s.initialize(t)
	sid := s.newSession(t, h.Workspace)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.prompt(ctx, sid, "What is in here?"); err != nil {
		t.Fatalf("prompt: %v", err)
	}
	n := 0
	for _, u := range s.ed.all() {
		if uu := u.UsageUpdate; uu != nil {
			n++
			if uu.Size != 50000 || uu.Used <= 0 || uu.Used >= uu.Size {
				t.Errorf("usage update used %d of %d", uu.Used, uu.Size)
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d usage updates", n)
	}
}
