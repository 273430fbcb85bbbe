package tui

import (
	"context"
	"encoding/json"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textarea"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// backend is the part of *client.Client the model calls.
type backend interface {
	SubmitTurn(ctx context.Context, sessionID string, req client.TurnRequest) (client.TurnAccepted, error)
	Cancel(ctx context.Context, sessionID, turnID, reason string) error
	Messages(ctx context.Context, sessionID, before string, limit int) ([]json.RawMessage, bool, error)
	Approve(ctx context.Context, sessionID, approvalID string, ans protocol.ApprovalAnswer) (client.Resolution, error)
	SetMode(ctx context.Context, sessionID, mode string) (client.Session, error)
	Compact(ctx context.Context, sessionID, instructions string) (string, error)
	Sessions(ctx context.Context) ([]client.Session, error)
	Create(ctx context.Context, o client.CreateOptions) (client.Session, error)
	Models(ctx context.Context) (client.ModelList, error)
	Attach(ctx context.Context, sessionID string) (client.Attach, error)
	Turns(ctx context.Context, sessionID, before string, limit int) (client.TurnList, error)
	Revert(ctx context.Context, sessionID, turnID string) (client.RevertResult, error)
	RestoreCheckpoint(ctx context.Context, sessionID, checkpointID string) (client.RevertResult, error)
	Fork(ctx context.Context, sessionID string, req client.ForkRequest) (client.ForkResult, error)
	MCP(ctx context.Context) (client.MCPStatus, error)
}

// callError is an llm.call_failed shown in the conversation.
type callError struct {
	turnID, messageID string
	text              string
}

// Model is the Bubble Tea model of the chat screen. It owns its
// client.View: Follow's updates reach it through the feed and are folded
// in once per frame.
type Model struct {
	ctx       context.Context
	api       backend
	sessionID string
	workspace string
	note      string // standing status note (the in-process server, the dashboard's URL)
	title     string // the session's title, as the server has it ("" before its first turn)
	titleAsk  bool   // the title may have changed: ask the server (titleFetch)
	titleSeq  int    // titleFetch's requests so far; an older answer than the last applied is dropped
	titleGot  int    // the request whose answer the title is from
	archived  bool   // the session is archived (the summary, session.updated)

	feed *feed
	view *client.View

	// Derived from the events as they are applied.
	deltas      map[string]int // message id → streaming deltas seen (the token estimate)
	callErrors  []callError
	workerOrder []string               // worker session ids, first seen first
	modelName   string                 // the model of the latest call
	events      ring                   // the inspector's raw events
	diffs       map[string]*toolDiff   // tool use id → the change a file tool made
	live        map[string]*liveOutput // tool use id → a running command's last lines
	turnStats   map[string]*turnStats  // turn id → its totals, once it ended
	compactions []compactNote          // where the model's view was compacted, seen live
	compacting  bool                   // a compaction runs
	ctxTokens   int64                  // the conversation's size for the next call
	ctxWindow   int64                  // the model's context window (0: unknown)
	modelPin    string                 // /model: the model every following turn asks for
	notes       []compactNote          // other events shown between messages (reverts, file changes, background commands)
	steering    []steer                // messages steered into the running turn, not yet taken
	attached    []attachment           // /image: the images the next message carries
	imageNames  map[string]string      // sha256 → the file name an image was attached from
	undoCP      string                 // the undo checkpoint of the latest revert seen (/redo)
	forkedFrom  string                 // the session this one was forked from
	mcp         *client.MCPStatus      // the session's MCP servers as last polled (nil before)
	panelRows   int                    // rows of the queue panel the layout made room for

	subscribed   bool
	reconnecting bool
	attempt      int
	connErr      error
	followErr    error // Follow returned: the session is gone or refused

	loadingOlder bool   // a page of older messages is on its way
	submitting   bool   // a Submit is on its way
	pendingTurn  string // submitted; not yet seen to end
	cancelAfter  bool   // ctrl-c during submit: cancel the turn once it has an id
	cancelling   bool
	quitArmed    bool
	quitSeq      int
	flash        string // transient status line message
	flashIsError bool

	overlay  overlay     // help, a picker or a sheet, over the conversation
	models   modelPicker // the model picker's state
	sheet    sheet       // the sheet's state (/bg, /mcp, the /undo confirmation)
	helpTop  int         // the help's first line shown, on a short terminal
	picker   picker      // the session picker's state
	approval approvalUI  // the approval prompt's state
	rewind   rewinder    // the /rewind list's state
	// next is the session to open when the program ends (/new, the
	// picker, /fork, /rewind): Run opens it and starts the screen again,
	// with nextDraft in its composer and nextFlash on its status line.
	next, nextDraft, nextFlash string

	expanded  bool // thinking, tool results and worker cards shown in full
	inspector bool
	width     int
	height    int
	dark      bool

	vp       viewport.Model
	composer textarea.Model
	st       styles
	md       *markdown

	dirty     bool      // the conversation must be re-rendered
	renders   int       // conversation renders so far (tests count them)
	spin      int       // spinner frame, from the clock
	lastFrame time.Time // when the last frame was handled
}

// options configure a Model.
type options struct {
	sessionID, workspace, note, title string
	// draft starts the composer (a rewound prompt); flash the status
	// line (what the previous screen did).
	draft, flash string
}

func newModel(ctx context.Context, api backend, f *feed, o options) *Model {
	ta := textarea.New()
	ta.Placeholder = composerPlaceholder
	ta.ShowLineNumbers = false
	ta.Prompt = "│ "
	ta.CharLimit = 0
	ta.MaxHeight = 0
	ta.SetHeight(composerHeight)
	ta.SetVirtualCursor(false)
	ta.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("shift+enter", "alt+enter", "ctrl+j"))
	ta.KeyMap.LineEnd = key.NewBinding(key.WithKeys("end"))
	ta.Focus()

	vp := viewport.New()
	vp.KeyMap = viewport.KeyMap{} // the composer has the keyboard; scrolling is ours

	ta.SetValue(o.draft)
	return &Model{
		ctx: ctx, api: api, feed: f, flash: o.flash,
		sessionID: o.sessionID, workspace: o.workspace, note: o.note, title: o.title,
		view:       client.NewView(discardLogger()),
		deltas:     map[string]int{},
		diffs:      map[string]*toolDiff{},
		live:       map[string]*liveOutput{},
		turnStats:  map[string]*turnStats{},
		imageNames: map[string]string{},
		events:     ring{max: inspectorKeep},
		dark:       true,
		vp:         vp,
		composer:   ta,
		st:         newStyles(),
		md:         newMarkdown(),
		dirty:      true,
	}
}

// Init starts the frame loop and asks the terminal for its background.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.nextFrame(), tea.RequestBackgroundColor, m.pollMCP(0))
}

func (m *Model) nextFrame() tea.Cmd {
	return nextFrame(m.ctx, m.feed, m.lastFrame, m.busy())
}

// currentTurn is the turn ctrl-c would cancel: the one in flight, or the
// one just submitted.
func (m *Model) currentTurn() string {
	if m.view.Turn.Status == protocol.TurnStatusInFlight && m.view.Turn.ID != "" {
		return m.view.Turn.ID
	}
	return m.pendingTurn
}

// busy reports a turn in flight (or about to be) or a reconnect.
func (m *Model) busy() bool {
	return m.submitting || m.currentTurn() != "" || m.reconnecting
}

// sessionModel is the session's active model from the snapshot summary.
func (m *Model) sessionModel() string {
	var s struct {
		ActiveModel string `json:"active_model"`
	}
	_ = json.Unmarshal(m.view.Session, &s)
	return s.ActiveModel
}
