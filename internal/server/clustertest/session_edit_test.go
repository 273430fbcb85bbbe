package clustertest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// Renames, archiving, deletion and the queue of a session in cluster
// mode: every node answers as the owner does.

// listed returns the summary of sid in node h's GET /sessions (ok false
// when it is not listed).
func listed(t *testing.T, h *servertest.Harness, sid string) (protocol.SessionSummary, bool) {
	t.Helper()
	var list protocol.SessionList
	if st := h.Do(http.MethodGet, "/sessions", nil, &list); st != http.StatusOK {
		t.Fatalf("GET /sessions on %s: %d", h.Config.Node, st)
	}
	for _, s := range list.Sessions {
		if s.ID == sid {
			return s, true
		}
	}
	return protocol.SessionSummary{}, false
}

// summaryOn returns GET /sessions/{id} on node h: the summary and the
// status.
func summaryOn(t *testing.T, h *servertest.Harness, sid string) (protocol.SessionSummary, int) {
	t.Helper()
	var got struct {
		Session protocol.SessionSummary `json:"session"`
	}
	st := h.Do(http.MethodGet, "/sessions/"+sid, nil, &got)
	return got.Session, st
}

// TestRenameOnOneNodeIsListedOnEvery: a rename and an archive sent to
// either node (the non-owner forwards them) are committed with
// session.updated, so GET /sessions on every node shows them, and
// clients on both nodes see the same event.
func TestRenameOnOneNodeIsListedOnEvery(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)

	for i, tc := range []struct {
		h     *servertest.Harness
		title string
	}{{b, "renamed on b"}, {a, "renamed on a"}} {
		if st, body := raw(t, tc.h, http.MethodPatch, "/sessions/"+sid, `{"title":"`+tc.title+`","archived":`+strconv.FormatBool(i == 0)+`}`); st != http.StatusOK {
			t.Fatalf("PATCH on %s: %d %s", tc.h.Config.Node, st, body)
		}
		updated := sameEnvelope(t, onA, onB, event.SessionUpdated, func(*protocol.EventEnvelope) bool { return true })
		if p := editOf(t, updated); p.Title == nil || *p.Title != tc.title {
			t.Fatalf("session.updated %s", updated.Payload)
		}
		for _, h := range []*servertest.Harness{a, b} {
			servertest.WaitFor(t, tc.title+" listed on "+h.Config.Node, func() bool {
				s, ok := listed(t, h, sid)
				return ok && s.Title == tc.title && s.Archived == (i == 0)
			})
		}
	}
}

func editOf(t *testing.T, e *protocol.EventEnvelope) protocol.SessionEdit {
	t.Helper()
	var p protocol.SessionEdit
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatalf("payload of %s: %v", e.Type, err)
	}
	return p
}

// TestQueuedTurnsShowOnEveryNode: a turn queued behind a running one is
// in the owner's memory only; GET /sessions/{id} on the other node reads
// it from its store, so both list the same queued_turns, and both list
// none once it ran.
func TestQueuedTurnsShowOnEveryNode(t *testing.T) {
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA := attach(t, a, sid)

	first := a.Submit(sid, shellCmd("true")) // waits for its approval
	_, req := requested(t, onA)
	var acc protocol.TurnAccepted
	if st := a.Do(http.MethodPost, "/sessions/"+sid+"/turns", map[string]any{"content": "/echo queued", "queue": true}, &acc); st != http.StatusAccepted {
		t.Fatalf("queue a turn: %d", st)
	}
	queue := func(h *servertest.Harness) []protocol.QueuedTurn {
		s, st := summaryOn(t, h, sid)
		if st != http.StatusOK {
			t.Fatalf("GET on %s: %d", h.Config.Node, st)
		}
		return s.QueuedTurns
	}
	onOwner := queue(a)
	if len(onOwner) != 1 || onOwner[0].TurnID != acc.TurnID {
		t.Fatalf("the owner's queue: %+v, want %s", onOwner, acc.TurnID)
	}
	servertest.WaitFor(t, "the queued turn on node b", func() bool {
		q := queue(b)
		return len(q) == 1 && q[0].TurnID == acc.TurnID && q[0].Preview == onOwner[0].Preview &&
			q[0].MessageID == onOwner[0].MessageID && q[0].Source == onOwner[0].Source
	})
	if st, body := raw(t, b, http.MethodPost, "/sessions/"+sid+"/approvals/"+req.ApprovalID, `{"decision":"allow"}`); st != http.StatusOK {
		t.Fatalf("allow: %d %s", st, body)
	}
	onA.Events(wait, turnEnded(first))
	onA.Events(wait, turnEnded(acc.TurnID))
	for _, h := range []*servertest.Harness{a, b} {
		servertest.WaitFor(t, "an empty queue on "+h.Config.Node, func() bool { return len(queue(h)) == 0 })
	}
}

// TestDeleteOnANonOwnerIsTheOwners: DELETE /sessions/{id} sent to the
// node that does not own the session's tree is carried out by the
// owner: its background command stops at once and the session is gone
// from the owner's store, and from the asking node's; a second DELETE is
// 404 on both.
func TestDeleteOnANonOwnerIsTheOwners(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)

	cmd, _ := json.Marshal(map[string]any{"command": "echo $$ > bg.pid; exec sleep 300", "background": true})
	a.Submit(sid, "/tool shell "+string(cmd))
	var pid int
	servertest.WaitFor(t, "the command's pid", func() bool {
		b, err := os.ReadFile(filepath.Join(a.Workspace, "bg.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	a.WaitTurn(sid)
	servertest.WaitFor(t, "the turn's end on node b", func() bool {
		s, st := summaryOn(t, b, sid)
		return st == http.StatusOK && s.CurrentTurnID == nil && s.ContextTokens > 0
	})

	if st, body := raw(t, b, http.MethodDelete, "/sessions/"+sid, ""); st != http.StatusNoContent {
		t.Fatalf("DELETE on node b: %d %s", st, body)
	}
	if syscall.Kill(pid, 0) == nil && !zombie(pid) {
		t.Fatalf("the owner's background command %d still runs after the DELETE", pid)
	}
	for _, h := range []*servertest.Harness{a, b} {
		if st, body := raw(t, h, http.MethodGet, "/sessions/"+sid, ""); st != http.StatusNotFound {
			t.Errorf("GET on %s after the DELETE: %d %s", h.Config.Node, st, body)
		}
		if _, ok := listed(t, h, sid); ok {
			t.Errorf("%s still lists the deleted session", h.Config.Node)
		}
		if st, _ := raw(t, h, http.MethodDelete, "/sessions/"+sid, ""); st != http.StatusNotFound {
			t.Errorf("a second DELETE on %s: %d", h.Config.Node, st)
		}
	}
}
