package acp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// summary reads a session's summary from the server.
func summary(t *testing.T, h *servertest.Harness, sid string) client.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	at, err := newTestClient(t, h.URL).Attach(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	return at.Session
}

// routedModels are the models the session's turns ran on, in order.
func routedModels(h *servertest.Harness, sid string) []string {
	var out []string
	for _, ev := range h.Live.Events(sid) {
		if ev.Type == event.Type(protocol.EventRouteDecided) {
			var p struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			out = append(out, p.Model)
		}
	}
	return out
}

// withSecondModel registers the demo model a second time, as provider
// "other", so that a session has a model to switch to.
func withSecondModel(t *testing.T, h *servertest.Harness) {
	t.Helper()
	demo, err := h.Server.Models.Resolve("builtin:demo")
	if err != nil {
		t.Fatal(err)
	}
	h.Server.Models.Register("other", demo)
}

func selectOption(opts []sdk.SessionConfigOption, id sdk.SessionConfigId) *sdk.SessionConfigOptionSelect {
	for _, o := range opts {
		if o.Select != nil && o.Select.Id == id {
			return o.Select
		}
	}
	return nil
}

func optionValues(o *sdk.SessionConfigOptionSelect) []string {
	var out []string
	if o != nil && o.Options.Ungrouped != nil {
		for _, v := range *o.Options.Ungrouped {
			out = append(out, string(v.Value))
		}
	}
	return out
}

// session/new answers with the session's modes (the four metis modes,
// the session's current) and its config options (mode, and model with
// the session's model among the choices), then sends metis's slash
// commands.
func TestNewSessionOffersModesConfigAndCommands(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.Workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Modes == nil || r.Modes.CurrentModeId != "auto" || len(r.Modes.AvailableModes) != 4 {
		t.Fatalf("modes %+v", r.Modes)
	}
	var ids []string
	for _, m := range r.Modes.AvailableModes {
		ids = append(ids, string(m.Id))
	}
	if want := []string{"default", "accept_edits", "plan", "auto"}; !slices.Equal(ids, want) {
		t.Errorf("modes %v, want %v", ids, want)
	}
	mode, model := selectOption(r.ConfigOptions, configMode), selectOption(r.ConfigOptions, configModel)
	if mode == nil || mode.CurrentValue != "auto" || len(optionValues(mode)) != 4 || *mode.Category != sdk.SessionConfigOptionCategoryMode {
		t.Errorf("mode option %+v", mode)
	}
	if model == nil || model.CurrentValue != "builtin:demo" || !slices.Contains(optionValues(model), "builtin:demo") ||
		*model.Category != sdk.SessionConfigOptionCategoryModel {
		t.Errorf("model option %+v", model)
	}
	s.ed.waitFor(t, "available_commands_update", func(us []sdk.SessionUpdate) bool {
		return count(us, func(u sdk.SessionUpdate) bool { return u.AvailableCommandsUpdate != nil }) > 0
	})
	var names []string
	for _, u := range s.ed.all() {
		if u.AvailableCommandsUpdate != nil {
			for _, c := range u.AvailableCommandsUpdate.AvailableCommands {
				names = append(names, c.Name)
			}
		}
	}
	if want := []string{"compact", "mode", "model", "help"}; !slices.Equal(names, want) {
		t.Errorf("commands %v, want %v", names, want)
	}
}

// session/set_mode changes the session's mode on the server (every
// client sees it) and sends the config options again; an unknown mode
// is invalid params and changes nothing.
func TestSetModeChangesTheSession(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s, sid := openSession(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sdk.SessionId(sid), ModeId: "plan"}); err != nil {
		t.Fatal(err)
	}
	if m := summary(t, h, sid).Mode; m != "plan" {
		t.Fatalf("mode %q", m)
	}
	s.ed.waitFor(t, "config_option_update(plan)", func(us []sdk.SessionUpdate) bool {
		return count(us, func(u sdk.SessionUpdate) bool {
			return u.ConfigOptionUpdate != nil && selectOption(u.ConfigOptionUpdate.ConfigOptions, configMode).CurrentValue == "plan"
		}) == 1
	})
	_, err := s.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sdk.SessionId(sid), ModeId: "yolo"})
	var re *sdk.RequestError
	if !asRequestError(err, &re) || re.Code != -32602 {
		t.Fatalf("unknown mode: %v", err)
	}
	if m := summary(t, h, sid).Mode; m != "plan" {
		t.Fatalf("mode %q after a refused change", m)
	}
	// The mode as a config option does the same.
	cr, err := s.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
		SessionId: sdk.SessionId(sid), ConfigId: configMode, Value: "accept_edits"}})
	if err != nil || selectOption(cr.ConfigOptions, configMode).CurrentValue != "accept_edits" {
		t.Fatalf("set_config_option mode: %+v %v", cr, err)
	}
	if m := summary(t, h, sid).Mode; m != "accept_edits" {
		t.Fatalf("mode %q", m)
	}
}

// The model config option chooses the model of the session's next
// turns: each prompt then runs on it (the server strips the "/model"
// the agent puts in front, so the stored prompt is the user's own);
// choosing the session's own model again clears the choice. An id that
// is not provider:model is invalid params.
func TestModelConfigOption(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	withSecondModel(t, h)
	s, sid := openSession(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	set := func(v string) (sdk.SetSessionConfigOptionResponse, error) {
		return s.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
			SessionId: sdk.SessionId(sid), ConfigId: configModel, Value: sdk.SessionConfigValueId(v)}})
	}
	r, err := set("other:demo")
	if err != nil {
		t.Fatal(err)
	}
	if m := selectOption(r.ConfigOptions, configModel); m.CurrentValue != "other:demo" || !slices.Contains(optionValues(m), "builtin:demo") {
		t.Fatalf("model option %+v", m)
	}
	mustPrompt(t, s, sid, "/echo on the other model")
	if _, err := set("builtin:demo"); err != nil {
		t.Fatal(err)
	}
	mustPrompt(t, s, sid, "/echo back")
	if got := routedModels(h, sid); !slices.Equal(got, []string{"other:demo", "builtin:demo"}) {
		t.Errorf("turns ran on %v", got)
	}
	page, _, err := newTestClient(t, h.URL).Messages(ctx, sid, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if ms := decodeMessages(page); len(ms) == 0 || ms[0].Content[0].Text != "/echo on the other model" {
		t.Errorf("stored prompt %+v", ms[0].Content[0])
	}
	if _, err := set("no model"); err == nil {
		t.Error("a malformed model id was taken")
	}
	if _, err := s.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
		SessionId: sdk.SessionId(sid), ConfigId: "colour", Value: "red"}}); err == nil {
		t.Error("an unknown option was taken")
	}
}

// The model option lists the server's models (GET /models: its
// default, its models, the providers it cannot use), not only the
// models sessions use.
func TestModelOptionListsTheServersModels(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	// A provider with a key: its default model is one no session uses.
	demo, err := h.Server.Models.Resolve("builtin:demo")
	if err != nil {
		t.Fatal(err)
	}
	h.Server.Models.Register("anthropic", demo)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	list, err := newTestClient(t, h.URL).Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fresh string
	for _, m := range list.Models {
		if m.Provider == "anthropic" {
			fresh = m.ID
		}
	}
	if fresh == "" || len(list.Unavailable) == 0 {
		t.Fatalf("GET /models = %+v: want an anthropic model and an unavailable provider", list)
	}
	s := serveAgent(t, h.URL)
	s.initialize(t)
	r, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.Workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	m := selectOption(r.ConfigOptions, configModel)
	values := optionValues(m)
	for _, want := range append([]string{list.Default}, fresh) {
		if !slices.Contains(values, want) {
			t.Errorf("model choices %v lack %s", values, want)
		}
	}
	for _, u := range list.Unavailable {
		if m.Description == nil || !strings.Contains(*m.Description, u.Provider+" (") {
			t.Errorf("the model option's description %v does not name the unavailable %s", m.Description, u.Provider)
		}
	}
}

// metis's slash commands run in the agent and never reach the model:
// /mode shows and changes the mode (current_mode_update follows), /model
// chooses the model, /help lists them; no turn runs for any of them.
// "/model X text" is the server's per-turn override and goes through,
// as does any other "/word" (the demo's /echo).
func TestSlashCommands(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	withSecondModel(t, h)
	s, sid := openSession(t, h)
	reply := func(text string) string {
		t.Helper()
		before := len(agentText(s.ed.all()))
		r := mustPrompt(t, s, sid, text)
		if r.StopReason != sdk.StopReasonEndTurn {
			t.Fatalf("%s: stop reason %q", text, r.StopReason)
		}
		return agentText(s.ed.all())[before:]
	}
	if got := reply("/mode"); got != "Mode: auto (default, accept_edits, plan or auto)." {
		t.Errorf("/mode: %q", got)
	}
	if got := reply("/mode plan"); got != "Mode: plan." {
		t.Errorf("/mode plan: %q", got)
	}
	if m := summary(t, h, sid).Mode; m != "plan" {
		t.Errorf("mode %q", m)
	}
	// The session's follower sends the change, as for one made
	// elsewhere: once.
	s.ed.waitFor(t, "current_mode_update(plan)", func(us []sdk.SessionUpdate) bool { return countModeUpdates(us, "plan") > 0 })
	fence(t, h, s, sid, "fence")
	if n := countModeUpdates(s.ed.all(), "plan"); n != 1 {
		t.Errorf("%d current_mode_update(plan)", n)
	}
	if got := reply("/help"); !strings.Contains(got, "/compact") || !strings.Contains(got, "/model") {
		t.Errorf("/help: %q", got)
	}
	if got := reply("/model other:demo"); got != "Model: other:demo (from the next turn on)." {
		t.Errorf("/model other:demo: %q", got)
	}
	if got := reply("/model"); !strings.HasPrefix(got, "Model: other:demo. Available: other:demo, builtin:demo") {
		t.Errorf("/model: %q", got)
	}
	if n := summary(t, h, sid).TurnCount; n != 0 {
		t.Fatalf("%d turns ran for the commands", n)
	}
	if got := reply("/model builtin:demo /echo per turn"); got != "per turn" {
		t.Errorf("per-turn override: %q", got)
	}
	if got := reply("/echo chosen"); got != "chosen" {
		t.Errorf("/echo: %q", got)
	}
	if got := routedModels(h, sid); !slices.Equal(got, []string{"builtin:demo", "other:demo"}) {
		t.Errorf("turns ran on %v", got)
	}
	if _, err := s.prompt(context.Background(), sid, "/mode yolo"); err == nil {
		t.Error("/mode yolo was taken")
	}
}

// /compact compacts the conversation on the server and is followed like
// a turn: a line when it starts, one when it ends, the conversation's
// new size as a usage_update, and end_turn.
func TestCompactCommand(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	notes := strings.Repeat("note: the build takes a while; keep the cache warm and the tests short\n", 60)
	if err := os.WriteFile(filepath.Join(h.Workspace, "notes.txt"), []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	s, sid := openSession(t, h)
	for i := range 6 {
		if i%2 == 0 {
			mustPrompt(t, s, sid, `/tool read_file {"path": "notes.txt"}`)
		} else {
			mustPrompt(t, s, sid, "what is in the workspace?")
		}
	}
	before := len(s.ed.all())
	t.Cleanup(func() {
		if t.Failed() {
			for _, ev := range h.Live.Events(sid) {
				if event.FamilyOf(ev.Type) == event.Catalog {
					t.Logf("%s %s %s", ev.Type, ev.TurnID, ev.Payload)
				}
			}
		}
	})
	r := mustPrompt(t, s, sid, "/compact keep the sentence numbers")
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	us := s.ed.all()[before:]
	text := agentText(us)
	if !strings.HasPrefix(text, "Compacting the conversation (") || !strings.Contains(text, "Compacted (") {
		t.Fatalf("text %q", text)
	}
	if count(us, func(u sdk.SessionUpdate) bool { return u.UsageUpdate != nil && u.UsageUpdate.Used > 0 }) != 1 {
		t.Errorf("updates %s", describe(us))
	}
	// The server's own recorder may see the event after the editor did.
	servertest.WaitFor(t, "context.compacted on the server", func() bool {
		for _, ev := range h.Live.Events(sid) {
			if ev.Type == event.Type(protocol.EventContextCompacted) {
				return true
			}
		}
		return false
	})
}

// asRequestError reports whether err is a JSON-RPC error.
func asRequestError(err error, re **sdk.RequestError) bool {
	e, ok := err.(*sdk.RequestError)
	if ok {
		*re = e
	}
	return ok
}

// TestRenameElsewhereIsSessionInfoUpdate: another client renames the
// session while a prompt's turn runs (here: while the editor is asked
// for a permission): the editor gets session_info_update with the new
// title; an archive alone sends nothing (the fence's rename is the only
// other), and session/list has the latest title.
func TestRenameElsewhereIsSessionInfoUpdate(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	s.ed.allowingAfter(func() {
		if st := h.Do("PATCH", "/sessions/"+sid, map[string]any{"archived": true}, nil); st != 200 {
			t.Errorf("PATCH archived: %d", st)
		}
		renameElsewhere(t, h, sid, "renamed   elsewhere")
	})
	if r := mustPrompt(t, s, sid, shellPrompt("echo renamed")); r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	fence(t, h, s, sid, "fence")
	us := s.ed.all()
	if n, got := count(us, func(u sdk.SessionUpdate) bool { return u.SessionInfoUpdate != nil }), titles(us); n != 2 || !slices.Equal(got, []string{"renamed elsewhere", "fence"}) {
		t.Fatalf("%d session_info_update, titles %q; updates %s", n, got, describe(us))
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	list, err := s.conn.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &h.Workspace})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Title == nil || *list.Sessions[0].Title != "fence" {
		t.Fatalf("session/list: %+v, %v", list, err)
	}
}
