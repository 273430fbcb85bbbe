package client

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// BackgroundCommand is a command the shell tool runs in the background
// (the summary's background_commands, tool.background_started and
// tool.background_exited).
type BackgroundCommand = protocol.BackgroundCommand

// BackgroundCommands returns the session's background commands, running
// and ended, oldest first.
func (v *View) BackgroundCommands() []BackgroundCommand {
	out := make([]BackgroundCommand, 0, len(v.Background))
	for _, c := range v.Background {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b BackgroundCommand) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// applyBackgroundSnapshot takes the snapshot summary's
// background_commands. The server lists them as they are when it takes
// the snapshot, at least as new as its seam: the events after the seam
// may tell the same again, which changes nothing.
func (v *View) applyBackgroundSnapshot(session json.RawMessage) {
	var sum struct {
		Background []*BackgroundCommand `json:"background_commands"`
	}
	_ = json.Unmarshal(session, &sum)
	for _, c := range sum.Background {
		if c != nil && c.ID != "" {
			if v.Background == nil {
				v.Background = map[string]*BackgroundCommand{}
			}
			v.Background[c.ID] = c
		}
	}
}

// applyBackground folds tool.background_started and
// tool.background_exited into the view: an upsert by id, and an end is
// never undone by a start seen after it.
func (v *View) applyBackground(ev *protocol.EventEnvelope) error {
	if v.Background == nil {
		v.Background = map[string]*BackgroundCommand{}
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventToolBackgroundStarted:
		var p protocol.ToolBackgroundStartedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		if p.BackgroundID == "" {
			return errors.New("tool.background_started without a background_id")
		}
		if c := v.Background[p.BackgroundID]; c != nil {
			return nil // known already (the snapshot, or its end)
		}
		v.Background[p.BackgroundID] = &BackgroundCommand{ID: p.BackgroundID, Command: p.Command, ToolUseID: p.ToolUseID,
			StartedAt: p.StartedAt, Running: true}
	case protocol.EventToolBackgroundExited:
		var p protocol.ToolBackgroundExitedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return err
		}
		if p.BackgroundID == "" {
			return errors.New("tool.background_exited without a background_id")
		}
		c := v.Background[p.BackgroundID]
		if c == nil {
			c = &BackgroundCommand{ID: p.BackgroundID, Command: p.Command, StartedAt: p.StartedAt}
			v.Background[p.BackgroundID] = c
		}
		ended := p.EndedAt
		if ended.IsZero() {
			ended, _ = time.Parse(time.RFC3339Nano, ev.TS)
		}
		c.Running, c.ExitCode, c.EndReason, c.EndedAt = false, p.ExitCode, p.Reason, &ended
	}
	return nil
}
