package agent

import "context"

// forSession returns the loop a turn of the session runs with: l itself,
// or, with a ToolSource, a copy whose tool registry also holds the
// tools the source offers the session (tool.Registry.ForSession), so
// that everything the turn does with its tools (offering them, deciding
// and running calls) sees the same set.
func (l *Loop) forSession(ctx context.Context, sessionID string) *Loop {
	if l.cfg.ToolSource == nil {
		return l
	}
	cfg := l.cfg
	cfg.Tools = cfg.Tools.ForSession(ctx, sessionID, cfg.ToolSource)
	return &Loop{cfg: cfg}
}
