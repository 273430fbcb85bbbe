package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/checkpoint"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
	"github.com/metis-agent/metis/internal/routing"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// DefaultMaxCalls bounds the model calls of one turn's tool loop.
const DefaultMaxCalls = 25

// DefaultMaxTokens is the max_tokens of a model call unless configured.
const DefaultMaxTokens = 8192

// DefaultSystemPrompt is sent with every model call unless configured.
const DefaultSystemPrompt = "You are metis, a careful coding agent working in the user's workspace. Use the tools to inspect and change files; paths are relative to the workspace."

// History reads a session's conversation.
type History interface {
	// Conversation returns every message of the session, oldest first.
	Conversation(ctx context.Context, sessionID string) ([]message.Message, error)
}

// Config holds what every turn shares.
type Config struct {
	Models    *model.Registry
	Tools     *tool.Registry
	Prices    *price.Table
	History   History
	Logger    *slog.Logger
	MaxCalls  int    // 0: DefaultMaxCalls
	System    string // "": DefaultSystemPrompt
	MaxTokens int    // max_tokens of each call; 0: DefaultMaxTokens
	// ThinkingBudget enables extended thinking where the model supports
	// it (0: off).
	ThinkingBudget int
	// ToolConcurrency bounds the tool calls of one message running at
	// once (0: DefaultToolConcurrency).
	ToolConcurrency int
	// ToolSource, if set, offers each session tools beyond Tools (the
	// MCP servers' tools): each model call's tool list asks it again
	// (tool.Registry.ForSession).
	ToolSource tool.Source
	// Editor, if set, is the editors attached to sessions, which the
	// file tools read and write through when they offer to
	// (docs/editors.md); nil: the disk only.
	Editor tool.Editor
	// MaxPendingApprovals bounds the approval requests a turn has open
	// at once (0: DefaultMaxPendingApprovals).
	MaxPendingApprovals int
	// ApprovalTimeout is the server's --approval-timeout, only for the
	// message the model reads when a request timed out.
	ApprovalTimeout time.Duration
	// BeforeTools, if set, runs after a model call that asked for tools
	// and before the first tool starts. Tests use it to land a cancel at
	// the seam (spec §6.2.3); it must return once ctx is done.
	BeforeTools func(ctx context.Context, turnID string)

	// Long sessions (docs/context.md).

	// Limits holds the models' context windows and output limits (nil:
	// none known, and nothing is compacted but by hand).
	Limits *price.LimitTable
	// AutoCompactOff stops the compaction before a call that would pass
	// the window, and the compaction and retry after a provider's
	// overflow: such a call then fails with context_overflow.
	AutoCompactOff bool
	// CompactionModel summarises compactions ("": the conversation's
	// own model).
	CompactionModel string
	// PromptCacheOff stops asking providers to cache the prompt prefix.
	PromptCacheOff bool
	// SystemFile is read for the base system prompt when System is ""
	// (re-read each turn).
	SystemFile string
	// Home is the server's home, whose AGENTS.md (else CLAUDE.md) every
	// session's system prompt includes ("": none).
	Home string
	// MaxInstructionBytes bounds each instruction file (0:
	// DefaultInstructionBytes).
	MaxInstructionBytes int
	// Now is the clock of the system prompt's date (nil: time.Now).
	Now func() time.Time

	// Checkpoints saves the workspace's files before a turn first
	// changes them and after it ends (checkpoint.go); nil takes none.
	// CheckpointsUnavailable, when Checkpoints is nil, says why they
	// cannot be taken (git missing): every turn that may change files
	// then says so in a workspace.checkpoint_failed. Both nil and ""
	// mean checkpoints were turned off, and nothing is said.
	Checkpoints            Checkpointer
	CheckpointsUnavailable string
	// Images reads the bytes of the images a conversation holds (nil:
	// none can be read, and a model reads a text in place of each).
	Images ImageSource
	// ImageCacheBytes bounds the image bytes the loop keeps between
	// calls (0: DefaultImageCacheBytes).
	ImageCacheBytes int64
}

// Loop runs turns.
type Loop struct {
	cfg    Config
	images *images.Cache
}

// New returns a loop.
func New(cfg Config) *Loop {
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = DefaultMaxCalls
	}
	if cfg.MaxInstructionBytes <= 0 {
		cfg.MaxInstructionBytes = DefaultInstructionBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.ToolConcurrency <= 0 {
		cfg.ToolConcurrency = DefaultToolConcurrency
	}
	if cfg.MaxPendingApprovals <= 0 {
		cfg.MaxPendingApprovals = DefaultMaxPendingApprovals
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ImageCacheBytes <= 0 {
		cfg.ImageCacheBytes = DefaultImageCacheBytes
	}
	return &Loop{cfg: cfg, images: images.NewCache(cfg.ImageCacheBytes)}
}

// SetBeforeTools installs Config.BeforeTools. Call it before any turn
// runs (tests use it to land a cancel at the seam).
func (l *Loop) SetBeforeTools(f func(ctx context.Context, turnID string)) { l.cfg.BeforeTools = f }

// Turn is one turn to run. turn.started (with the user message) has
// already been emitted and committed by the session manager.
type Turn struct {
	ID           string
	SessionID    string
	SessionModel string
	Workspace    string
	Root         *os.Root
	Emitter      *bus.Emitter
	Router       routing.Router
	UserText     string
	Worker       bool
	// ModelOverride is a model the user named with "/model" for this turn.
	ModelOverride string
	// History, if not nil, is the session's conversation including this
	// turn's user message (every stored message, compaction messages
	// included); otherwise the loop loads it from Config.History.
	History []message.Message
	// Mode is the session's mode, told to the model ("": not told).
	Mode string
	// MaxTurnCostUSD and MaxSessionCostUSD are the session's cost
	// limits (0: none); SessionCostUSD what the session had cost when
	// the turn started (docs/context.md, "Budgets").
	MaxTurnCostUSD, MaxSessionCostUSD, SessionCostUSD float64
	// Ending, if set, is called once the loop knows how the turn ends and
	// before its terminal event is emitted, with that status. For a turn
	// about to complete or fail it returns a cancellation reason if the
	// turn was cancelled before this moment; the loop then ends it
	// cancelled instead, so a cancel accepted up to this point always
	// wins. The session manager serializes it with its cancels: a cancel
	// after it is answered with the turn's actual end.
	Ending func(status store.TurnStatus) (cancelReason string)
	// Steer, if set, is called before each model call (steer.go): it
	// returns the messages steered into the turn since the last call.
	Steer func() []Steered
	// Permissions, if set, decides each tool call before it starts and
	// asks the user where the policy says so (docs/permissions.md); nil
	// runs every call.
	Permissions Permissions
}

// Outcome is how a turn ended.
type Outcome struct {
	Status    store.TurnStatus
	Reason    string // cancellation reason or failure class
	FinalText string // text of the last assistant message
	Usage     message.Usage
	// Conversation is the history after a completed turn (as the next
	// turn's History); nil unless Status is completed.
	Conversation []message.Message
}

// Run runs the turn to its end. Cancelling ctx (with a *CancelCause)
// cancels the turn; Run then emits the matching §6.2 sequence and
// returns.
//
// Run returns only once the turn's terminal event is committed (or the
// bus refuses events: the server is closing, and crash recovery closes
// the turn at the next start). Catalog events are committed before the
// loop goes on, so a failure is seen where it happens. An event that
// could not be committed (ErrNotCommitted: a disk full, an I/O error) or
// emitted at all (a payload that does not encode) stops the turn: no
// further tool starts, running ones are stopped, and the turn ends with
// turn.completed(outcome failed, error_class storage_error or
// internal_error), or turn.cancelled if a cancel was accepted first, with
// every tool call row of the round that had not ended marked failed. If
// the failed event was the terminal event itself, that same end is
// emitted again. The terminal event is retried, with backoff, until it
// commits.
func (l *Loop) Run(ctx context.Context, t Turn) Outcome {
	r := &run{Loop: l.forSession(ctx, t.SessionID), t: t, ctx: ctx, start: time.Now(), tools: map[string]*store.ToolCall{}}
	out := r.do()
	if r.emitErr != nil && !errors.Is(r.emitErr, bus.ErrClosed) {
		out = r.abort(out)
	}
	return out
}

// ClassInternal is the error_class of a turn aborted by a fault of the
// server itself (an event it could not emit).
const ClassInternal = "internal_error"

// ClassStorage is the error_class of a turn aborted because the trace
// store could not commit one of its events (a disk full, an I/O error).
const ClassStorage = "storage_error"

// Backoff of the retries of a terminal event that failed to commit.
const (
	endRetryFirst = 50 * time.Millisecond
	endRetryMax   = 2 * time.Second
)

// abort ends a turn whose event could not be committed or emitted (see
// Run) and returns its outcome.
func (r *run) abort(out Outcome) Outcome {
	class := ClassInternal
	if errors.Is(r.emitErr, bus.ErrNotCommitted) {
		class = ClassStorage
	}
	r.cfg.Logger.Error("turn aborted: an event was not stored", "session", r.t.SessionID, "turn", r.t.ID,
		"class", class, "err", r.emitErr)
	var spec bus.Spec
	if r.terminal != nil && r.terminalFailed {
		// The end itself was lost: write the same end again.
		spec = *r.terminal
	} else {
		ops, ids := r.unfinishedTools(class)
		usage := r.usage
		if class == ClassInternal {
			usage = message.Usage{} // may be what did not encode
		}
		cancelled := r.ctx.Err() != nil
		if r.t.Ending != nil && !r.ended {
			r.ended = true
			cancelled = r.t.Ending(store.TurnFailed) != ""
		}
		if cancelled {
			reason := reasonOf(r.ctx)
			spec = bus.Spec{Type: event.TurnCancelled, Payload: turnCancelled{Reason: reason, Phase: "interrupted",
				CancelledTools: ids, Usage: usage, DurationMS: r.since()}}
			ops = append(ops, r.turnRow(store.TurnCancelled, reason))
			out = Outcome{Status: store.TurnCancelled, Reason: reason, Usage: r.usage, FinalText: r.final}
		} else {
			spec = bus.Spec{Type: event.TurnCompleted, Payload: turnCompleted{Outcome: "failed", ErrorClass: class,
				Usage: usage, Calls: r.calls, DurationMS: r.since()}}
			ops = append(ops, r.turnRow(store.TurnFailed, class))
			out = Outcome{Status: store.TurnFailed, Reason: class, Usage: r.usage, FinalText: r.final}
		}
		spec.TurnID, spec.Actor, spec.Ops = r.t.ID, event.ActorAgent, ops
	}
	r.commitEnd(spec)
	return out
}

// unfinishedTools returns ops marking failed every tool call row of the
// current round that has not ended in the store, and their ids.
func (r *run) unfinishedTools(class string) ([]store.Op, []string) {
	var ops []store.Op
	ids := []string{}
	for _, u := range r.round {
		row := r.tools[u]
		if row == nil || r.settled[u] {
			continue
		}
		c := *row
		c.Status, c.ErrorClass, c.IsError, c.UpdatedAt = store.ToolFailed, class, true, time.Now()
		c.ErrorMessage = "the turn ended on a server fault before this call did"
		ops = append(ops, store.PutToolCall{Call: c})
		ids = append(ids, u)
	}
	return ops, ids
}

// commitEnd emits the turn's terminal event and waits for its commit,
// retrying with backoff while the store fails. It gives up only when the
// bus refuses events (the server is closing).
func (r *run) commitEnd(spec bus.Spec) {
	delay := endRetryFirst
	for attempt := 1; ; attempt++ {
		_, err := r.t.Emitter.EmitWait(context.Background(), spec)
		if err == nil {
			return
		}
		if !errors.Is(err, bus.ErrNotCommitted) {
			r.cfg.Logger.Error("turn left open: its end could not be emitted", "session", r.t.SessionID, "turn", r.t.ID, "err", err)
			return
		}
		r.cfg.Logger.Warn("turn end not stored; retrying", "session", r.t.SessionID, "turn", r.t.ID,
			"attempt", attempt, "retry_in", delay, "err", err)
		time.Sleep(delay)
		delay = min(2*delay, endRetryMax)
	}
}

type run struct {
	*Loop
	t       Turn
	ctx     context.Context
	start   time.Time
	usage   message.Usage
	calls   int
	emitErr error
	conv    []message.Message // every stored message of the session (compact.View is what the model sees)
	prompt  Prompt            // the turn's system prompt
	tools   map[string]*store.ToolCall
	final   string
	ended   bool // Turn.Ending was called

	// The current tool round: the ids of its calls in the message's order
	// (their rows are in tools) and those whose end is committed.
	round   []string
	settled map[string]bool
	// terminal is the turn's terminal event once emitted; terminalFailed
	// reports that its commit failed.
	terminal       *bus.Spec
	terminalFailed bool

	// The turn's checkpoint (checkpoint.go): ckptTried once the first
	// call that may change the workspace came, ckpt the checkpoint
	// saved then, ckptAfterDone once the one at the end was taken.
	ckptTried, ckptAfterDone bool
	ckpt                     *checkpoint.Checkpoint
}

// emit sends one event of this turn; after the first failure it does
// nothing, and the loop winds down. A catalog event is waited for until
// committed (streaming events behind it could not be delivered sooner
// anyway), so a failed commit stops the turn before anything depends on
// the lost event.
func (r *run) emit(typ event.Type, actor string, payload any, ops ...store.Op) {
	if r.emitErr != nil {
		return
	}
	spec := bus.Spec{Type: typ, TurnID: r.t.ID, Actor: actor, Payload: payload, Ops: ops}
	var err error
	if event.FamilyOf(typ) == event.Catalog {
		_, err = r.t.Emitter.EmitWait(context.Background(), spec)
	} else {
		_, err = r.t.Emitter.Emit(spec)
	}
	if err != nil {
		r.emitErr = err
	}
}

// emitEnd emits the turn's terminal event.
func (r *run) emitEnd(typ event.Type, payload any, row store.Op) {
	r.checkpointAfter()
	if r.emitErr != nil {
		return
	}
	r.terminal = &bus.Spec{Type: typ, TurnID: r.t.ID, Actor: event.ActorAgent, Payload: payload, Ops: []store.Op{row}}
	r.emit(typ, event.ActorAgent, payload, row)
	r.terminalFailed = r.emitErr != nil
}

func (r *run) since() int64 { return time.Since(r.start).Milliseconds() }

func (r *run) do() Outcome {
	dec := r.t.Router.Decide(routing.Input{SessionID: r.t.SessionID, SessionModel: r.t.SessionModel,
		Workspace: r.t.Workspace, UserText: r.t.UserText, Worker: r.t.Worker, Override: r.t.ModelOverride})
	r.emit(event.RouteDecided, event.ActorRouter, routeDecided(dec))
	if r.emitErr != nil {
		return Outcome{}
	}

	adapter, err := r.cfg.Models.Resolve(dec.Model)
	if err != nil {
		class, msg := model.Classify(err)
		r.emit(event.LLMCallFailed, event.ActorAgent, llmCallFailed{Model: dec.Model, ErrorClass: class, Message: msg})
		return r.fail(class)
	}
	conv, err := r.t.History, error(nil)
	if conv == nil {
		conv, err = r.cfg.History.Conversation(r.ctx, r.t.SessionID)
	}
	if err != nil {
		if r.ctx.Err() != nil {
			return r.cancelled("between_calls", "", nil)
		}
		r.emit(event.LLMCallFailed, event.ActorAgent, llmCallFailed{Model: dec.Model, ErrorClass: model.ClassProviderError,
			Message: "could not load the conversation: " + err.Error()})
		return r.fail(model.ClassProviderError)
	}
	r.conv = conv
	r.prompt = r.SystemPrompt(PromptInput{Workspace: r.t.Workspace, Root: r.t.Root, Mode: r.t.Mode})

	for r.calls = 0; r.calls < r.cfg.MaxCalls; {
		if r.ctx.Err() != nil {
			return r.cancelled("between_calls", "", nil)
		}
		if r.takeSteered(); r.emitErr != nil {
			return Outcome{Status: store.TurnFailed, Reason: ClassInternal, Usage: r.usage}
		}
		p, fit := r.fit(adapter, dec.Model, r.prepare(dec.Model))
		if out, stop := r.unfit(fit); stop {
			return out
		}
		if b := r.overBudget(p); b != nil {
			return r.endBudget(b)
		}
		c := r.call(adapter, dec.Model, p)
		if c.class == model.ClassContextOverflow && !c.cancelled && r.emitErr == nil && !r.cfg.AutoCompactOff {
			var out Outcome
			var stop bool
			if c, out, stop = r.retryAfterOverflow(adapter, dec.Model, c); stop {
				return out
			}
		}
		switch {
		case r.emitErr != nil:
			return Outcome{Status: store.TurnFailed, Reason: ClassInternal, Usage: r.usage}
		case c.cancelled:
			return r.cancelled("llm", c.msg.ID, nil)
		case c.err != nil:
			return r.fail(c.class)
		}
		r.conv = append(r.conv, c.msg)
		uses := toolUses(c.msg)
		if c.stop != model.StopToolUse || len(uses) == 0 {
			return r.complete(c.stop)
		}
		results, cancelledIDs, started, asked := r.dispatch(c, uses)
		if r.emitErr != nil {
			return Outcome{Status: store.TurnFailed, Reason: ClassInternal, Usage: r.usage}
		}
		if r.ctx.Err() != nil {
			phase := protocol.CancelPhaseTools
			switch {
			case started:
			case asked:
				phase = protocol.CancelPhaseApproval
			default:
				phase = protocol.CancelPhaseSeam
			}
			return r.cancelled(phase, "", cancelledIDs)
		}
		r.conv = append(r.conv, results)
	}
	return r.endBudget(&protocol.TurnBudget{Kind: protocol.BudgetCalls, Limit: float64(r.cfg.MaxCalls), Spent: float64(r.calls)})
}

// retryAfterOverflow answers a call the provider refused as too long
// for the window: the failed message stays stored (the view leaves it
// out), the conversation is compacted, and the call is made again, once.
// It returns the new call, or the turn's end when there is no retry.
func (r *run) retryAfterOverflow(adapter model.Adapter, modelID string, c callResult) (callResult, Outcome, bool) {
	r.conv = append(r.conv, c.msg)
	window, _ := model.OverflowWindow(c.err)
	p, fit := r.recoverOverflow(adapter, modelID, window)
	if out, stop := r.unfit(fit); stop {
		return c, out, true
	}
	if r.calls >= r.cfg.MaxCalls {
		return c, r.endBudget(&protocol.TurnBudget{Kind: protocol.BudgetCalls, Limit: float64(r.cfg.MaxCalls), Spent: float64(r.calls)}), true
	}
	return r.call(adapter, modelID, p), Outcome{}, false
}

// unfit ends the turn as making room for a call decided, or reports
// that the call goes ahead.
func (r *run) unfit(f fitOutcome) (Outcome, bool) {
	switch f {
	case fitStopped:
		return Outcome{Status: store.TurnFailed, Reason: ClassInternal, Usage: r.usage}, true
	case fitCancelled:
		return r.cancelled(protocol.TurnPhaseCompaction, "", nil), true
	case fitOverflow:
		return r.fail(model.ClassContextOverflow), true
	}
	return Outcome{}, false
}

func (r *run) turnRow(status store.TurnStatus, reason string) store.Op {
	return store.PutTurn{Turn: store.Turn{ID: r.t.ID, SessionID: r.t.SessionID, Status: status, Reason: reason,
		StartedAt: r.start, EndedAt: time.Now()}}
}

// cancelledAtEnd reports whether a turn about to end with status was
// cancelled first (see Turn.Ending).
func (r *run) cancelledAtEnd(status store.TurnStatus) bool {
	if r.t.Ending == nil || r.ended {
		return false
	}
	r.ended = true
	return r.t.Ending(status) != ""
}

func (r *run) complete(stop string) Outcome {
	if r.cancelledAtEnd(store.TurnCompleted) {
		return r.cancelled("between_calls", "", nil)
	}
	r.emitEnd(event.TurnCompleted, turnCompleted{Outcome: "completed", StopReason: stop,
		Usage: r.usage, Calls: r.calls, DurationMS: r.since()}, r.turnRow(store.TurnCompleted, ""))
	return Outcome{Status: store.TurnCompleted, Usage: r.usage, FinalText: r.final, Conversation: r.conv}
}

func (r *run) fail(class string) Outcome {
	if r.cancelledAtEnd(store.TurnFailed) {
		return r.cancelled("between_calls", "", nil)
	}
	r.emitEnd(event.TurnCompleted, turnCompleted{Outcome: "failed", ErrorClass: class,
		Usage: r.usage, Calls: r.calls, DurationMS: r.since()}, r.turnRow(store.TurnFailed, class))
	return Outcome{Status: store.TurnFailed, Reason: class, Usage: r.usage, FinalText: r.final}
}

func (r *run) cancelled(phase, partialID string, tools []string) Outcome {
	if r.t.Ending != nil && !r.ended {
		r.ended = true
		r.t.Ending(store.TurnCancelled)
	}
	reason := reasonOf(r.ctx)
	if tools == nil {
		tools = []string{}
	}
	r.emitEnd(event.TurnCancelled, turnCancelled{Reason: reason, Phase: phase, PartialMessageID: partialID,
		CancelledTools: tools, Usage: r.usage, DurationMS: r.since()}, r.turnRow(store.TurnCancelled, reason))
	return Outcome{Status: store.TurnCancelled, Reason: reason, Usage: r.usage, FinalText: r.final}
}

func toolUses(m message.Message) []message.Block {
	var out []message.Block
	for _, b := range m.Content {
		if b.Type == message.BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

func describe(p prepared, sha string) callRequest {
	names := make([]string, len(p.req.Tools))
	for i, t := range p.req.Tools {
		names[i] = t.Name
	}
	return callRequest{Messages: len(p.req.Messages), Tools: names, SystemSHA256: sha, MaxTokens: p.req.MaxTokens,
		ContextTokens: p.est, ContextWindow: p.lim.Window}
}

// HistoryFunc adapts a function to History.
type HistoryFunc func(ctx context.Context, sessionID string) ([]message.Message, error)

// Conversation implements History.
func (f HistoryFunc) Conversation(ctx context.Context, sessionID string) ([]message.Message, error) {
	return f(ctx, sessionID)
}
