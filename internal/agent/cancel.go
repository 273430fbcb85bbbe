package agent

import (
	"context"
	"errors"
)

// Cancellation reasons the server itself uses.
const (
	ReasonUser           = "user_cancel"
	ReasonServerShutdown = "server_shutdown"
	ReasonTurnTimeout    = "turn_timeout"
)

// CancelCause is the cause a turn's context is cancelled with; its
// Reason ends up in turn.cancelled.
type CancelCause struct{ Reason string }

func (c *CancelCause) Error() string { return "turn cancelled: " + c.Reason }

// CancelReason returns the cancellation reason of a cancelled context:
// its *CancelCause's, turn_timeout for a deadline, user_cancel otherwise.
func CancelReason(ctx context.Context) string { return reasonOf(ctx) }

// reasonOf returns the cancellation reason of a cancelled context.
func reasonOf(ctx context.Context) string {
	var c *CancelCause
	if errors.As(context.Cause(ctx), &c) && c.Reason != "" {
		return c.Reason
	}
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return ReasonTurnTimeout
	}
	return ReasonUser
}
