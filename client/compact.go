package client

import (
	"context"
	"net/http"
	"net/url"
)

// Compact asks the server to compact a session's conversation now (POST
// /sessions/{id}/compact), with optional instructions saying what the
// summary must keep, and returns the compaction's id. The compaction
// then reports itself through the events context.compacting and
// context.compacted or context.compaction_failed, each carrying that
// id; Cancel with the id as the turn id cancels it. A turn in flight is
// a 409 turn_in_flight.
func (c *Client) Compact(ctx context.Context, sessionID, instructions string) (string, error) {
	var body any
	if instructions != "" {
		body = map[string]string{"instructions": instructions}
	}
	var out struct {
		CompactionID string `json:"compaction_id"`
	}
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/compact", body, &out)
	return out.CompactionID, err
}
