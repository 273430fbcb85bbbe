package acp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Version is what initialize reports as the agent's version.
var Version = "dev"

// Agent implements the ACP agent side over a metis server.
type Agent struct {
	c     *client.Client
	log   *slog.Logger
	model string // model of new sessions ("" = the server's default)

	// ctx is the agent's lifetime: turns are followed under it, not under
	// the request's context, so that a session/cancel can still collect
	// the cancellation's events.
	ctx context.Context
	ui  editorState // the model chosen and requests rejected, per session (modes.go)
	// editorFS lets the session's file tools use the editor's files when
	// it offers them (--editor-fs); files holds the attachments
	// (editorfs.go).
	editorFS bool
	files    editorFiles
	// terms are the editor's terminals that mirror shell calls
	// (--editor-terminal, terminal.go).
	terms editorTerminals

	conn *sdk.AgentSideConnection

	mu    sync.Mutex
	turns map[string]*turn // session id → prompt in flight
	// watchers are the open sessions' standing followers (watch.go).
	watchers map[string]*watcher
	// mcpSessions are the sessions this agent gave MCP servers (mcp.go).
	mcpSessions map[string]bool
	stopping    bool
	inflight    sync.WaitGroup // prompts and loads running
}

var (
	_ sdk.Agent       = (*Agent)(nil)
	_ sdk.AgentLoader = (*Agent)(nil)
)

// newAgent returns an agent over c; conn is set by serve.
func newAgent(ctx context.Context, c *client.Client, model string, editorFS bool, log *slog.Logger) *Agent {
	return &Agent{c: c, log: log, model: model, ctx: ctx, editorFS: editorFS, turns: map[string]*turn{}, watchers: map[string]*watcher{}, mcpSessions: map[string]bool{}}
}

// httpTimeout bounds each API call a handler makes.
const httpTimeout = 30 * time.Second

// Initialize reports protocol version 1 and what metis supports: loading
// sessions, listing, resuming and closing them; prompts of text,
// resource links (the baseline every agent takes) and images.
func (a *Agent) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	a.offerFiles(p.ClientCapabilities.Fs)          // editorfs.go
	a.offerTerminal(p.ClientCapabilities.Terminal) // terminal.go
	title := "metis"
	return sdk.InitializeResponse{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:     true,
			McpCapabilities: mcpCapabilities, // mcp.go
			// Images go to the model as images (or a line of text to a
			// model without vision); audio and embedded binaries do not.
			PromptCapabilities: sdk.PromptCapabilities{Image: true},
			SessionCapabilities: sdk.SessionCapabilities{
				List:   &sdk.SessionListCapabilities{},
				Resume: &sdk.SessionResumeCapabilities{},
				Close:  &sdk.SessionCloseCapabilities{},
			},
		},
		AgentInfo:   &sdk.Implementation{Name: "metis", Title: &title, Version: Version},
		AuthMethods: []sdk.AuthMethod{},
	}, nil
}

// Authenticate has nothing to do: metis offers no auth methods (the
// server is local, or the client is configured for it).
func (a *Agent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

// NewSession creates a metis session whose workspace is the editor's cwd.
func (a *Agent) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return sdk.NewSessionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "cwd must be an absolute path"})
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	s, err := a.c.CreateSession(ctx, p.Cwd, a.model)
	if err != nil {
		return sdk.NewSessionResponse{}, apiError("create a session", err)
	}
	a.log.Info("session created", "session", s.ID, "workspace", s.WorkspacePath, "model", s.ActiveModel)
	if err := a.setMCP(ctx, s.ID, p.Cwd, p.McpServers, true); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	a.attachEditor(s.ID) // editorfs.go
	// The session is open: its standing follower subscribes, then the
	// state the answer gives is read (watch.go).
	if s, err = a.open(ctx, s.ID); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	modes, opts := a.sessionSetup(s)
	a.announceCommands(s.ID, true)
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(s.ID), Modes: modes, ConfigOptions: opts}, nil
}

// LoadSession replays a session's whole conversation as session/update
// notifications, then answers; a turn running meanwhile is replayed as
// far as it has streamed and followed live until it ends (see load).
func (a *Agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if !a.enter() {
		return sdk.LoadSessionResponse{}, errStopping
	}
	defer a.inflight.Done()
	sid := string(p.SessionId)
	if _, err := a.session(ctx, sid); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if err := a.setMCP(ctx, sid, p.Cwd, p.McpServers, false); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	a.attachEditor(sid) // before the replay: a turn it follows may read files
	if err := a.load(ctx, sid); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	s, err := a.open(ctx, sid)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	modes, opts := a.sessionSetup(s)
	a.announceCommands(s.ID, false)
	return sdk.LoadSessionResponse{Modes: modes, ConfigOptions: opts}, nil
}

// ResumeSession checks the session exists; metis keeps everything on the
// server, so there is nothing else to restore.
func (a *Agent) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	s, err := a.session(ctx, string(p.SessionId))
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	// mcpServers is optional here: absent, the session keeps its servers.
	if err := a.setMCP(ctx, string(p.SessionId), p.Cwd, p.McpServers, p.McpServers == nil); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	a.attachEditor(s.ID)
	if s, err = a.open(ctx, s.ID); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	modes, opts := a.sessionSetup(s)
	a.announceCommands(s.ID, false)
	return sdk.ResumeSessionResponse{Modes: modes, ConfigOptions: opts}, nil
}

// CloseSession cancels the session's turn if this agent runs one, and
// forgets it; a turn it only follows (after session/load) is left
// running. The session's standing follower has stopped by the answer:
// renames and mode changes are no longer sent. The session stays on
// the server.
func (a *Agent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	a.detachEditor(string(p.SessionId)) // editorfs.go
	a.unwatch(string(p.SessionId))      // watch.go
	a.mu.Lock()
	t := a.turns[string(p.SessionId)]
	a.mu.Unlock()
	switch {
	case t != nil && t.text == "" && t.compaction == nil:
		t.stop()
	case t != nil:
		t.requestCancel()
	}
	return sdk.CloseSessionResponse{}, nil
}

// ListSessions lists the server's top-level sessions (workers are shown
// inside their planner's delegate tool calls), newest first, filtered by
// cwd when given.
func (a *Agent) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	if p.Cursor != nil && *p.Cursor != "" {
		// Everything fits in one page: a cursor can only be stale.
		return sdk.ListSessionsResponse{}, sdk.NewInvalidParams(map[string]any{"error": "unknown cursor"})
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	all, err := a.c.Sessions(ctx)
	if err != nil {
		return sdk.ListSessionsResponse{}, apiError("list sessions", err)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	out := sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}
	for _, s := range all {
		if s.ParentSessionID != nil || (p.Cwd != nil && filepath.Clean(*p.Cwd) != filepath.Clean(s.WorkspacePath)) {
			continue
		}
		updated := s.CreatedAt.UTC().Format(time.RFC3339Nano)
		info := sdk.SessionInfo{
			SessionId: sdk.SessionId(s.ID), Cwd: s.WorkspacePath, UpdatedAt: &updated,
			Meta: map[string]any{"metis": map[string]any{"model": s.ActiveModel, "turn_count": s.TurnCount, "cost_usd": s.CostSoFarUSD}},
		}
		if s.Title != "" {
			info.Title = &s.Title
		}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

// Cancel cancels the session's turn on the server (the same cancel every
// other client of the session sees); the prompt then answers cancelled
// once the cancellation's events have been sent as updates.
func (a *Agent) Cancel(_ context.Context, p sdk.CancelNotification) error {
	a.mu.Lock()
	t := a.turns[string(p.SessionId)]
	a.mu.Unlock()
	if t != nil {
		t.requestCancel()
	}
	return nil
}

// session fetches a session's summary, answering a missing one with
// resource not found.
func (a *Agent) session(ctx context.Context, sid string) (client.Session, error) {
	if sid == "" {
		return client.Session{}, sdk.NewInvalidParams(map[string]any{"error": "sessionId is required"})
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	at, err := a.c.Attach(ctx, sid)
	if err != nil {
		return client.Session{}, apiError("session "+sid, err)
	}
	return at.Session, nil
}

// codeResourceNotFound is ACP's error code for an unknown resource.
const codeResourceNotFound = -32002

// apiError turns an error of the metis API into a JSON-RPC error: a 404
// is resource not found, a 4xx invalid params, anything else an internal
// error, each with the server's code and message as data.
func apiError(what string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		data := map[string]any{"metis_code": ae.Code, "error": ae.Message}
		switch {
		case ae.Status == 404:
			return &sdk.RequestError{Code: codeResourceNotFound, Message: what + ": not found", Data: data}
		case ae.Status == 409:
			return &sdk.RequestError{Code: codeInvalidRequest, Message: what + ": " + ae.Message, Data: data}
		case ae.Status >= 400 && ae.Status < 500:
			return &sdk.RequestError{Code: -32602, Message: what + ": " + ae.Message, Data: data}
		}
		return &sdk.RequestError{Code: -32603, Message: what + ": " + ae.Message, Data: data}
	}
	return sdk.NewInternalError(map[string]any{"error": fmt.Sprintf("%s: %v", what, err)})
}

// promptText flattens a prompt into the text and images of a metis
// turn: text blocks as they are, resource links as markdown links,
// embedded text resources as fenced blocks, image blocks (base64 data,
// as initialize's promptCapabilities.image offers) as the turn's images,
// checked by the server. Audio, binary resources and images given only
// by a URI are refused. A prompt of images alone is sent with a line of
// text saying so (a metis turn needs text).
func promptText(blocks []sdk.ContentBlock) (string, []protocol.ImageInput, error) {
	var (
		parts []string
		imgs  []protocol.ImageInput
	)
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			name := b.ResourceLink.Name
			if name == "" {
				name = b.ResourceLink.Uri
			}
			parts = append(parts, fmt.Sprintf("[%s](%s)", name, b.ResourceLink.Uri))
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			parts = append(parts, fmt.Sprintf("%s:\n```\n%s\n```", r.Uri, r.Text))
		case b.Image != nil:
			data, err := base64.StdEncoding.DecodeString(b.Image.Data)
			if err != nil || len(data) == 0 {
				return "", nil, sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("image %d: data must be base64 (metis does not fetch an image's uri)", len(imgs)+1)})
			}
			imgs = append(imgs, protocol.ImageInput{MediaType: b.Image.MimeType, Data: data})
		default:
			return "", nil, sdk.NewInvalidParams(map[string]any{"error": "metis takes text, images and resource links only"})
		}
	}
	text := strings.Join(parts, "\n")
	if strings.TrimSpace(text) == "" {
		if len(imgs) == 0 {
			return "", nil, sdk.NewInvalidParams(map[string]any{"error": "the prompt is empty"})
		}
		text = imagesOnly
	}
	return text, imgs, nil
}

// imagesOnly is the text of a prompt of images alone.
const imagesOnly = "(images attached)"
