package acp

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// A metis session's permission mode is an ACP session mode (modes in
// the answers of session/new, session/load and session/resume;
// session/set_mode → PATCH /sessions/{id} {"mode"}; session.mode_changed
// seen on the session's stream, whoever changed it → current_mode_update
// and config_option_update, sent by the session's standing follower,
// watch.go). The mode and the model are also offered as session config
// options (category mode and model), the newer ACP form; both forms are
// kept in step.

// Config option ids.
const (
	configMode  = sdk.SessionConfigId("mode")
	configModel = sdk.SessionConfigId("model")
)

// editorState is what the agent keeps per session for the editor, for
// as long as it runs: the model chosen in the editor and the kinds of
// request the user rejected for the session.
type editorState struct {
	mu         sync.Mutex
	models     map[string]string          // session id → model chosen in the editor
	rejections map[string]map[string]bool // session id → rulesKey → rejected
}

// chosenModel is the model the editor chose for the session ("": none).
func (e *editorState) chosenModel(sid string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.models[sid]
}

func (e *editorState) chooseModel(sid, model string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.models == nil {
		e.models = map[string]string{}
	}
	e.models[sid] = model
}

// modeInfo describes the four modes to the editor.
var modeInfo = []struct{ id, name, description string }{
	{protocol.ModeDefault, "Default", "Reads run; file changes, commands, fetches and MCP tools ask first"},
	{protocol.ModeAcceptEdits, "Accept edits", "File changes inside the workspace run; commands ask first"},
	{protocol.ModePlan, "Plan", "Read-only: tools that change files or run commands are refused"},
	{protocol.ModeAuto, "Auto", "Nothing asks (the shell sandbox still applies)"},
}

// modeState is the session's mode state for the editor.
func modeState(current string) *sdk.SessionModeState {
	if current == "" {
		current = protocol.ModeDefault
	}
	st := &sdk.SessionModeState{CurrentModeId: sdk.SessionModeId(current)}
	for _, m := range modeInfo {
		st.AvailableModes = append(st.AvailableModes, sdk.SessionMode{Id: sdk.SessionModeId(m.id), Name: m.name, Description: sdk.Ptr(m.description)})
	}
	return st
}

// configOptions are the session's config options: its mode and the
// model its turns run on (the model chosen in the editor, else the
// session's).
func configOptions(mode, model string, models modelChoices) []sdk.SessionConfigOption {
	if mode == "" {
		mode = protocol.ModeDefault
	}
	var modes sdk.SessionConfigSelectOptionsUngrouped
	for _, m := range modeInfo {
		modes = append(modes, sdk.SessionConfigSelectOption{Value: sdk.SessionConfigValueId(m.id), Name: m.name, Description: sdk.Ptr(m.description)})
	}
	var ms sdk.SessionConfigSelectOptionsUngrouped
	for _, m := range models.ids {
		o := sdk.SessionConfigSelectOption{Value: sdk.SessionConfigValueId(m), Name: m}
		if m == models.def {
			o.Description = sdk.Ptr("the server's default")
		}
		ms = append(ms, o)
	}
	desc := "The model the next turns run on"
	if len(models.unavailable) > 0 {
		desc += ". Unavailable: " + strings.Join(models.unavailable, "; ")
	}
	return []sdk.SessionConfigOption{
		{Select: &sdk.SessionConfigOptionSelect{Id: configMode, Name: "Mode", Type: "select",
			Category: sdk.Ptr(sdk.SessionConfigOptionCategoryMode), CurrentValue: sdk.SessionConfigValueId(mode),
			Description: sdk.Ptr("When tools ask for permission"), Options: sdk.SessionConfigSelectOptions{Ungrouped: &modes}}},
		{Select: &sdk.SessionConfigOptionSelect{Id: configModel, Name: "Model", Type: "select",
			Category: sdk.Ptr(sdk.SessionConfigOptionCategoryModel), CurrentValue: sdk.SessionConfigValueId(model),
			Description: sdk.Ptr(desc), Options: sdk.SessionConfigSelectOptions{Ungrouped: &ms}}},
	}
}

// sessionSetup is what session/new, session/load and session/resume
// answer with: the modes and the config options of session s.
func (a *Agent) sessionSetup(s client.Session) (*sdk.SessionModeState, []sdk.SessionConfigOption) {
	model := a.ui.chosenModel(s.ID)
	if model == "" {
		model = s.ActiveModel
	}
	return modeState(s.Mode), configOptions(s.Mode, model, a.modelChoices(s, model))
}

// modelChoices are the models offered for a session, and the providers
// the server cannot use.
type modelChoices struct {
	ids         []string
	def         string   // the server's default model
	unavailable []string // "provider (reason)"
}

// modelsTimeout bounds the GET /models behind the model choices.
const modelsTimeout = 5 * time.Second

// modelChoices are the models offered for a session: the one chosen
// and the session's own (they are in use), then the server's models
// (GET /models: its default first), each once. When the server cannot
// be asked, the agent's --model and builtin:demo stand for its list.
func (a *Agent) modelChoices(s client.Session, chosen string) modelChoices {
	var out modelChoices
	add := func(m string) {
		if m != "" && !slices.Contains(out.ids, m) {
			out.ids = append(out.ids, m)
		}
	}
	add(chosen)
	add(s.ActiveModel)
	ctx, cancel := context.WithTimeout(a.ctx, modelsTimeout)
	defer cancel()
	list, err := a.c.Models(ctx)
	if err != nil {
		a.log.Debug("GET /models", "err", err)
		add(a.model)
		add(demoModel)
		return out
	}
	out.def = list.Default
	add(list.Default)
	for _, m := range list.Models {
		add(m.ID)
	}
	for _, u := range list.Unavailable {
		out.unavailable = append(out.unavailable, u.Provider+" ("+u.Reason+")")
	}
	return out
}

// SetSessionMode changes the session's permission mode on the server;
// every client of the session sees session.mode_changed, this editor
// too: the session's standing follower sends it current_mode_update
// and the config options again (they hold the mode too).
func (a *Agent) SetSessionMode(ctx context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	if _, err := a.setMode(ctx, string(p.SessionId), string(p.ModeId)); err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	return sdk.SetSessionModeResponse{}, nil
}

// setMode changes the mode; the updates follow from the stream.
func (a *Agent) setMode(ctx context.Context, sid, mode string) (client.Session, error) {
	if sid == "" {
		return client.Session{}, sdk.NewInvalidParams(map[string]any{"error": "sessionId is required"})
	}
	if !protocol.ValidMode(mode) {
		return client.Session{}, sdk.NewInvalidParams(map[string]any{"error": "unknown mode " + quote(mode) + ": default, accept_edits, plan or auto"})
	}
	hctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	s, err := a.c.SetMode(hctx, sid, mode)
	if err != nil {
		return client.Session{}, apiError("set the mode", err)
	}
	a.log.Info("mode changed", "session", sid, "mode", s.Mode)
	return s, nil
}

// SetSessionConfigOption sets the mode (as session/set_mode does) or the
// model of the session's next turns, and answers with every option.
func (a *Agent) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	v := p.ValueId
	if v == nil {
		return sdk.SetSessionConfigOptionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "metis's config options take a value id"})
	}
	sid := string(v.SessionId)
	var (
		s   client.Session
		err error
	)
	switch v.ConfigId {
	case configMode:
		if s, err = a.setMode(ctx, sid, string(v.Value)); err != nil {
			return sdk.SetSessionConfigOptionResponse{}, err
		}
	case configModel:
		if s, err = a.setModel(ctx, sid, string(v.Value)); err != nil {
			return sdk.SetSessionConfigOptionResponse{}, err
		}
	default:
		return sdk.SetSessionConfigOptionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "unknown config option " + quote(string(v.ConfigId)) + ": mode or model"})
	}
	_, opts := a.sessionSetup(s)
	return sdk.SetSessionConfigOptionResponse{ConfigOptions: opts}, nil
}

// setModel makes model the one the session's next turns run on: each
// prompt is sent with a leading "/model <model>" (docs/routing.md),
// which the server checks (an unusable model is refused before the turn
// starts) and strips from the stored message. A model the session has
// already clears the choice.
func (a *Agent) setModel(ctx context.Context, sid, model string) (client.Session, error) {
	s, err := a.session(ctx, sid)
	if err != nil {
		return client.Session{}, err
	}
	if !validModelID(model) {
		return client.Session{}, sdk.NewInvalidParams(map[string]any{"error": "a model is provider:model, e.g. anthropic:claude-sonnet-4-6; got " + quote(model)})
	}
	if model == s.ActiveModel {
		model = ""
	}
	a.ui.chooseModel(sid, model)
	a.log.Info("model chosen", "session", sid, "model", model)
	a.sendConfig(ctx, s)
	return s, nil
}

// sendConfig sends the session's config options as a
// config_option_update.
func (a *Agent) sendConfig(ctx context.Context, s client.Session) {
	if a.conn == nil {
		return
	}
	_, opts := a.sessionSetup(s)
	if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sdk.SessionId(s.ID),
		Update: sdk.SessionUpdate{ConfigOptionUpdate: &sdk.SessionConfigOptionUpdate{ConfigOptions: opts}}}); err != nil {
		a.log.Debug("send the config options", "session", s.ID, "err", err)
	}
}
