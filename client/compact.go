package client

import (
	"context"
	"net/http"
	"net/url"
)

// Compact asks the server to compact a session's conversation now (POST
// /sessions/{id}/compact) and returns the compaction's id. instructions
// ("" for none) say what the summary must keep. The compaction then
// reports itself through context.compacting and context.compacted (or
// context.compaction_failed) events; while it runs it holds the session's
// turn slot, so Cancel with its id stops it. A turn in flight is refused
// with protocol.CodeTurnInFlight.
func (c *Client) Compact(ctx context.Context, sessionID, instructions string) (string, error) {
	var body any = struct{}{}
	if instructions != "" {
		body = map[string]string{"instructions": instructions}
	}
	var out struct {
		CompactionID string `json:"compaction_id"`
	}
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/compact", body, &out)
	return out.CompactionID, err
}
