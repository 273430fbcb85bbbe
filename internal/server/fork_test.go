package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// wireMessage is the part of a message the fork tests compare.
type wireMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	TurnID  string          `json:"turn_id"`
	Content json.RawMessage `json:"content"`
}

func messagesOf(t *testing.T, h *servertest.Harness, sid string) []wireMessage {
	t.Helper()
	var page struct {
		Messages []wireMessage `json:"messages"`
	}
	if st := h.Do("GET", "/sessions/"+sid+"/messages?limit=200", nil, &page); st != http.StatusOK {
		t.Fatalf("GET messages of %s: %d", sid, st)
	}
	return page.Messages
}

// TestForkOverBothTransports: POST /sessions/{id}/fork at a message
// answers 201 with the new summary and its forked_from (contract §11);
// the fork holds the conversation up to and including that message,
// under new ids, on the same workspace; its trace starts with a
// session.created that says where it came from, which a client of the
// fork's stream receives; the source is left as it was; the fork runs
// turns of its own; without message_id the fork holds everything.
func TestForkOverBothTransports(t *testing.T) {
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		h := servertest.Start(t, "")
		sid := h.CreateSession()
		runTurn(h, sid, "first question")
		runTurn(h, sid, "second question")
		src := messagesOf(t, h, sid)
		if len(src) < 4 {
			t.Fatalf("source messages %d", len(src))
		}
		// The first turn's last message: the fork holds the first turn.
		at := -1
		for i, m := range src {
			if m.TurnID == src[0].TurnID {
				at = i
			}
		}
		var fork protocol.ForkResult
		if st := h.Do("POST", "/sessions/"+sid+"/fork", map[string]string{"message_id": src[at].ID}, &fork); st != http.StatusCreated {
			t.Fatalf("fork: %d", st)
		}
		if fork.ID == "" || fork.ID == sid || fork.ForkedFrom == nil || fork.ForkedFrom.SessionID != sid ||
			fork.ForkedFrom.MessageID != src[at].ID || fork.WorkspacePath != h.Workspace || fork.Restored != nil {
			t.Fatalf("fork answer %+v", fork)
		}
		got := messagesOf(t, h, fork.ID)
		if len(got) != at+1 {
			t.Fatalf("the fork holds %d messages, want %d", len(got), at+1)
		}
		for i, m := range got {
			if m.ID == src[i].ID || m.Role != src[i].Role || !streamtest.JSONEqual(m.Content, src[i].Content) {
				t.Fatalf("fork message %d %+v, source %+v", i, m, src[i])
			}
		}
		if n := len(messagesOf(t, h, sid)); n != len(src) {
			t.Fatalf("the source lost messages: %d of %d", n, len(src))
		}
		var listed protocol.AttachInfo
		if st := h.Do("GET", "/sessions/"+fork.ID, nil, &listed); st != http.StatusOK || listed.Session.ForkedFrom == nil ||
			*listed.Session.ForkedFrom != *fork.ForkedFrom {
			t.Fatalf("GET the fork: %d %+v", st, listed.Session.ForkedFrom)
		}

		// The fork's trace starts with its session.created.
		evs, err := h.Server.Store.Events(t.Context(), storeQuery(fork.ID))
		if err != nil || len(evs) == 0 || evs[0].Type != event.SessionCreated {
			t.Fatalf("the fork's trace %v %v", evs, err)
		}
		var created protocol.SessionCreatedPayload
		if err := json.Unmarshal(evs[0].Payload, &created); err != nil || created.ForkedFrom == nil ||
			created.ForkedFrom.SessionID != sid || created.ForkedFrom.MessageID != src[at].ID || created.Messages != at+1 {
			t.Fatalf("session.created %s (%v)", evs[0].Payload, err)
		}

		// A client of the fork's stream sees its snapshot, then its turns.
		c, _, snap := streamtest.Subscribe(t, tr, h.URL, fork.ID, wait, "preset:chat", nil, true)
		var snapSession protocol.SessionSummary
		if err := json.Unmarshal(snap.Session, &snapSession); err != nil || snapSession.ForkedFrom == nil || len(snap.Messages) != at+1 {
			t.Fatalf("the fork's snapshot: %s, %d messages (%v)", snap.Session, len(snap.Messages), err)
		}
		turn := h.Submit(fork.ID, "a third question, in the fork")
		c.Events(wait, streamtest.UntilType(event.TurnCompleted, turn))
		h.WaitTurn(fork.ID)
		if n := len(messagesOf(t, h, fork.ID)); n <= at+1 {
			t.Fatalf("the fork's turn added nothing: %d messages", n)
		}
		if n := len(messagesOf(t, h, sid)); n != len(src) {
			t.Fatalf("the fork's turn reached the source: %d messages, want %d", n, len(src))
		}

		var all protocol.ForkResult
		if st := h.Do("POST", "/sessions/"+sid+"/fork", nil, &all); st != http.StatusCreated || all.ForkedFrom.MessageID != src[len(src)-1].ID {
			t.Fatalf("fork of everything: %d %+v", st, all.ForkedFrom)
		}
		if n := len(messagesOf(t, h, all.ID)); n != len(src) {
			t.Fatalf("the fork of everything holds %d messages, want %d", n, len(src))
		}
	})
}

// TestForkRefusals: a message of another session, an unknown session, a
// bad body or mode, and a fork of all of a session while its turn runs
// each get their clear error, and create nothing.
func TestForkRefusals(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	other := h.CreateSession()
	runTurn(h, sid, "hello")
	runTurn(h, other, "hello")
	otherMsgs := messagesOf(t, h, other)
	count := func() int {
		var l protocol.SessionList
		h.Do("GET", "/sessions", nil, &l)
		return len(l.Sessions)
	}
	n := count()
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"another session's message", "/sessions/" + sid + "/fork", map[string]string{"message_id": otherMsgs[0].ID}, http.StatusNotFound, protocol.CodeMessageNotFound},
		{"an unknown message", "/sessions/" + sid + "/fork", map[string]string{"message_id": "msg_nope"}, http.StatusNotFound, protocol.CodeMessageNotFound},
		{"an unknown session", "/sessions/sess_nope/fork", nil, http.StatusNotFound, protocol.CodeSessionNotFound},
		{"a body that is not an object", "/sessions/" + sid + "/fork", []int{1}, http.StatusBadRequest, protocol.CodeInvalidJSON},
		{"a message id that is not a string", "/sessions/" + sid + "/fork", map[string]any{"message_id": 7}, http.StatusBadRequest, protocol.CodeInvalidJSON},
		{"a bad mode", "/sessions/" + sid + "/fork", map[string]any{"mode": "yolo"}, http.StatusBadRequest, protocol.CodeInvalidMode},
	} {
		if st, code := errCode(t, h, "POST", c.path, c.body); st != c.status || code != c.code {
			t.Errorf("fork at %s: %d %s, want %d %s", c.name, st, code, c.status, c.code)
		}
	}
	if m := count(); m != n {
		t.Fatalf("refused forks created %d sessions", m-n)
	}

	// While a turn runs: all of the session, or a message of that turn,
	// cannot be forked; an earlier message can.
	msgs := messagesOf(t, h, sid)
	running := h.Submit(sid, toolCmd("shell", map[string]any{"command": "touch started; sleep 30"}))
	waitFile(t, filepath.Join(h.Workspace, "started"))
	if st, code := errCode(t, h, "POST", "/sessions/"+sid+"/fork", nil); st != http.StatusConflict || code != protocol.CodeTurnInFlight {
		t.Errorf("fork of all of a busy session: %d %s", st, code)
	}
	var f protocol.ForkResult
	if st := h.Do("POST", "/sessions/"+sid+"/fork", map[string]string{"message_id": msgs[len(msgs)-1].ID}, &f); st != http.StatusCreated {
		t.Errorf("fork at a message before the running turn: %d", st)
	}
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+running+"/cancel", nil, nil); st != http.StatusAccepted {
		t.Fatalf("cancel: %d", st)
	}
	h.WaitTurn(sid)
}

// TestForkWithCheckpoint: a fork with "checkpoint": true at the end of
// a first turn puts the workspace's files back as they were before the
// turns the fork does not hold (its answer says what it restored, and
// the fork's trace holds the workspace.reverted); the restore can be
// undone from the fork like any revert.
func TestForkWithCheckpoint(t *testing.T) {
	needGit(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	runTurn(h, sid, toolCmd("write_file", map[string]string{"path": "one.txt", "content": "one\n"}))
	afterFirst := wsTree(t, h.Workspace)
	msgs := messagesOf(t, h, sid)
	runTurn(h, sid, toolCmd("write_file", map[string]string{"path": "README.md", "content": "second turn\n"}))
	afterSecond := wsTree(t, h.Workspace)

	var fork protocol.ForkResult
	body := map[string]any{"message_id": msgs[len(msgs)-1].ID, "checkpoint": true}
	if st := h.Do("POST", "/sessions/"+sid+"/fork", body, &fork); st != http.StatusCreated {
		t.Fatalf("fork: %d", st)
	}
	if fork.Restored == nil || fork.Restored.Trigger != protocol.RevertFork || fork.Restored.Warning != protocol.RevertWarning ||
		fork.RestoreError != "" {
		t.Fatalf("fork answer %+v", fork)
	}
	if d := sameTree(afterFirst, wsTree(t, h.Workspace)); d != "" {
		t.Fatalf("after the fork the files differ from after the first turn:\n%s", d)
	}
	evs, err := h.Server.Store.Events(t.Context(), storeQuery(fork.ID))
	if err != nil || len(evs) != 2 || evs[0].Type != event.SessionCreated || evs[1].Type != event.WorkspaceReverted {
		t.Fatalf("the fork's trace %v %v", evs, err)
	}
	if st := h.Do("POST", "/sessions/"+fork.ID+"/checkpoints/"+fork.Restored.UndoCheckpointID+"/restore", nil, nil); st != http.StatusAccepted {
		t.Fatalf("undo the fork's restore: %d", st)
	}
	if d := sameTree(afterSecond, wsTree(t, h.Workspace)); d != "" {
		t.Fatalf("after the undo the files differ from after the second turn:\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(h.Workspace, "one.txt")); err != nil {
		t.Fatal(err)
	}
}

// storeQuery asks for every stored event of a session.
func storeQuery(sid string) store.EventQuery { return store.EventQuery{SessionIDs: []string{sid}} }
