package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
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
	if _, err := m.cfg.Store.Session(ctx, sessionID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("%w: %s", ErrNotFound, sessionID)
		}
		return "", err
	}
	t, err := m.cfg.Store.Turn(ctx, turnID)
	if err != nil || t.SessionID != sessionID {
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("%w: %s in session %s", ErrTurnNotFound, turnID, sessionID)
		}
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
