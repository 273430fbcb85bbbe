package client

import (
	"errors"
	"fmt"
	"testing"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/protocol"
)

// TestReplayAtOnce: Follow reconnects without backing off after a 1008
// close that asks for a replay (client_too_slow, resync, owner_changed),
// and backs off after any other end.
func TestReplayAtOnce(t *testing.T) {
	closed := func(code websocket.StatusCode, r protocol.CloseReason) error {
		return fmt.Errorf("read: %w", websocket.CloseError{Code: code, Reason: r.Encode()})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{closed(protocol.ClosePolicyViolation, protocol.ReasonClientTooSlow), true},
		{closed(protocol.ClosePolicyViolation, protocol.ReasonResync), true},
		{closed(protocol.ClosePolicyViolation, protocol.ReasonOwnerChanged), true},
		{closed(protocol.ClosePolicyViolation, protocol.ReasonHeartbeatTimeout), false},
		{closed(protocol.CloseGoingAway, protocol.ReasonShutdown), false},
		{closed(protocol.ClosePolicyViolation, protocol.CloseReason{Code: "owner_changed"}), true},
		{fmt.Errorf("read: %w", websocket.CloseError{Code: protocol.ClosePolicyViolation, Reason: "not json"}), false},
		{errors.New("connection reset"), false},
	} {
		if got := replayAtOnce(c.err); got != c.want {
			t.Errorf("replayAtOnce(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
