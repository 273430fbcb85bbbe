package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// fakeAPI records the model's calls instead of reaching a server.
type fakeAPI struct {
	mu        sync.Mutex
	submitted []string
	cancelled []string // turn ids
	reasons   []string
	turn      string
	older     []json.RawMessage // what Messages returns
	befores   []string          // the before of each Messages call
	answers   []protocol.ApprovalAnswer
	approved  []string // approval ids
	modes     []string
	compacts  []string // instructions
	sessions  []client.Session
	created   []client.CreateOptions
	requests  []client.TurnRequest // every SubmitTurn's request
	accept    *client.TurnAccepted // SubmitTurn's answer (nil: a turn started, f.turn)
	submitErr error                // SubmitTurn's error
	models    client.ModelList     // what Models returns
	turns     client.TurnList      // what Turns returns
	reverted  []string             // turn ids Revert was called with
	revertErr error                // Revert's error
	restored  []string             // checkpoint ids RestoreCheckpoint was called with
	forks     []client.ForkRequest // Fork's requests
	mcp       client.MCPStatus     // what MCP returns
	title     string               // the session summary's title Attach returns
	attaches  int                  // Attach calls
}

func (f *fakeAPI) Attach(_ context.Context, sid string) (client.Attach, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attaches++
	var a client.Attach
	a.SessionID, a.Session.ID, a.Session.Title = sid, sid, f.title
	return a, nil
}

func (f *fakeAPI) Models(context.Context) (client.ModelList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.models, nil
}

func (f *fakeAPI) Turns(context.Context, string, string, int) (client.TurnList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.turns, nil
}

func (f *fakeAPI) Revert(_ context.Context, _, turn string) (client.RevertResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reverted = append(f.reverted, turn)
	if f.revertErr != nil {
		return client.RevertResult{}, f.revertErr
	}
	return client.RevertResult{Trigger: "revert", TurnID: turn, UndoCheckpointID: "cp_undo", Restored: []string{"a.txt"}}, nil
}

func (f *fakeAPI) RestoreCheckpoint(_ context.Context, _, cp string) (client.RevertResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restored = append(f.restored, cp)
	return client.RevertResult{Trigger: "undo", CheckpointID: cp}, nil
}

func (f *fakeAPI) Fork(_ context.Context, _ string, req client.ForkRequest) (client.ForkResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forks = append(f.forks, req)
	var r client.ForkResult
	r.ID = "sess_FORK"
	if req.Checkpoint {
		r.Restored = &client.RevertResult{Trigger: protocol.RevertFork, Restored: []string{"a.go", "b.go"}, Removed: []string{"c.go"}}
	}
	return r, nil
}

func (f *fakeAPI) MCP(context.Context) (client.MCPStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mcp, nil
}

func (f *fakeAPI) Approve(_ context.Context, _, id string, ans protocol.ApprovalAnswer) (client.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.approved = append(f.approved, id)
	f.answers = append(f.answers, ans)
	return client.Resolution{ApprovalID: id, Decision: ans.Decision}, nil
}

func (f *fakeAPI) SetMode(_ context.Context, sid, mode string) (client.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.modes = append(f.modes, mode)
	return client.Session{ID: sid, Mode: mode}, nil
}

func (f *fakeAPI) Compact(_ context.Context, _, instructions string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacts = append(f.compacts, instructions)
	return "cmp_1", nil
}

func (f *fakeAPI) Sessions(context.Context) ([]client.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions, nil
}

func (f *fakeAPI) Create(_ context.Context, o client.CreateOptions) (client.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, o)
	return client.Session{ID: "sess_NEW", WorkspacePath: o.Workspace}, nil
}

func (f *fakeAPI) Messages(_ context.Context, _, before string, _ int) ([]json.RawMessage, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.befores = append(f.befores, before)
	return f.older, false, nil
}

func (f *fakeAPI) SubmitTurn(_ context.Context, _ string, req client.TurnRequest) (client.TurnAccepted, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submitted = append(f.submitted, req.Content)
	f.requests = append(f.requests, req)
	if f.submitErr != nil {
		return client.TurnAccepted{}, f.submitErr
	}
	if f.accept != nil {
		return *f.accept, nil
	}
	return client.TurnAccepted{TurnID: f.turn, MessageID: "msg_user_" + f.turn}, nil
}

func (f *fakeAPI) Cancel(_ context.Context, _, turn, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, turn)
	f.reasons = append(f.reasons, reason)
	return nil
}

const testSession = "sess_01TEST0000000000000000000"

// harness is a model without a terminal: events go in through its feed,
// frames are stepped by hand, and the screen is read from View().
type harness struct {
	t    *testing.T
	m    *Model
	feed *feed
	api  *fakeAPI
	n    int // event ids
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	api := &fakeAPI{turn: "turn_1"}
	f := newFeed()
	m := newModel(ctx, api, f, options{sessionID: testSession, workspace: "/ws"})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	h := &harness{t: t, m: m, feed: f, api: api}
	h.update(client.Update{Kind: client.Subscribed, View: client.NewView(nil)})
	h.frame()
	return h
}

// event queues one event as Follow would deliver it.
func (h *harness) event(typ, turn string, payload any) *protocol.EventEnvelope {
	h.n++
	raw, err := json.Marshal(payload)
	if err != nil {
		h.t.Fatal(err)
	}
	var tid *string
	if turn != "" {
		tid = &turn
	}
	ev := &protocol.EventEnvelope{ID: fmt.Sprintf("evt_%026d", h.n), Type: typ, SessionID: testSession, TurnID: tid,
		TS: time.Now().UTC().Format(time.RFC3339Nano), Actor: "model", Payload: raw}
	h.update(client.Update{Kind: client.EventApplied, Event: ev})
	return ev
}

func (h *harness) update(u client.Update) { h.feed.push(u) }

// frame delivers one frame tick.
func (h *harness) frame() { h.m.Update(frameMsg{}) }

// frameTitle delivers one frame and, when it asks the server for the
// title, the answer.
func (h *harness) frameTitle() {
	h.m.frame(time.Now())
	cmd := h.m.titleFetch()
	if cmd == nil {
		h.t.Fatal("the title was not asked for")
	}
	h.m.Update(cmd())
}

// key presses a key; it returns the command the model asked for.
func (h *harness) key(k tea.KeyPressMsg) tea.Cmd {
	_, cmd := h.m.Update(k)
	return cmd
}

// raw is the whole screen with its styling; screen is its text, without
// the spaces that pad lines to the width.
func (h *harness) raw() string { return h.m.View().Content }

func (h *harness) screen() string {
	lines := strings.Split(ansi.Strip(h.raw()), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func (h *harness) contains(want ...string) {
	h.t.Helper()
	s := h.screen()
	for _, w := range want {
		if !strings.Contains(s, w) {
			h.t.Fatalf("screen lacks %q:\n%s", w, s)
		}
	}
}

func (h *harness) lacks(unwanted ...string) {
	h.t.Helper()
	s := h.screen()
	for _, w := range unwanted {
		if strings.Contains(s, w) {
			h.t.Fatalf("screen has %q:\n%s", w, s)
		}
	}
}

// line returns the styled screen line whose text contains s.
func (h *harness) line(s string) string {
	h.t.Helper()
	for _, l := range strings.Split(h.raw(), "\n") {
		if strings.Contains(ansi.Strip(l), s) {
			return l
		}
	}
	h.t.Fatalf("no line contains %q:\n%s", s, h.screen())
	return ""
}

// Events of a turn, as the agent loop emits them.

func (h *harness) turnStarted(turn, text string) {
	h.event("turn.started", turn, map[string]any{"user_message": map[string]any{
		"id": "msg_user_" + turn, "role": "user", "status": "complete",
		"content": []map[string]any{{"type": "text", "text": text}}}})
}

func (h *harness) messageStart(turn, msg string) {
	h.event("message.start", turn, map[string]any{"message_id": msg, "role": "assistant", "model": "builtin:demo"})
}

func (h *harness) textDelta(turn, msg string, index int, text string) {
	h.event("text.delta", turn, map[string]any{"message_id": msg, "content_block_index": index, "text": text})
}

func (h *harness) complete(turn, msg, stop string, blocks ...map[string]any) {
	h.event("message.complete", turn, map[string]any{"message_id": msg, "stop_reason": stop, "final_content": blocks,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 7, "cost_usd": 0}})
}

func textBlock(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func toolBlock(id, name string, input any) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}
}
