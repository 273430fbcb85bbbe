package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// Notes are events shown as a line between the messages, where the
// conversation was when they came: what a turn changed in the files,
// reverts and their undo, checkpoints that failed, background commands
// started and ended. They are seen live (a snapshot carries the state,
// not the events: /bg and /undo ask for it).

// noteKind is how a note is styled.
type noteKind int

const (
	noteFaint noteKind = iota
	noteWarn
)

// addNote shows text after the newest message.
func (m *Model) addNote(text string, kind noteKind) {
	m.notes = append(m.notes, compactNote{after: m.lastMessageID(), text: text, kind: kind})
}

// observeNotes turns the events that make notes into notes.
func (m *Model) observeNotes(ev *protocol.EventEnvelope) {
	if ev.SessionID != m.sessionID {
		return // a worker's
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventWorkspaceChanged:
		var p protocol.WorkspaceChangedPayload
		if json.Unmarshal(ev.Payload, &p) != nil || p.FilesChanged == 0 {
			return
		}
		var paths []string
		for _, f := range p.Files {
			paths = append(paths, f.Path)
		}
		more := ""
		if len(paths) > 4 {
			more = fmt.Sprintf(" and %d more", p.FilesChanged-4)
			paths = paths[:4]
		}
		m.addNote(fmt.Sprintf("✎ this turn changed %s (+%d −%d): %s%s · /undo puts them back",
			plural(p.FilesChanged, "file"), p.Additions, p.Deletions, strings.Join(paths, ", "), more), noteFaint)
	case protocol.EventWorkspaceCheckpointFailed:
		var p protocol.WorkspaceCheckpointFailedPayload
		_ = json.Unmarshal(ev.Payload, &p)
		text := "⚠ no checkpoint before this turn's changes (" + p.ErrorClass + "): /undo cannot revert it"
		if p.After {
			text = "⚠ the checkpoint after this turn failed (" + p.ErrorClass + "): its changes are not listed"
		}
		m.addNote(text+" — "+oneLine(p.Message), noteWarn)
	case protocol.EventWorkspaceReverted:
		var p protocol.RevertResult
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		m.undoCP = p.UndoCheckpointID
		m.addNote(revertLine(&p), noteWarn)
	case protocol.EventToolBackgroundStarted:
		var p protocol.ToolBackgroundStartedPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			m.addNote(fmt.Sprintf("⚙ background %s started: $ %s · /bg lists them", p.BackgroundID, oneLine(p.Command)), noteFaint)
		}
	case protocol.EventToolBackgroundExited:
		var p protocol.ToolBackgroundExitedPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			kind := noteFaint
			if p.Reason == protocol.BackgroundOwnerLost || p.Reason == protocol.BackgroundServerLost {
				kind = noteWarn // stopped by a failure, not by itself or the user
			}
			m.addNote(fmt.Sprintf("⚙ background %s %s · $ %s", p.BackgroundID,
				bgEnd(p.Reason, p.ExitCode, time.Duration(p.DurationMS)*time.Millisecond), oneLine(p.Command)), kind)
		}
	}
}

// revertLine says what a revert (or its undo, or a fork's restore) put
// back, with the warning that only files are.
func revertLine(r *protocol.RevertResult) string {
	var head string
	switch r.Trigger {
	case protocol.RevertUndo:
		head = "↷ revert undone: the files are back as they were"
	case protocol.RevertFork:
		head = "⑂ the files were put back to the fork's point"
	default:
		head = "↶ files put back as they were before the turn"
		if r.TurnID != "" {
			head += " " + r.TurnID
		}
	}
	parts := []string{fmt.Sprintf("%d restored", len(r.Restored)), fmt.Sprintf("%d removed", len(r.Removed))}
	if n := len(r.Failed); n > 0 {
		parts = append(parts, fmt.Sprintf("%d could not be put back", n))
	}
	s := head + ": " + strings.Join(parts, ", ")
	if r.Trigger == protocol.RevertTurn {
		s += " · /redo undoes this"
	}
	if r.Warning != "" {
		s += "\n" + r.Warning
	}
	return s
}

// bgEnd says how a background command ended: "exited 0 after 3.2s",
// "killed (shell_kill) after 1m05s", "stopped after 12s: its cluster
// node was lost (failover)". A reason this TUI does not know is shown
// as it came.
func bgEnd(reason string, code *int, d time.Duration) string {
	head, why := "stopped", ""
	switch reason {
	case protocol.BackgroundExited:
		head = "exited"
		if code != nil {
			head = fmt.Sprintf("exited %d", *code)
		}
	case protocol.BackgroundKilled:
		head = "killed (shell_kill)"
	case protocol.BackgroundTimeout:
		why = "it ran past its timeout"
	case protocol.BackgroundServerShutdown:
		why = "the server shut down"
	case protocol.BackgroundServerLost:
		why = "the server running it ended unexpectedly"
	case protocol.BackgroundOwnerLost:
		why = "its cluster node was lost (failover)"
	case protocol.BackgroundSupervisorKilled:
		why = "its supervisor was killed"
	case protocol.BackgroundSessionDeleted:
		why = "the session was deleted"
	case "":
		head = "ended"
	default:
		head = reason
	}
	if d > 0 {
		head += " after " + humanDuration(d)
	}
	if why != "" {
		head += ": " + why
	}
	return head
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
