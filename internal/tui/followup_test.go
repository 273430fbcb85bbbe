package tui

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

var ctrlS = tea.KeyPressMsg{Code: 's', Mod: tea.ModCtrl}

// queuedEvent is a turn.queued as the session manager emits it.
func (h *harness) queuedEvent(turn, text, source string, pos int) {
	h.event("turn.queued", turn, map[string]any{"position": pos, "source": source, "user_message": map[string]any{
		"id": "msg_user_" + turn, "role": "user", "status": "complete",
		"content": []map[string]any{{"type": "text", "text": text}}}})
}

func TestEnterWhileATurnRunsQueuesTheMessageAndUnqueueRemovesIt(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "first")
	h.frame()
	h.api.accept = &client.TurnAccepted{TurnID: "turn_2", Queued: true, Position: 1, MessageID: "msg_user_turn_2"}
	h.typeText("then run the tests")
	h.run(h.key(enter))
	if r := h.api.requests[0]; !r.Queue || r.Steer || r.Content != "then run the tests" {
		t.Fatalf("request %+v", r)
	}
	h.contains("queued (1st in line)")
	if h.m.currentTurn() != "turn_1" {
		t.Fatalf("the current turn became %q", h.m.currentTurn())
	}
	h.queuedEvent("turn_2", "then run the tests", "queue", 1)
	h.queuedEvent("turn_3", "and commit", "queue", 2)
	h.frame()
	h.contains("⧗ 1 queued: then run the tests", "/unqueue N removes one", "⧗ 2 queued: and commit")
	if got := h.m.vp.Height(); got != 40-headerRows-activityRows-composerHeight-statusRows-2 {
		t.Fatalf("the conversation is %d rows with 2 queued", got)
	}

	h.typeText("/unqueue 2")
	h.run(h.key(enter))
	if len(h.api.cancelled) != 1 || h.api.cancelled[0] != "turn_3" {
		t.Fatalf("cancelled %q", h.api.cancelled)
	}
	h.event("turn.cancelled", "turn_3", map[string]any{"reason": "user_cancel", "phase": "queued"})
	h.frame()
	h.lacks("⧗ 2 queued")
	h.contains("⧗ 1 queued: then run the tests", "taken out of the queue before it ran: and commit")
	if h.m.currentTurn() != "turn_1" {
		t.Fatalf("a queued turn's cancel ended the running turn: current %q", h.m.currentTurn())
	}

	// The running turn ends; the queued one starts and leaves the panel.
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed"})
	h.turnStarted("turn_2", "then run the tests")
	h.frame()
	h.lacks("⧗ 1 queued")
	h.contains("› then run the tests")
	if h.m.currentTurn() != "turn_2" {
		t.Fatalf("current turn %q", h.m.currentTurn())
	}
}

func TestTheQueueOfTheSnapshotIsShown(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.Queued = []protocol.QueuedTurn{{TurnID: "turn_9", MessageID: "m9", Preview: "from before the reconnect", Images: 1, Source: "queue"}}
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("⧗ 1 queued: from before the reconnect [+1 image(s)]")
}

func TestCtrlSSteersIntoTheRunningTurn(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "first")
	h.frame()
	h.api.accept = &client.TurnAccepted{TurnID: "turn_1", Steered: true, MessageID: "msg_steer"}
	h.typeText("use the other file")
	h.run(h.key(ctrlS))
	if r := h.api.requests[0]; !r.Steer || r.Queue {
		t.Fatalf("request %+v", r)
	}
	h.contains("↪ steering: use the other file", "steered: the model reads it at its next call")

	h.event("turn.steered", "turn_1", map[string]any{"call_index": 1, "user_message": map[string]any{
		"id": "msg_steer", "role": "user", "status": "complete", "content": []map[string]any{{"type": "text", "text": "use the other file"}}}})
	h.frame()
	h.lacks("↪ steering:")
	h.contains("↪ steered into the running turn", "› use the other file")
}

func TestASteerIntoACancellingTurnSaysToQueueAndKeepsTheText(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "first")
	h.frame()
	h.api.submitErr = &client.APIError{Status: 409, Code: protocol.CodeTurnCancelling, Message: "the turn is being cancelled"}
	h.typeText("too late")
	h.run(h.key(ctrlS))
	h.contains("press enter to queue this one instead")
	if got := h.m.composer.Value(); got != "too late" {
		t.Fatalf("the input holds %q", got)
	}
}

// writePNG writes a w×h PNG and returns its path.
func writePNG(t *testing.T, dir string, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImageAttachesAFileToTheNextMessage(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	p := writePNG(t, dir, 40, 30)
	h.typeText("/image " + filepath.Join(dir, "missing.png"))
	h.run(h.key(enter))
	h.contains("not attached:")

	h.typeText("/image " + p)
	h.run(h.key(enter))
	h.contains("attached: [image: shot.png", "/image clear drops")
	h.typeText("what is this?")
	h.run(h.key(enter))
	r := h.api.requests[0]
	if len(r.Images) != 1 || r.Images[0].MediaType != "image/png" {
		t.Fatalf("images %+v", r.Images)
	}
	h.frame()
	h.lacks("attached: [image")

	// The user message shows the image as a placeholder, with the name it
	// was attached from.
	data, _ := os.ReadFile(p)
	sum := sha256hex(data)
	h.event("turn.started", "turn_1", map[string]any{"user_message": map[string]any{
		"id": "msg_user_turn_1", "role": "user", "status": "complete",
		"content": []map[string]any{{"type": "text", "text": "what is this?"},
			{"type": "image", "media_type": "image/png", "sha256": sum, "size": 123 * 1024, "width": 40, "height": 30}}}})
	h.frame()
	h.contains("› what is this?", "[image: shot.png 40×30 123 KB]")

	// Not a picture: refused before sending.
	txt := filepath.Join(dir, "notes.png")
	_ = os.WriteFile(txt, []byte("just text"), 0o600)
	h.typeText("/image " + txt)
	h.run(h.key(enter))
	h.contains("not a PNG, JPEG, GIF or WebP image")
}

func TestUndoAsksWithWhatItPutsBackThenReverts(t *testing.T) {
	h := newHarness(t)
	cp := "cp_1"
	h.api.turns = client.TurnList{Checkpoints: protocol.CheckpointStatus{Enabled: true}, Turns: []client.TurnInfo{
		{TurnID: "turn_1", Prompt: "write hello", StartedAt: time.Now(), CheckpointID: &cp, Revertible: true,
			Changes: &protocol.TurnChanges{FilesChanged: 1, Additions: 2, Files: []protocol.FileChange{{Path: "hello.txt", Status: "added", Additions: 2}}}},
		{TurnID: "turn_2", Prompt: "just talk", StartedAt: time.Now()},
	}}
	h.typeText("/undo")
	h.run(h.key(enter))
	h.contains("undo", "before the turn “write hello”", "A hello.txt (+2 −0)", "Only the workspace's files are put back", "y or enter reverts")
	if len(h.api.reverted) != 0 {
		t.Fatal("reverted before the answer")
	}
	// n keeps the files.
	h.key(tea.KeyPressMsg{Code: 'n', Text: "n"})
	h.contains("nothing was changed")
	h.lacks("y or enter reverts")

	h.typeText("/undo")
	h.run(h.key(enter))
	h.run(h.key(tea.KeyPressMsg{Code: 'y', Text: "y"}))
	if len(h.api.reverted) != 1 || h.api.reverted[0] != "turn_1" {
		t.Fatalf("reverted %q", h.api.reverted)
	}
	h.contains("reverted: 1 restored, 0 removed · /redo undoes it")
	h.event("workspace.reverted", "", map[string]any{"trigger": "revert", "turn_id": "turn_1", "checkpoint_id": cp,
		"undo_checkpoint_id": "cp_undo", "restored": []string{}, "removed": []string{"hello.txt"}, "warning": protocol.RevertWarning})
	h.frame()
	h.contains("↶ files put back as they were before the turn turn_1: 0 restored, 1 removed")

	h.typeText("/redo")
	h.run(h.key(enter))
	if len(h.api.restored) != 1 || h.api.restored[0] != "cp_undo" {
		t.Fatalf("restored %q", h.api.restored)
	}
}

func TestUndoWithNothingToRevertSaysSo(t *testing.T) {
	h := newHarness(t)
	h.api.turns = client.TurnList{Checkpoints: protocol.CheckpointStatus{Enabled: true},
		Turns: []client.TurnInfo{{TurnID: "turn_1", Prompt: "just talk"}}}
	h.typeText("/undo")
	h.run(h.key(enter))
	h.contains("nothing to revert: no turn of this session changed files")

	// The server says the files already are as before the turn.
	cp := "cp_1"
	h.api.turns.Turns[0].CheckpointID, h.api.turns.Turns[0].Revertible = &cp, true
	h.api.revertErr = &client.APIError{Status: 409, Code: protocol.CodeNothingToRevert, Message: "nothing to revert"}
	h.typeText("/undo")
	h.run(h.key(enter))
	h.run(h.key(enter))
	h.contains("nothing to revert: the files already are as they were before that turn")
}

func TestForkOpensTheCopy(t *testing.T) {
	h := newHarness(t)
	h.typeText("/fork")
	msg := h.run(h.key(enter))
	if _, ok := msg.(forkedMsg); !ok || h.m.next != "sess_FORK" || len(h.api.forks) != 1 {
		t.Fatalf("fork answered %#v, next %q", msg, h.m.next)
	}
}

func TestModelPickerListsGETModels(t *testing.T) {
	h := newHarness(t)
	h.api.models = client.ModelList{Default: "builtin:demo",
		Models:      []protocol.ModelInfo{{ID: "builtin:demo", Provider: "builtin"}, {ID: "openai:gpt-4.1", Provider: "openai"}},
		Unavailable: []protocol.UnavailableProvider{{Provider: "anthropic", Reason: "set ANTHROPIC_API_KEY"}}}
	h.typeText("/model")
	h.run(h.key(enter))
	h.contains("builtin:demo (the server's default)", "openai:gpt-4.1", "anthropic — set ANTHROPIC_API_KEY")
	h.key(tea.KeyPressMsg{Code: tea.KeyDown})
	h.key(enter)
	if h.m.modelPin != "openai:gpt-4.1" {
		t.Fatalf("pinned %q", h.m.modelPin)
	}
	h.contains("the next turns run on openai:gpt-4.1")
}

func TestAnMCPServerDownMarksTheStatusLine(t *testing.T) {
	h := newHarness(t)
	h.m.Update(mcpMsg{st: client.MCPStatus{Servers: []protocol.MCPServerStatus{
		{Name: "ok", Transport: "stdio", State: "running", Command: "ok-mcp"},
		{Name: "broken", Transport: "stdio", State: "failed", Command: "/nope", LastError: "exec: no such file"}}}})
	h.contains("⚠ mcp: 1 down (/mcp)")
	h.typeText("/mcp")
	h.key(enter)
	h.contains("MCP servers", "✗ broken · stdio · failed · 0 tools · /nope", "last error: exec: no such file", "● ok · stdio · running")
	h.key(esc)
	h.m.Update(mcpMsg{st: client.MCPStatus{Servers: []protocol.MCPServerStatus{{Name: "broken", State: "running"}}}})
	h.lacks("mcp: 1 down")
}

func TestBackgroundCommandsAreListed(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "serve")
	h.event("tool.background_started", "turn_1", map[string]any{"background_id": "bg_1", "command": "python3 -m http.server",
		"tool_use_id": "tu_1", "started_at": time.Now().UTC()})
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed"})
	h.frame()
	h.contains("⚙ background bg_1 started: $ python3 -m http.server", "bg 1 running (/bg)")
	h.typeText("/bg")
	h.key(enter)
	h.contains("background commands", "bg_1 running, started", "$ python3 -m http.server")
	h.key(esc)
	code := 0
	h.event("tool.background_exited", "", map[string]any{"background_id": "bg_1", "command": "python3 -m http.server",
		"exit_code": code, "reason": "exited", "duration_ms": 3200})
	h.frame()
	h.contains("⚙ background bg_1 exited 0 after 3.2s")
	h.lacks("bg 1 running")
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestTheSubmittedTurnEndsEvenWhenAQueuedOneStartsInTheSameFrame(t *testing.T) {
	h := newHarness(t)
	h.typeText("/long 400")
	h.run(h.key(enter)) // turn_1, pending
	h.turnStarted("turn_1", "/long 400")
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed"})
	h.turnStarted("turn_2", "queued")
	h.event("turn.completed", "turn_2", map[string]any{"outcome": "completed"})
	h.frame()
	if h.m.busy() {
		t.Fatalf("still busy: current turn %q", h.m.currentTurn())
	}
	h.contains("idle ·")
}
