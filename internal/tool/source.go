package tool

import (
	"context"
	"sync"

	"github.com/metis-agent/metis/internal/model"
)

// Source offers tools that come and go while the server runs, per
// session: the tools of MCP servers (internal/mcp).
type Source interface {
	// Tools returns the tools the session may call now. It may block
	// while the servers behind them start, until ctx is done.
	Tools(ctx context.Context, sessionID string) []Tool
}

// ForSession returns the registry of one turn of a session: r's tools
// and those src offers the session. Each Specs call (a model call's tool
// list) asks src again, and Get finds the tools of the last Specs call:
// the model can call what it was offered, by the names it was offered.
// A source's tool never shadows one of r's, and r's offer policy
// (SetOffer) applies to every tool. ctx bounds src's work (the turn's
// context); the registry lives as long as the turn.
func (r *Registry) ForSession(ctx context.Context, sessionID string, src Source) *Registry {
	if src == nil {
		return r
	}
	r.mu.RLock()
	offer := r.offer
	r.mu.RUnlock()
	return &Registry{tools: map[string]Tool{}, offer: offer, more: &sourced{ctx: ctx, session: sessionID, src: src, base: r}}
}

// sourced is a ForSession registry's view of its base and its source.
type sourced struct {
	ctx     context.Context
	session string
	src     Source
	base    *Registry

	mu      sync.RWMutex
	current map[string]Tool // the source's tools as of the last specs call
}

// specs returns the base's specs and the source's, asking the source
// anew.
func (s *sourced) specs() []model.ToolSpec {
	out := s.base.Specs()
	have := make(map[string]bool, len(out))
	for _, sp := range out {
		have[sp.Name] = true
	}
	current := map[string]Tool{}
	for _, t := range s.src.Tools(s.ctx, s.session) {
		sp := t.Spec()
		if have[sp.Name] {
			continue
		}
		have[sp.Name] = true
		current[sp.Name] = t
		out = append(out, sp)
	}
	s.mu.Lock()
	s.current = current
	s.mu.Unlock()
	return out
}

func (s *sourced) get(name string) (Tool, bool) {
	if t, ok := s.base.Get(name); ok {
		return t, true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.current[name]
	return t, ok
}
