package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/checkpoint"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/workspace"
	"github.com/metis-agent/metis/protocol"
)

// Config wires a Manager.
type Config struct {
	Store        *store.Store
	Bus          *bus.Bus
	Loop         *agent.Loop
	Router       routing.Router
	Models       *model.Registry
	DefaultModel string
	TurnTimeout  time.Duration // 0: none
	Logger       *slog.Logger
	// Workspaces decides which directories may be workspaces; nil is
	// the policy of the process's user (workspace.DefaultPolicy).
	Workspaces *workspace.Policy
	// MaxTurnCostUSD and MaxSessionCostUSD are the cost limits new
	// sessions start with (0: none; docs/context.md, "Budgets").
	MaxTurnCostUSD, MaxSessionCostUSD float64
	// Checkpoints restores the workspace checkpoints turns take
	// (checkpoints.go); nil when they are off, CheckpointsUnavailable
	// then saying why if they were not turned off.
	Checkpoints            *checkpoint.Store
	CheckpointsUnavailable string
	// MaxQueuedTurns bounds a session's queue (0: DefaultMaxQueuedTurns).
	MaxQueuedTurns int
	// MaxImages bounds the images of one message (0: DefaultMaxImages);
	// Images bounds each image (zero fields: images.DefaultLimits).
	MaxImages int
	Images    images.Limits
	// Policy decides tool calls (docs/permissions.md); nil runs every
	// call, as before permissions existed (tests of other parts).
	Policy *permission.Policy
	// DefaultMode is the mode of sessions created without one
	// (--default-mode; "": default).
	DefaultMode permission.Mode
	// ApprovalTimeout denies a request nobody answered (0:
	// DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// Background, if set, lists a session's background commands for its
	// summary (tool.Background.List).
	Background func(sessionID string) []protocol.BackgroundCommand
	// EndBackground, if set, stops a session's background commands for
	// reason (tool.Background.EndSessionFor): a deleted session's at
	// once, and, in cluster mode, those of a tree this node lost.
	EndBackground func(ctx context.Context, sessionID, reason string) error
	// Runs, if set, reports whether this server runs a session's turns
	// (cluster mode: it owns the session's tree); nil runs every
	// session. A summary of a session it does not run reads the queue
	// from the store (summary.go).
	Runs func(sessionID string) bool
	// Deleter, if set, carries a deletion out (cluster mode: on every
	// node); nil deletes from Store alone.
	Deleter Deleter
}

// Deleter deletes a session and every worker below it beyond this
// server's store (a *cluster.Store: on every node of the cluster).
// DeleteTree calls del, which deletes them from this server's store
// and whose error it returns as it is, then makes the deletion reach
// everywhere else.
type Deleter interface {
	DeleteTree(ctx context.Context, sessionID string, del func(context.Context) error) error
}

// Manager owns sessions and their turns. Create it with New, call
// Recover once at start, and Shutdown at the end.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	turns   map[string]*activeTurn       // by session id: the turn in flight
	history map[string][]message.Message // conversations after a completed turn
	queues  map[string][]*queuedTurn     // by session id: the turns waiting, next first (queue.go)
	// queueMu serialises the queueing of turns, so that a session's
	// queue order is the order of its turn.queued events.
	queueMu sync.Mutex
	// approvals are the approval requests of the turns in flight, by id,
	// from Open to Close; rules the "allow for this session" rules of the
	// delegation trees with a turn in flight, by the tree's top session.
	approvals map[string]*approval
	rules     map[string][]permission.Rule
	closing   bool
	wg        sync.WaitGroup
}

type activeTurn struct {
	id         string
	cancel     context.CancelCauseFunc
	cancelling bool
	pending    string           // reason of a cancel that came before cancel was set
	reason     string           // the reason the turn is being cancelled with
	ended      store.TurnStatus // how the loop ended; "" while it runs
	out        agent.Outcome    // the loop's outcome, set before done closes
	done       chan struct{}
	inbox      []turnInput // messages steered into the turn, not yet taken (steer.go)

	// Permissions: the session, its planners (nearest first) and the
	// top of its tree, whose rules it follows; its mode now; its open
	// approval requests.
	sessionID string
	chain     []string
	root      string
	mode      permission.Mode
	approvals []*approval
}

// New returns a manager.
func New(cfg Config) *Manager {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxQueuedTurns <= 0 {
		cfg.MaxQueuedTurns = DefaultMaxQueuedTurns
	}
	if cfg.MaxImages <= 0 {
		cfg.MaxImages = DefaultMaxImages
	}
	def := images.DefaultLimits()
	if cfg.Images.MaxBytes <= 0 {
		cfg.Images.MaxBytes = def.MaxBytes
	}
	if cfg.Images.MaxSide <= 0 {
		cfg.Images.MaxSide = def.MaxSide
	}
	if cfg.Images.MaxPixels <= 0 {
		cfg.Images.MaxPixels = def.MaxPixels
	}
	return &Manager{cfg: cfg, log: log, turns: map[string]*activeTurn{}, history: map[string][]message.Message{},
		queues: map[string][]*queuedTurn{}, approvals: map[string]*approval{}, rules: map[string][]permission.Rule{}}
}

// CreateRequest is the body of POST /sessions.
type CreateRequest struct {
	WorkspacePath string `json:"workspace_path"`
	Model         string `json:"model"`
	// Mode is the session's permission mode ("": the server's default;
	// a worker gets its planner's).
	Mode string `json:"mode"`
	// AllowHome confirms a workspace that is the user's home directory
	// (or holds it), which is refused otherwise.
	AllowHome       bool   `json:"allow_home"`
	ParentSessionID string `json:"-"` // set by delegation only
}

// Create validates the request and creates a session; it returns once
// the session and its session.created event are committed. The
// workspace must pass the workspace policy (internal/workspace): the
// session's workspace is the directory it resolves to, symbolic links
// followed. A worker inherits its planner's workspace, home confirmed
// with it.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Summary, error) {
	ws, err := m.workspaces().Check(req.WorkspacePath, req.AllowHome || req.ParentSessionID != "")
	if errors.Is(err, workspace.ErrInvalid) {
		return Summary{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return Summary{}, err
	}
	modelID := req.Model
	if modelID == "" {
		modelID = m.cfg.DefaultModel
	}
	mode := permission.Mode(req.Mode)
	if req.Mode == "" {
		mode = m.defaultMode()
	} else if _, err := permission.ParseMode(req.Mode); err != nil {
		return Summary{}, fmt.Errorf("%w: %v", ErrInvalidMode, err)
	}
	if err := m.cfg.Models.Check(modelID); err != nil {
		_, msg := model.Classify(err)
		return Summary{}, fmt.Errorf("%w: %s", ErrInvalid, msg)
	}
	m.mu.Lock()
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return Summary{}, ErrClosed
	}

	s := store.Session{ID: event.NewID("sess_"), ParentSessionID: req.ParentSessionID, WorkspacePath: ws,
		ActiveModel: modelID, RoutingPolicyVersion: m.cfg.Router.Version(), CreatedAt: time.Now().UTC(),
		ContextWindow: int64(m.cfg.Loop.Window(modelID)), MaxTurnCostUSD: m.cfg.MaxTurnCostUSD, MaxSessionCostUSD: m.cfg.MaxSessionCostUSD,
		Mode: string(mode)}
	s.LastActivityAt = s.CreatedAt
	em, err := m.cfg.Bus.Attach(ctx, s.ID, s.ParentSessionID)
	if err != nil {
		return Summary{}, err
	}
	var parent *string
	if s.ParentSessionID != "" {
		parent = &s.ParentSessionID
	}
	payload := map[string]any{"workspace_path": ws, "model": modelID, "parent_session_id": parent, "mode": mode}
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.SessionCreated, Actor: event.ActorSession, Payload: payload,
		Ops: []store.Op{store.CreateSession{Session: s}}}); err != nil {
		return Summary{}, fmt.Errorf("create session: %w", err)
	}
	return m.summaryOf(ctx, s)
}

// summaryOf returns one session's summary (see summaries).
func (m *Manager) summaryOf(ctx context.Context, s store.Session) (Summary, error) {
	out, err := m.summaries(ctx, []store.Session{s})
	if err != nil {
		return Summary{}, err
	}
	return out[0], nil
}

// workspaces is the workspace policy in force.
func (m *Manager) workspaces() workspace.Policy {
	if m.cfg.Workspaces != nil {
		return *m.cfg.Workspaces
	}
	return workspace.DefaultPolicy()
}

// Get returns a session's summary.
func (m *Manager) Get(ctx context.Context, id string) (Summary, error) {
	s, err := m.cfg.Store.Session(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Summary{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return Summary{}, err
	}
	return m.summaryOf(ctx, s)
}

// List returns every session, oldest first.
func (m *Manager) List(ctx context.Context) ([]Summary, error) {
	ss, err := m.cfg.Store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	return m.summaries(ctx, ss)
}

// Messages returns a page of a session's messages (see store.Messages).
func (m *Manager) Messages(ctx context.Context, sessionID, before string, limit int) ([]message.Message, bool, error) {
	if _, err := m.Get(ctx, sessionID); err != nil {
		return nil, false, err
	}
	msgs, more, err := m.cfg.Store.Messages(ctx, sessionID, before, limit)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, fmt.Errorf("%w: %q is not a message of session %s", ErrNoMessage, before, sessionID)
	}
	return msgs, more, err
}

// Conversation implements agent.History: every message, oldest first.
func (m *Manager) Conversation(ctx context.Context, sessionID string) ([]message.Message, error) {
	var pages [][]message.Message
	before := ""
	for {
		page, more, err := m.cfg.Store.Messages(ctx, sessionID, before, 500)
		if err != nil {
			return nil, err
		}
		pages = append(pages, page)
		if !more || len(page) == 0 {
			break
		}
		before = page[0].ID
	}
	var out []message.Message
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	return out, nil
}

// Conversation caching: after a turn completes, the loop hands back the
// conversation it ended with, so the next turn does not re-read and
// re-decode the whole history from the store. Only completed turns are
// cached (a cancelled or failed turn's partial messages are reloaded from
// the store, repaired), and the cache is bounded.
const (
	maxCachedSessions = 64
	maxCachedMessages = 2000
)

// cachedHistory returns a copy of the cached conversation plus user, or
// nil if none is cached.
func (m *Manager) cachedHistory(sessionID string, user message.Message) []message.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.history[sessionID]
	if !ok {
		return nil
	}
	out := make([]message.Message, 0, len(h)+1)
	return append(append(out, h...), user)
}

func (m *Manager) rememberHistory(sessionID string, conv []message.Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if conv == nil || len(conv) > maxCachedMessages {
		delete(m.history, sessionID)
		return
	}
	if _, ok := m.history[sessionID]; !ok && len(m.history) >= maxCachedSessions {
		for k := range m.history { // evict any one
			delete(m.history, k)
			break
		}
	}
	m.history[sessionID] = conv
}
