package server

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Background commands (shell with background: true, internal/tool):
// the server makes their holder from its settings, emits
// tool.background_started and tool.background_exited for them, stops
// those of a session the retention deletes, and stops them all when it
// stops (Shutdown). A server that dies without stopping them (a crash,
// SIGKILL) cannot emit their ends: each supervisor stops its command
// when the server's end of its lifeline closes, and a ledger of the
// commands running (<home>/background/<id>.json, written when one
// starts, removed once its end is emitted) lets the next start emit
// their tool.background_exited, reason server_lost.

// ledgerEntry is one running command in the ledger.
type ledgerEntry struct {
	SessionID string                                `json:"session_id"`
	Started   protocol.ToolBackgroundStartedPayload `json:"started"`
}

func (s *Server) ledgerDir() string { return filepath.Join(s.Config.Home, "background") }

// newBackground makes the holder of the background commands.
func (s *Server) newBackground() *tool.Background {
	return &tool.Background{MaxPerSession: s.Config.BackgroundCommands, OutputBytes: s.Config.BackgroundOutput,
		Notify: s.backgroundNotice}
}

// backgroundNotice emits the event of a command that started or ended
// and keeps the ledger.
func (s *Server) backgroundNotice(n tool.BackgroundNotice) {
	typ, payload, id := event.ToolBackgroundStarted, any(n.Started), ""
	if n.Started != nil {
		id = n.Started.BackgroundID
		s.ledgerWrite(n.SessionID, *n.Started)
	} else {
		typ, payload, id = event.ToolBackgroundExited, n.Exited, n.Exited.BackgroundID
		switch n.Exited.Reason {
		case protocol.BackgroundSessionDeleted:
			s.ledgerRemove(id)
			return // the session and its events are gone
		case protocol.BackgroundOwnerLost:
			s.ledgerRemove(id)
			return // this node lost the tree: its new owner reports the end
		}
	}
	s.emitBackground(n.SessionID, n.TurnID, typ, payload)
	if n.Exited != nil {
		s.ledgerRemove(id)
	}
}

func (s *Server) emitBackground(sessionID, turnID string, typ event.Type, payload any) {
	em, err := s.Bus.Emitter(context.Background(), sessionID)
	if err == nil {
		_, err = em.Emit(bus.Spec{Type: typ, TurnID: turnID, Actor: event.ActorTool, Payload: payload})
	}
	if err != nil {
		s.Log.Warn("background command event", "session", sessionID, "type", typ, "err", err)
	}
}

func (s *Server) ledgerWrite(sessionID string, p protocol.ToolBackgroundStartedPayload) {
	b, _ := json.Marshal(ledgerEntry{SessionID: sessionID, Started: p})
	err := os.MkdirAll(s.ledgerDir(), 0o700)
	if err == nil {
		err = os.WriteFile(filepath.Join(s.ledgerDir(), p.BackgroundID+".json"), b, 0o600)
	}
	if err != nil {
		s.Log.Warn("background command ledger", "id", p.BackgroundID, "err", err)
	}
}

func (s *Server) ledgerRemove(id string) {
	if err := os.Remove(filepath.Join(s.ledgerDir(), id+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.Log.Warn("background command ledger", "id", id, "err", err)
	}
}

// reportLostBackground emits tool.background_exited (server_lost) for
// the commands a previous run of the server left in the ledger: it died
// without stopping them, and their supervisors stopped them then.
func (s *Server) reportLostBackground() {
	ents, err := os.ReadDir(s.ledgerDir())
	if err != nil {
		return // none
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		path := filepath.Join(s.ledgerDir(), e.Name())
		var le ledgerEntry
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &le)
		}
		if err != nil || le.SessionID == "" {
			s.Log.Warn("background command ledger: unreadable entry removed", "file", path, "err", err)
			_ = os.Remove(path)
			continue
		}
		if !s.emits(le.SessionID) {
			continue // cluster mode: another node owns the session now
		}
		ended := time.Now().UTC()
		if info, err := e.Info(); err == nil && info.ModTime().After(le.Started.StartedAt) {
			ended = info.ModTime().UTC() // no later than the server's end is known; this is as good
		}
		if _, err := s.Store.Session(context.Background(), le.SessionID); err == nil && !s.backgroundEnded(le.SessionID, id) {
			s.emitBackground(le.SessionID, "", event.ToolBackgroundExited, protocol.ToolBackgroundExitedPayload{
				BackgroundID: id, Command: le.Started.Command, Reason: protocol.BackgroundServerLost,
				StartedAt: le.Started.StartedAt, EndedAt: ended, DurationMS: max(0, ended.Sub(le.Started.StartedAt).Milliseconds())})
		}
		s.ledgerRemove(id)
	}
}

// backgroundEnded reports whether the store holds the end of a
// session's background command already: in cluster mode, the node that
// took the session's tree over reported it (owner_lost) while this one
// was down.
func (s *Server) backgroundEnded(sessionID, id string) bool {
	evs, err := s.Store.Events(context.Background(), store.EventQuery{SessionIDs: []string{sessionID},
		Types: []event.Type{event.ToolBackgroundExited}})
	if err != nil {
		return false
	}
	for _, e := range evs {
		var p protocol.ToolBackgroundExitedPayload
		if json.Unmarshal(e.Payload, &p) == nil && p.BackgroundID == id {
			return true
		}
	}
	return false
}

// Prune prunes the trace store to before (store.Prune) and stops the
// background commands of the sessions it deleted.
func (s *Server) Prune(ctx context.Context, before time.Time) (store.PruneResult, error) {
	// The replay windows first: they never serve what the store no
	// longer holds.
	s.Hub.PruneWindows(before)
	r, err := s.Store.Prune(ctx, before)
	if r.Sessions > 0 {
		s.endDeletedBackground(ctx)
	}
	return r, err
}

// endDeletedBackground stops the background commands of the sessions
// that no longer exist (the retention deleted them).
func (s *Server) endDeletedBackground(ctx context.Context) {
	for _, sid := range s.Background.Sessions() {
		if _, err := s.Store.Session(ctx, sid); errors.Is(err, store.ErrNotFound) {
			if err := s.Background.EndSession(ctx, sid); err != nil {
				s.Log.Warn("stop the background commands of a deleted session", "session", sid, "err", err)
			}
		}
	}
}
