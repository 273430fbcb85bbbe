package clustertest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// Requests about a session's workspace checkpoints sent to a node that
// does not own the session's tree: the turn listing, a turn's changes,
// a revert, a restore and a fork are the owner's, whose checkpoint
// store holds the checkpoints and who alone knows whether a turn runs
// (docs/scale-out.md, "Routing to the owner").

// TestCheckpointRequestsSentToANonOwnerAreTheOwners: the turn listing
// and a turn's changes read through node B are the owner's (the same
// bodies; a turn running on the owner makes no turn revertible on
// either node); a revert sent to node B while the owner's turn waits is
// refused with the owner's 409, and once it ended, puts node A's
// workspace back (its workspace.reverted is the owner's); restoring
// the revert's undo checkpoint through node B undoes it; a fork through
// node B is made by the owner, holds the conversation, and its tree is
// the owner's. Refusals read as the owner's.
func TestCheckpointRequestsSentToANonOwnerAreTheOwners(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: checkpoints need it")
	}
	url := startNATS(t)
	a, b := carefulNode(t, url, "node-a"), carefulNode(t, url, "node-b")
	sid := a.CreateSession()
	visible(t, b, sid)
	onA, onB := attach(t, a, sid), attach(t, b, sid)
	notes := filepath.Join(a.Workspace, "notes.txt")

	turn := a.Submit(sid, writeCmd("notes.txt"))
	_, req := requested(t, onB)
	if st, body := raw(t, b, http.MethodPost, "/sessions/"+sid+"/approvals/"+req.ApprovalID, `{"decision":"allow"}`); st != http.StatusOK {
		t.Fatalf("allow on node b: %d %s", st, body)
	}
	a.WaitTurn(sid)
	onB.Events(wait, turnEnded(turn))
	if _, err := os.Stat(notes); err != nil {
		t.Fatalf("the turn did not write notes.txt: %v", err)
	}

	turns := "/sessions/" + sid + "/turns"
	changes := turns + "/" + turn + "/changes"
	for _, path := range []string{turns, turns + "?limit=1", changes} {
		sa, ba := raw(t, a, http.MethodGet, path, ``)
		sb, bb := raw(t, b, http.MethodGet, path, ``)
		if sa != http.StatusOK || sb != sa || bb != ba {
			t.Fatalf("GET %s: the owner answers %d %s, node b %d %s", path, sa, ba, sb, bb)
		}
	}
	var list protocol.TurnList
	_, body := raw(t, b, http.MethodGet, turns, ``)
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Turns) != 1 || !list.Turns[0].Revertible ||
		list.Turns[0].Changes == nil || list.Turns[0].Changes.FilesChanged != 1 {
		t.Fatalf("turns on node b: %s, want the write turn, revertible, with one file changed", body)
	}
	var diff protocol.TurnDiff
	if _, body := raw(t, b, http.MethodGet, changes, ``); json.Unmarshal([]byte(body), &diff) != nil ||
		len(diff.Files) != 1 || diff.Files[0].Path != "notes.txt" || diff.Files[0].Diff == "" {
		t.Fatalf("changes on node b: %s, want notes.txt with its diff", body)
	}

	// While a turn waits on the owner, nothing is revertible there, and
	// a revert through node B is refused as the owner refuses it.
	revert := turns + "/" + turn + "/revert"
	a.Submit(sid, shellCmd("echo busy"))
	_, req = requested(t, onB)
	_, body = raw(t, b, http.MethodGet, turns, ``)
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Turns) != 2 || list.Turns[0].Revertible {
		t.Fatalf("turns on node b while the owner's turn runs: %s, want none revertible", body)
	}
	sameRefusals(t, a, b, []struct{ what, method, path, body string }{
		{"a revert while a turn runs", http.MethodPost, revert, `{}`},
		{"a fork of all of it while a turn runs", http.MethodPost, "/sessions/" + sid + "/fork", `{}`},
	})
	if st, _ := raw(t, b, http.MethodPost, "/sessions/"+sid+"/approvals/"+req.ApprovalID, `{"decision":"deny"}`); st != http.StatusOK {
		t.Fatalf("deny on node b: %d", st)
	}
	a.WaitTurn(sid)

	status, body := raw(t, b, http.MethodPost, revert, `{}`)
	var res protocol.RevertResult
	if err := json.Unmarshal([]byte(body), &res); status != http.StatusAccepted || err != nil || res.TurnID != turn || res.UndoCheckpointID == "" {
		t.Fatalf("revert on node b: %d %s, want 202 with an undo checkpoint", status, body)
	}
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("after the revert through node b, notes.txt is still in the owner's workspace (%v)", err)
	}
	reverted := sameEnvelope(t, onA, onB, event.WorkspaceReverted, func(*protocol.EventEnvelope) bool { return true })
	emittedBy(t, a, sid, reverted.ID)

	status, body = raw(t, b, http.MethodPost, "/sessions/"+sid+"/checkpoints/"+res.UndoCheckpointID+"/restore", ``)
	if status != http.StatusAccepted {
		t.Fatalf("restore on node b: %d %s, want 202", status, body)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Fatalf("after the restore through node b, notes.txt is not back: %v", err)
	}

	status, body = raw(t, b, http.MethodPost, "/sessions/"+sid+"/fork", `{}`)
	var fork protocol.ForkResult
	if err := json.Unmarshal([]byte(body), &fork); status != http.StatusCreated || err != nil || fork.ForkedFrom == nil ||
		fork.ForkedFrom.SessionID != sid {
		t.Fatalf("fork on node b: %d %s, want 201 with forked_from", status, body)
	}
	var page struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if st := b.Do(http.MethodGet, "/sessions/"+fork.ID+"/messages", nil, &page); st != http.StatusOK || len(page.Messages) == 0 {
		t.Fatalf("the fork's messages on node b: %d, %d messages", st, len(page.Messages))
	}
	if holder := leaseHolder(t, url, fork.ID); holder != "node-a" {
		t.Fatalf("the fork's tree is held by %q, want node-a (the source's owner)", holder)
	}
	if holder := leaseHolder(t, url, sid); holder != "node-a" {
		t.Fatalf("the tree's lease is held by %q, want node-a", holder)
	}

	other := a.CreateSession()
	sameRefusals(t, a, b, []struct{ what, method, path, body string }{
		{"a revert of an unknown turn", http.MethodPost, turns + "/turn_nope/revert", `{}`},
		{"a revert with malformed JSON", http.MethodPost, revert, `{"x":`},
		{"a restore of an unknown checkpoint", http.MethodPost, "/sessions/" + sid + "/checkpoints/cp_nope/restore", `{}`},
		{"the changes of an unknown turn", http.MethodGet, turns + "/turn_nope/changes", ``},
		{"a page before an unknown turn", http.MethodGet, turns + "?before=turn_nope", ``},
		{"a limit too high", http.MethodGet, turns + "?limit=100000", ``},
		{"a fork at another session's message", http.MethodPost, "/sessions/" + other + "/fork", `{"message_id":"` + page.Messages[0].ID + `"}`},
		{"a fork in an unknown mode", http.MethodPost, "/sessions/" + sid + "/fork", `{"mode":"reckless"}`},
		{"a fork with malformed JSON", http.MethodPost, "/sessions/" + sid + "/fork", `{"mode":`},
	})
}
