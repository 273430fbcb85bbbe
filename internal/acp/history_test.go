package acp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/servertest"
)

// finalUpdate is the update that ended tool call id (completed or
// failed), as JSON, with the call's id left out.
func finalUpdate(t *testing.T, us []sdk.SessionUpdate, id string) string {
	t.Helper()
	for _, u := range us {
		tu := u.ToolCallUpdate
		if tu == nil || string(tu.ToolCallId) != id || tu.Status == nil {
			continue
		}
		if *tu.Status == sdk.ToolCallStatusCompleted || *tu.Status == sdk.ToolCallStatusFailed {
			b, err := json.Marshal(tu)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("call %s never ended; %s", id, describe(us))
	return ""
}

// session/load shows each call as it was shown live: an edit's diff,
// summary and locations, a delegate call's worker log, a cancelled
// call's error class; and a cancelled turn is marked as such (live, the
// prompt's stop reason said it).
func TestLoadKeepsWhatTheTurnsShowed(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	live := serveAgent(t, h.URL)
	live.initialize(t)
	sid := live.newSession(t, h.Workspace)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	mustPrompt(t, live, sid, `/tool edit_file {"path": "README.md", "old_string": "content", "new_string": "text"}`)
	mustPrompt(t, live, sid, `/tool delegate {"task": "/tool read_file {\"path\": \"main.go\"}"}`)
	done := live.promptAsync(ctx, sid, `/tool shell {"command": "sleep 30"}`)
	live.ed.waitFor(t, "the shell call in progress", func(us []sdk.SessionUpdate) bool {
		for _, c := range toolCalls(us) {
			if c.Kind == sdk.ToolKindExecute && toolStatus(us, string(c.ToolCallId)) == sdk.ToolCallStatusInProgress {
				return true
			}
		}
		return false
	})
	if err := live.conn.Cancel(ctx, sdk.CancelNotification{SessionId: sdk.SessionId(sid)}); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.err != nil || a.r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("prompt answered %+v, %v", a.r, a.err)
	}
	mustPrompt(t, live, sid, "/echo after the cancel")
	liveUs := live.ed.all()
	calls := toolCalls(liveUs)
	if len(calls) != 3 {
		t.Fatalf("live calls: %s", describe(liveUs))
	}
	if !strings.Contains(finalUpdate(t, liveUs, string(calls[1].ToolCallId)), "▸ Read main.go") {
		t.Fatalf("the live delegate call has no worker log: %s", finalUpdate(t, liveUs, string(calls[1].ToolCallId)))
	}

	loader := serveAgent(t, h.URL)
	loader.initialize(t)
	if _, err := loader.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	loadedUs := loader.ed.all()
	for i, c := range calls {
		got, want := finalUpdate(t, loadedUs, string(c.ToolCallId)), finalUpdate(t, liveUs, string(c.ToolCallId))
		if got != want {
			t.Errorf("call %d (%s) loaded as\n%s\nshown live as\n%s", i, c.Title, got, want)
		}
	}
	text := agentText(loadedUs)
	if i, j := strings.Index(text, "*Cancelled* (user_cancel)"), strings.Index(text, "after the cancel"); i < 0 || j < i {
		t.Errorf("no cancelled marker before the next turn's answer: %q", text)
	}
	if n := strings.Count(text, "*Cancelled*"); n != 1 {
		t.Errorf("%d cancelled markers in %q", n, text)
	}
}
