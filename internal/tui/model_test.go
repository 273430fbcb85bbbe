package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

var (
	ctrlC    = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	ctrlO    = tea.KeyPressMsg{Code: 'o', Mod: tea.ModCtrl}
	enter    = tea.KeyPressMsg{Code: tea.KeyEnter}
	altEnter = tea.KeyPressMsg{Code: tea.KeyEnter, Mod: tea.ModAlt}
	f2       = tea.KeyPressMsg{Code: tea.KeyF2}
)

func TestStreamingTextIsPlainThenMarkdown(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "say hello")
	h.messageStart("turn_1", "msg_a")
	h.textDelta("turn_1", "msg_a", 0, "Hello **bold")
	h.frame()
	h.contains("› say hello", "Hello **bold")
	if l := h.line("builtin:demo"); !strings.Contains(l, "writing") {
		t.Fatalf("activity bar while streaming: %q", l)
	}

	h.textDelta("turn_1", "msg_a", 0, " world**")
	h.complete("turn_1", "msg_a", "end_turn", textBlock("Hello **bold world**"))
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed"})
	h.frame()
	h.contains("Hello bold world") // rendered: the markers are gone
	h.lacks("**")
	h.contains("idle")
}

func TestManyDeltasWithinOneFrameRenderOnce(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "/long 500")
	h.messageStart("turn_1", "msg_a")
	h.frame()
	before := h.m.renders
	var want strings.Builder
	for i := range 500 {
		s := "w" + string(rune('a'+i%26)) + " "
		want.WriteString(s)
		h.textDelta("turn_1", "msg_a", 0, s)
	}
	h.frame()
	if got := h.m.renders - before; got != 1 {
		t.Fatalf("500 deltas in one frame caused %d renders, want 1", got)
	}
	if got := h.m.view.Message("msg_a").Text(); got != want.String() {
		t.Fatalf("text = %q", got)
	}
	h.contains("↓ 500 tok")
	for range 3 { // nothing new: no render
		h.frame()
		h.m.View()
	}
	if got := h.m.renders - before; got != 1 {
		t.Fatalf("idle frames re-rendered: %d renders", got)
	}
}

func TestThinkingIsCollapsedUntilExpanded(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "hi")
	h.messageStart("turn_1", "msg_a")
	h.event("thinking.delta", "turn_1", map[string]any{"message_id": "msg_a", "content_block_index": 0, "text": "ponder deeply"})
	h.frame()
	h.contains("thinking… (13 chars)")
	h.lacks("ponder deeply")
	h.key(ctrlO)
	h.contains("ponder deeply")
	h.key(ctrlO)
	h.lacks("ponder deeply")
}

func TestToolCallStreamsInputThenResult(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "look")
	h.messageStart("turn_1", "msg_a")
	h.event("tool.use_start", "turn_1", map[string]any{"message_id": "msg_a", "content_block_index": 0, "tool_use_id": "tu_1", "tool_name": "list_dir"})
	h.event("tool.use_input_delta", "turn_1", map[string]any{"message_id": "msg_a", "content_block_index": 0, "tool_use_id": "tu_1", "partial_json": `{"pa`})
	h.frame()
	h.contains(`▸ list_dir {"pa …`)
	h.contains("calling list_dir")

	h.event("tool.use_input_delta", "turn_1", map[string]any{"message_id": "msg_a", "content_block_index": 0, "tool_use_id": "tu_1", "partial_json": `th": "."}`})
	h.event("tool.use_end", "turn_1", map[string]any{"message_id": "msg_a", "content_block_index": 0, "tool_use_id": "tu_1", "final_input": map[string]string{"path": "."}})
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_1", "list_dir", map[string]string{"path": "."}))
	h.event("tool.called", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "list_dir", "input": map[string]string{"path": "."}})
	h.frame()
	h.contains(`▸ list_dir {"path":"."}`, "⋯ running", "running list_dir")

	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "list_dir", "summary": "2 entries in .", "result": "README.md\nmain.go"})
	h.frame()
	h.contains("✓ 2 entries in .")
	h.lacks("main.go")
	h.key(ctrlO)
	h.contains("README.md", "main.go")

	h.event("tool.failed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "list_dir", "error_class": "not_found", "message": "no such dir"})
	h.frame()
	h.contains("✗ not_found: no such dir")
}

// sgrStrike matches an SGR sequence that turns strikethrough on.
var sgrStrike = regexp.MustCompile(`\x1b\[(?:[0-9]+;)*9(?:;[0-9]+)*m`)

func TestCancelledTurnMarksMessageAndStrikesTools(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "two things")
	h.messageStart("turn_1", "msg_a")
	h.textDelta("turn_1", "msg_a", 0, "Sentence 1. ")
	h.complete("turn_1", "msg_a", "tool_use", textBlock("Sentence 1. "), toolBlock("tu_1", "read_file", map[string]string{"path": "a"}))
	h.event("tool.failed", "turn_1", map[string]any{"tool_use_id": "tu_1", "tool_name": "read_file", "error_class": "cancelled", "message": "cancelled", "started": false})
	h.messageStart("turn_1", "msg_b")
	h.textDelta("turn_1", "msg_b", 0, "Half a sent")
	h.complete("turn_1", "msg_b", "cancelled", textBlock("Half a sent"))
	h.event("llm.call_failed", "turn_1", map[string]any{"message_id": "msg_b", "error_class": "cancelled", "message": "cancelled"})
	h.event("turn.cancelled", "turn_1", map[string]any{"reason": "user_cancel", "phase": "llm"})
	h.frame()

	h.contains("Half a sent\n(cancelled)", "✗ cancelled", "last turn cancelled")
	h.lacks("model error") // a cancelled call is not an error
	if l := h.line(`▸ read_file {"path":"a"}`); !sgrStrike.MatchString(l) {
		t.Fatalf("cancelled tool not struck through: %q", l)
	}
	if l := h.line("Sentence 1."); sgrStrike.MatchString(l) {
		t.Fatalf("text struck through: %q", l)
	}
}

func TestCallFailureIsShownInRed(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "hi")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "error")
	h.event("llm.call_failed", "turn_1", map[string]any{"message_id": "msg_a", "error_class": "overloaded", "message": "try later"})
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "failed", "error_class": "overloaded"})
	h.frame()
	l := h.line("model error (overloaded): try later")
	if !strings.Contains(l, "\x1b[31m") {
		t.Fatalf("error not red: %q", l)
	}
	h.contains("last turn failed: overloaded")
}

func TestWorkerDelegationIsAnExpandableCard(t *testing.T) {
	h := newHarness(t)
	task := map[string]string{"task": "count the files"}
	h.turnStarted("turn_1", "delegate it")
	h.messageStart("turn_1", "msg_a")
	h.complete("turn_1", "msg_a", "tool_use", toolBlock("tu_d", "delegate", task))
	h.event("tool.called", "turn_1", map[string]any{"tool_use_id": "tu_d", "tool_name": "delegate", "input": task})
	h.event("delegate.started", "turn_1", map[string]any{"worker_session_id": "sess_worker1", "task": "count the files", "model": "builtin:demo"})
	h.frame()
	h.contains("⧉ worker sess_worker1 : count the files — running")

	h.event("delegate.completed", "turn_1", map[string]any{"worker_session_id": "sess_worker1", "success": true, "summary": "there are 2", "cost_usd": 0.0021})
	h.event("tool.completed", "turn_1", map[string]any{"tool_use_id": "tu_d", "tool_name": "delegate", "summary": "worker sess_worker1: there are 2", "result": "there are 2"})
	h.frame()
	h.contains("⧉ worker sess_worker1 : count the files — completed: there are 2")
	h.lacks("✓ worker") // the card stands for the tool's outcome

	h.key(ctrlO)
	h.contains("⧉ worker sess_worker1 (builtin:demo)", "task: count the files", "status: completed: there are 2", "cost: $0.0021", "╭")
}

func TestReconnectingIsVisibleUntilResubscribed(t *testing.T) {
	h := newHarness(t)
	h.update(client.Update{Kind: client.Reconnecting, Attempt: 2, Err: errors.New("metis: GET /x: dial tcp: connection refused")})
	h.frame()
	h.contains("reconnecting… (attempt 2): connection refused")
	h.update(client.Update{Kind: client.Subscribed, View: client.NewView(nil), Resumed: true})
	h.frame()
	h.lacks("reconnecting")
}

// A resubscribe after a gap rebuilds the view from a snapshot: text that
// had streamed before the drop is shown once, from the snapshot.
func TestSnapshotAfterReconnectDoesNotDuplicate(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "/long 3")
	h.messageStart("turn_1", "msg_a")
	h.textDelta("turn_1", "msg_a", 0, "Sentence 1 of 3. ")
	h.frame()
	h.update(client.Update{Kind: client.Reconnecting, Attempt: 1, Err: errors.New("EOF")})
	h.frame()

	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo","cost_so_far_usd":0.5}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"msg_user_turn_1","role":"user","turn_id":"turn_1","status":"complete","content":[{"type":"text","text":"/long 3"}]}`),
			json.RawMessage(`{"id":"msg_a","role":"assistant","turn_id":"turn_1","status":"cancelled","content":[{"type":"text","text":"Sentence 1 of 3. "}]}`),
		},
		SnapshotAtEventID: "evt_99999999999999999999999999",
	})
	h.update(client.Update{Kind: client.Resynced})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	if n := strings.Count(h.screen(), "Sentence 1 of 3."); n != 1 {
		t.Fatalf("text shown %d times:\n%s", n, h.screen())
	}
	h.contains("(cancelled)", "$0.5000")
	h.lacks("reconnecting")
}

func TestResumedHistoryRendersFromTheSnapshot(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"user","turn_id":"t1","status":"complete","content":[{"type":"text","text":"what is here?"}]}`),
			json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"thinking","thinking":"hmm"},{"type":"tool_use","id":"tu1","name":"list_dir","input":{"path":"."}}]}`),
			json.RawMessage(`{"id":"m3","role":"tool","turn_id":"t1","status":"complete","content":[{"type":"tool_result","tool_use_id":"tu1","content":"a.go\nb.go"}]}`),
			json.RawMessage(`{"id":"m4","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"text","text":"Two *Go* files."}]}`),
		},
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("› what is here?", "thinking… (3 chars)", `▸ list_dir {"path":"."}`, "✓ a.go", "Two Go files.", "idle · builtin:demo")
}

func TestCtrlCCancelsTheTurnInFlight(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "/long 300")
	h.messageStart("turn_1", "msg_a")
	h.frame()
	cmd := h.key(ctrlC)
	if cmd == nil {
		t.Fatal("ctrl-c in flight: no command")
	}
	if msg := cmd(); msg != (cancelSentMsg{}) {
		t.Fatalf("cancel answered %#v", msg)
	}
	if len(h.api.cancelled) != 1 || h.api.cancelled[0] != "turn_1" || h.api.reasons[0] != "user_cancel" {
		t.Fatalf("cancelled %v %v", h.api.cancelled, h.api.reasons)
	}
	h.contains("cancelling…")
	h.event("turn.cancelled", "turn_1", map[string]any{"reason": "user_cancel"})
	h.frame()
	h.lacks("cancelling…")
}

func TestCtrlCTwiceWhenIdleQuits(t *testing.T) {
	h := newHarness(t)
	if cmd := h.key(ctrlC); cmd == nil {
		t.Fatal("first ctrl-c: want the disarm timer")
	}
	h.contains("press ctrl-c again to quit")
	if len(h.api.cancelled) != 0 {
		t.Fatal("idle ctrl-c cancelled something")
	}
	cmd := h.key(ctrlC)
	if cmd == nil {
		t.Fatal("second ctrl-c: no command")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("second ctrl-c does not quit")
	}

	// Another key in between disarms.
	h = newHarness(t)
	h.key(ctrlC)
	h.key(tea.KeyPressMsg{Code: 'x', Text: "x"})
	h.lacks("press ctrl-c again")
	if cmd := h.key(ctrlC); cmd != nil {
		if _, ok := cmd().(tea.QuitMsg); ok {
			t.Fatal("quit after an intervening key")
		}
	}
}

func TestEnterSendsAndAltEnterAddsALine(t *testing.T) {
	h := newHarness(t)
	for _, r := range "line one" {
		h.key(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	h.key(altEnter)
	for _, r := range "two" {
		h.key(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	if got := h.m.composer.Value(); got != "line one\ntwo" {
		t.Fatalf("composer = %q", got)
	}
	cmd := h.key(enter)
	if cmd == nil {
		t.Fatal("enter: no command")
	}
	if h.m.composer.Value() != "" {
		t.Fatal("composer not cleared")
	}
	h.m.Update(cmd())
	if len(h.api.submitted) != 1 || h.api.submitted[0] != "line one\ntwo" {
		t.Fatalf("submitted %q", h.api.submitted)
	}
	if h.m.currentTurn() != "turn_1" {
		t.Fatalf("current turn %q", h.m.currentTurn())
	}
	// Enter always asks to queue: the server starts the turn at once
	// when the session is idle (followup_test.go tests a busy one).
	if r := h.api.requests[0]; !r.Queue || r.Steer {
		t.Fatalf("request %+v, want queue", r)
	}
	// The turn ends: idle again.
	h.turnStarted("turn_1", "line one\ntwo")
	h.event("turn.completed", "turn_1", map[string]any{"outcome": "completed"})
	h.frame()
	if h.m.currentTurn() != "" || h.m.busy() {
		t.Fatal("still busy after turn.completed")
	}
}

func TestInspectorListsRawEvents(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", "hi")
	h.event("route.decided", "turn_1", map[string]any{"model": "builtin:demo", "reason": "default"})
	h.frame()
	h.lacks("route.decided")
	h.key(f2)
	h.contains("events: 2 received", "turn.started", fmt.Sprintf("%-20s %s", "route.decided", `{"model":"builtin:demo","reason":"default"}`))
	if got := strings.Count(h.m.View().Content, "\n") + 1; got != 40 {
		t.Fatalf("screen is %d lines with the inspector, want 40", got)
	}
	h.key(f2)
	h.lacks("route.decided")
}

func TestScreenFitsTheTerminal(t *testing.T) {
	h := newHarness(t)
	h.turnStarted("turn_1", strings.Repeat("long words ", 50))
	h.messageStart("turn_1", "msg_a")
	md := "# Title\n\n" + strings.Repeat("markdown *words* ", 40) + "\n\n- item one\n- item two\n\n```go\nfunc main() {}\n```\n"
	h.complete("turn_1", "msg_a", "end_turn", textBlock(md), toolBlock("tu_1", "list_dir", map[string]string{"path": strings.Repeat("x", 300)}))
	h.frame()
	h.key(f2)
	for _, size := range [][2]int{{100, 40}, {40, 12}, {200, 60}} {
		h.m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		lines := strings.Split(h.screen(), "\n")
		if len(lines) != size[1] {
			t.Fatalf("%v: %d lines", size, len(lines))
		}
		for _, l := range lines {
			if w := ansi.StringWidth(l); w > size[0] {
				t.Fatalf("%v: line of %d cells: %q", size, w, l)
			}
		}
	}
}

func TestFollowEndingIsReported(t *testing.T) {
	h := newHarness(t)
	h.feed.ended(client.ErrSessionGone)
	h.frame()
	h.contains("disconnected", "the session does not exist")
	h.m.composer.SetValue("hello")
	if cmd := h.key(enter); cmd != nil {
		t.Fatal("sent without a stream")
	}
}

func TestNextFrameWaitsForTheFeedAndStopsWithTheProgram(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFeed()
	done := make(chan tea.Msg, 1)
	go func() { done <- nextFrame(ctx, f, time.Now(), false)() }()
	select {
	case <-done:
		t.Fatal("frame without anything to show")
	case <-time.After(3 * frameInterval):
	}
	f.add(item{kind: client.Resynced})
	select {
	case msg := <-done:
		if _, ok := msg.(frameMsg); !ok {
			t.Fatalf("got %#v", msg)
		}
	case <-time.After(time.Second):
		t.Fatal("no frame after a wake")
	}
	go func() { done <- nextFrame(ctx, f, time.Now(), true)() }()
	cancel()
	select {
	case msg := <-done:
		if msg != nil {
			t.Fatalf("after cancel: %#v", msg)
		}
	case <-time.After(time.Second):
		t.Fatal("nextFrame outlived its context")
	}
}

// A delegation rebuilt from a snapshot (no delegate.* events seen) is
// still drawn as a worker card, from the call's task and result.
func TestSnapshotDelegationIsAWorkerCard(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"user","turn_id":"t1","status":"complete","content":[{"type":"text","text":"delegate it"}]}`),
			json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"tool_use","id":"tu1","name":"delegate","input":{"task":"count the files"}}]}`),
			json.RawMessage(`{"id":"m3","role":"tool","turn_id":"t1","status":"complete","content":[{"type":"tool_result","tool_use_id":"tu1","content":"there are 2\nmain.go and go.mod"}]}`),
		},
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("⧉ worker : count the files — completed: there are 2")
	h.lacks("✓ there are 2")
	h.key(ctrlO)
	h.contains("task: count the files", "status: completed: there are 2", "main.go and go.mod", "╭")
}

// A resumed session whose snapshot held only the latest messages says
// so at the top; pgup there loads the older page in front, keeping the
// lines in view where they were, and the next pgup shows it.
func TestPgUpAtTheTopLoadsOlderMessages(t *testing.T) {
	h := newHarness(t)
	h.api.older = []json.RawMessage{
		json.RawMessage(`{"id":"m1","role":"user","turn_id":"t1","status":"complete","content":[{"type":"text","text":"the very first question"}]}`),
		json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"text","text":"the very first answer"}]}`),
	}
	// Enough later messages to fill more than the screen.
	later := []json.RawMessage{json.RawMessage(`{"id":"m3","role":"user","turn_id":"t2","status":"complete","content":[{"type":"text","text":"a later question"}]}`)}
	for i := range 30 {
		later = append(later, json.RawMessage(fmt.Sprintf(`{"id":"m%d","role":"assistant","turn_id":"t2","status":"complete","content":[{"type":"text","text":"later answer %d"}]}`, 4+i, i)))
	}
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session:           []byte(`{"id":"` + testSession + `","active_model":"builtin:demo"}`),
		Messages:          later,
		HasMoreMessages:   true,
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.lacks("↑ older messages") // the view starts at the bottom
	var cmd tea.Cmd
	for i := 0; cmd == nil; i++ {
		if i == 20 {
			t.Fatal("pgup at the top asked for nothing")
		}
		cmd = h.key(tea.KeyPressMsg{Code: tea.KeyPgUp})
	}
	if !h.m.vp.AtTop() {
		t.Fatal("asked for older messages before reaching the top")
	}
	h.frame()
	h.contains("a later question")
	h.contains("loading older messages…")
	h.m.Update(cmd())
	h.frame()
	if len(h.api.befores) != 1 || h.api.befores[0] != "m3" {
		t.Fatalf("Messages called with before=%v, want [m3]", h.api.befores)
	}
	h.lacks("↑ older messages", "loading older")
	h.contains("a later question")
	if h.m.vp.YOffset() == 0 {
		t.Fatal("the loaded page pushed the conversation down under the user")
	}
	for range 5 {
		if c := h.key(tea.KeyPressMsg{Code: tea.KeyPgUp}); c != nil {
			t.Fatal("asked for more although the server said there is none")
		}
	}
	h.contains("the very first question", "the very first answer")
	if got := len(h.m.view.Messages); got != 33 {
		t.Fatalf("%d messages in the view, want 33", got)
	}
}

// A snapshot that describes its workers gives the card its session id,
// model and cost; a worker whose call is not among the snapshot's
// messages gets no card of its own.
func TestSnapshotWorkersFillTheCard(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m2","role":"assistant","turn_id":"t1","status":"complete","content":[{"type":"tool_use","id":"tu1","name":"delegate","input":{"task":"count the files"}}]}`),
			json.RawMessage(`{"id":"m3","role":"tool","turn_id":"t1","status":"complete","content":[{"type":"tool_result","tool_use_id":"tu1","content":"there are 2"}]}`),
		},
		Workers: []protocol.SnapshotWorker{
			{SessionID: "sess_old", Task: "an older task", Model: "builtin:demo", Status: "completed", Summary: "old"},
			{SessionID: "sess_w1", Task: "count the files", Model: "builtin:demo", Status: "completed", Summary: "there are 2", CostUSD: 0.0021},
		},
		SnapshotAtEventID: "evt_00000000000000000000000009",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("⧉ worker sess_w1 : count the files — completed: there are 2")
	h.lacks("sess_old", "an older task")
	h.key(ctrlO)
	h.contains("⧉ worker sess_w1 (builtin:demo)", "cost: $0.0021")
}

// TestJoiningMidAnswerShowsItSoFarAndContinues: a snapshot taken while
// an answer streams holds it so far (contract §11): the TUI shows its
// text and the tool input streamed so far at once, then the deltas
// continue it without repeating anything.
func TestJoiningMidAnswerShowsItSoFarAndContinues(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo","current_turn_id":"turn_1","current_turn_status":"in_flight"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"msg_user","role":"user","turn_id":"turn_1","status":"complete","content":[{"type":"text","text":"/long 400"}]}`),
			json.RawMessage(`{"id":"msg_a","role":"assistant","turn_id":"turn_1","status":"streaming","content":[{"type":"text","text":"Sentence 1 of 400. Sentence 2 of 400."},{"type":"tool_use","id":"tu1","name":"read_file","input":{},"partial_input":"{\"path\": \"READ"}]}`),
		},
		SnapshotAtEventID: "evt_00000000000000000000000000",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("Sentence 1 of 400. Sentence 2 of 400.", `▸ read_file {"path": "READ …`)
	h.lacks("{}")
	h.event("tool.use_input_delta", "turn_1", map[string]any{"message_id": "msg_a", "content_block_index": 1, "tool_use_id": "tu1", "partial_json": `ME.md"}`})
	h.frame()
	h.contains(`▸ read_file {"path": "README.md"} …`)
	if n := strings.Count(h.screen(), "Sentence 1 of 400."); n != 1 {
		t.Fatalf("text shown %d times:\n%s", n, h.screen())
	}
}

// TestAnswerWhoseStartIsGoneSaysSo: a snapshot's streaming answer
// flagged start_missing is shown with a note that its start is not
// held, until message.complete brings it whole.
func TestAnswerWhoseStartIsGoneSaysSo(t *testing.T) {
	h := newHarness(t)
	v := client.NewView(nil)
	v.ApplySnapshot(&protocol.Snapshot{
		Session: []byte(`{"id":"` + testSession + `","active_model":"builtin:demo","current_turn_id":"turn_1","current_turn_status":"in_flight"}`),
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"msg_a","role":"assistant","turn_id":"turn_1","status":"streaming","start_missing":true,"content":[{"type":"text","text":" of 400. Sentence 60 of 400."}]}`),
		},
		SnapshotAtEventID: "evt_00000000000000000000000000",
	})
	h.update(client.Update{Kind: client.Subscribed, View: v})
	h.frame()
	h.contains("the start of this answer is no longer held", "Sentence 60 of 400.")
	h.complete("turn_1", "msg_a", "end_turn", textBlock("Sentence 1 of 400. … Sentence 60 of 400."))
	h.frame()
	h.lacks("no longer held")
	h.contains("Sentence 1 of 400.")
}
