package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/checkpoint"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Workspace checkpoints, revert and fork (docs/conversation.md): the
// turn listing with each turn's checkpoint and changes (this file),
// reverting a turn and undoing a revert (revert.go), forking a session
// (fork.go). The agent loop takes the checkpoints.

// Errors of checkpoints, revert and fork (wrapped); the HTTP API maps
// them to codes.
var (
	ErrNothingToRevert        = errors.New("nothing to revert")
	ErrCheckpointsUnavailable = errors.New("checkpoints are unavailable")
	ErrCheckpointNotFound     = errors.New("checkpoint not found")
	ErrCheckpointFailed       = errors.New("checkpoint failed")
)

// Turn listing bounds.
const (
	DefaultTurnPage = 50
	MaxTurnPage     = 500
	// maxPromptRunes cuts a turn's prompt in the listing.
	maxPromptRunes = 200
	// Diff bounds of a turn's changes: per file and in all.
	maxFileDiff  = 64 << 10
	maxTotalDiff = 1 << 20
)

// CheckpointStatus says whether the server takes checkpoints.
func (m *Manager) CheckpointStatus() protocol.CheckpointStatus {
	if m.cfg.Checkpoints != nil {
		return protocol.CheckpointStatus{Enabled: true}
	}
	why := m.cfg.CheckpointsUnavailable
	if why == "" {
		why = "checkpoints are turned off (--checkpoints=false)"
	}
	return protocol.CheckpointStatus{Reason: why}
}

// checkpoints returns the checkpoint store, or ErrCheckpointsUnavailable
// saying why there is none.
func (m *Manager) checkpoints() (*checkpoint.Store, error) {
	if m.cfg.Checkpoints == nil {
		return nil, fmt.Errorf("%w: %s", ErrCheckpointsUnavailable, m.CheckpointStatus().Reason)
	}
	return m.cfg.Checkpoints, nil
}

// Turns returns a page of a session's turns (GET
// /sessions/{id}/turns): up to limit turns before the turn id before
// ("" for the newest), oldest first, each with its checkpoints and
// changes.
func (m *Manager) Turns(ctx context.Context, sessionID, before string, limit int) (protocol.TurnList, error) {
	if _, err := m.session(ctx, sessionID); err != nil {
		return protocol.TurnList{}, err
	}
	page, err := m.cfg.Store.SessionTurns(ctx, sessionID, before, limit)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.TurnList{}, fmt.Errorf("%w: %q is not a turn of session %s", ErrTurnNotFound, before, sessionID)
	}
	if err != nil {
		return protocol.TurnList{}, err
	}
	m.mu.Lock()
	busy := m.turns[sessionID] != nil
	m.mu.Unlock()
	out := protocol.TurnList{Turns: make([]protocol.TurnInfo, 0, len(page.Turns)), HasMore: page.HasMore,
		Checkpoints: m.CheckpointStatus()}
	for _, t := range page.Turns {
		info := protocol.TurnInfo{TurnID: t.ID, Status: string(t.Status), Reason: t.Reason, StartedAt: t.StartedAt,
			CheckpointID: optional(t.CheckpointID), AfterCheckpointID: optional(t.AfterCheckpointID),
			Revertible: t.CheckpointID != "" && !busy && out.Checkpoints.Enabled}
		if !t.EndedAt.IsZero() {
			ended := t.EndedAt
			info.EndedAt = &ended
		}
		if msg, ok := page.Prompts[t.ID]; ok {
			info.UserMessageID, info.Prompt = msg.ID, cutRunes(msg.PlainText(), maxPromptRunes)
		}
		if len(t.Changes) > 0 {
			var c protocol.TurnChanges
			if json.Unmarshal(t.Changes, &c) == nil {
				info.Changes = &c
			}
		}
		out.Turns = append(out.Turns, info)
	}
	if page.HasMore && len(page.Turns) > 0 {
		out.Next = page.Turns[0].ID
	}
	return out, nil
}

// TurnChanges returns the files a turn changed with their diffs (GET
// /sessions/{id}/turns/{turn_id}/changes): none for a turn without both
// checkpoints (it changed nothing, is still running, or did not end
// normally).
func (m *Manager) TurnChanges(ctx context.Context, sessionID, turnID string) (protocol.TurnDiff, error) {
	t, err := m.storedTurn(ctx, sessionID, turnID)
	if err != nil {
		return protocol.TurnDiff{}, err
	}
	out := protocol.TurnDiff{TurnID: t.ID, CheckpointID: t.CheckpointID, AfterCheckpointID: t.AfterCheckpointID,
		Files: []protocol.FileDiff{}}
	if t.CheckpointID == "" || t.AfterCheckpointID == "" {
		return out, nil
	}
	cs, err := m.checkpoints()
	if err != nil {
		return protocol.TurnDiff{}, err
	}
	s, err := m.session(ctx, sessionID)
	if err != nil {
		return protocol.TurnDiff{}, err
	}
	ds, err := cs.Diffs(ctx, s.WorkspacePath, t.CheckpointID, t.AfterCheckpointID, maxFileDiff, maxTotalDiff)
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) {
			return protocol.TurnDiff{}, fmt.Errorf("%w: the checkpoints of turn %s are gone (collected, or their directory was removed)", ErrCheckpointNotFound, turnID)
		}
		return protocol.TurnDiff{}, err
	}
	for _, d := range ds {
		out.Files = append(out.Files, protocol.FileDiff{FileChange: agent.FileChangeOf(d.Change), Diff: d.Diff, DiffTruncated: d.Truncated})
	}
	return out, nil
}

// busyWorkspace reports a turn in flight (other than mine) in a session
// whose workspace is ws, inside it or holds it: a revert would change
// files under it.
func (m *Manager) busyWorkspace(ctx context.Context, ws string, mine *activeTurn) error {
	m.mu.Lock()
	running := map[string]string{}
	for sid, t := range m.turns {
		if t != mine {
			running[sid] = t.id
		}
	}
	m.mu.Unlock()
	for sid, tid := range running {
		s, err := m.cfg.Store.Session(ctx, sid)
		if err != nil {
			continue
		}
		if overlaps(s.WorkspacePath, ws) {
			return fmt.Errorf("%w: turn %s of session %s runs in workspace %s", ErrTurnInFlight, tid, sid, s.WorkspacePath)
		}
	}
	return nil
}

// overlaps reports whether one of two clean absolute paths is the
// other or inside it.
func overlaps(a, b string) bool {
	in := func(p, dir string) bool {
		rel, err := filepath.Rel(dir, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	return in(a, b) || in(b, a)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// cutRunes cuts s to at most n runes, ending "…" when cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// restoreTimeout bounds a restore once started: it runs to its end
// even when the request that asked for it goes away.
const restoreTimeout = 10 * time.Minute
