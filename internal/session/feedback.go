package session

import (
	"context"
	"fmt"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
)

// MaxFeedbackComment bounds a feedback comment, in bytes.
const MaxFeedbackComment = 4000

// Feedback records a rating of a turn ("up" or "down", with an optional
// comment) as feedback.submitted, committed before it returns.
func (m *Manager) Feedback(ctx context.Context, sessionID, turnID, rating, comment string) (string, error) {
	if rating != "up" && rating != "down" {
		return "", fmt.Errorf(`%w: rating must be "up" or "down"`, ErrInvalid)
	}
	if len(comment) > MaxFeedbackComment {
		return "", fmt.Errorf("%w: comment is longer than %d bytes", ErrInvalid, MaxFeedbackComment)
	}
	if _, err := m.storedTurn(ctx, sessionID, turnID); err != nil {
		return "", err
	}
	em, err := m.cfg.Bus.Emitter(ctx, sessionID)
	if err != nil {
		return "", err
	}
	payload := map[string]any{"turn_id": turnID, "rating": rating, "comment": comment}
	ev, err := em.EmitWait(ctx, bus.Spec{Type: event.FeedbackSubmitted, TurnID: turnID, Actor: event.ActorUser, Payload: payload})
	if err != nil {
		return "", fmt.Errorf("feedback: %w", err)
	}
	return ev.ID, nil
}
