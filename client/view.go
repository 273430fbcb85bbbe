package client

import (
	"encoding/json"
	"log/slog"

	"github.com/metis-agent/metis/protocol"
)

// View is a session's state as a client materializes it from a snapshot
// and the events that follow (spec §5.4). It is what the TUI renders and
// what the conformance suite compares. A View is not safe for concurrent
// use; Follow hands out copies.
type View struct {
	// Session is the snapshot's session summary, with the title and
	// archived flag of the session.updated events since (summary.go).
	Session     json.RawMessage      `json:"session,omitempty"`
	Messages    []*Message           `json:"messages"`
	Tools       map[string]*ToolCall `json:"tools"`
	Workers     map[string]*Worker   `json:"workers"`
	Turn        Turn                 `json:"turn"`
	CostUSD     float64              `json:"cost_usd"` // cost of the calls seen (plus the snapshot's)
	Errors      []string             `json:"errors"`   // llm.call_failed messages, for display
	LastEventID string               `json:"last_event_id"`
	Skipped     int                  `json:"skipped_unknown_events"`
	Mismatches  int                  `json:"delta_mismatches"`   // messages whose deltas disagreed with message.complete
	Feedback    map[string]string    `json:"feedback,omitempty"` // turn id → rating
	// HasOlder: messages older than the first of Messages exist (the
	// snapshot held only the latest); PrependMessages loads them.
	HasOlder bool `json:"has_older_messages,omitempty"`
	// Mode is the session's permission mode, as the snapshot and
	// session.mode_changed tell it ("" before either).
	Mode string `json:"mode,omitempty"`
	// Pending are the approval requests waiting for an answer, by
	// approval id: this session's and, since a planner's clients get
	// them, its workers' (SessionID tells). PendingApprovals lists them
	// in order; Client.Approve answers one.
	Pending map[string]*PendingApproval `json:"pending_approvals,omitempty"`
	// Queued are the turns waiting in the session's queue, the next
	// first, as the snapshot and turn.queued tell them; a turn leaves it
	// at its turn.started or turn.cancelled (queue.go).
	Queued []protocol.QueuedTurn `json:"queued_turns,omitempty"`
	// Background are the session's background commands, by id, from the
	// snapshot and tool.background_*; BackgroundCommands lists them.
	Background map[string]*BackgroundCommand `json:"background_commands,omitempty"`
	index      map[string]*Message           // by message id
	log        *slog.Logger
}

// Message is a canonical message being rendered.
type Message struct {
	ID         string   `json:"id"`
	Role       string   `json:"role"`
	SessionID  string   `json:"session_id,omitempty"`
	TurnID     string   `json:"turn_id,omitempty"`
	Model      string   `json:"model,omitempty"`
	Blocks     []*Block `json:"blocks"`
	Status     string   `json:"status"` // streaming, complete, cancelled, failed
	StopReason string   `json:"stop_reason,omitempty"`
	Usage      *Usage   `json:"usage,omitempty"`
	// StartMissing: the snapshot carried this streaming message without
	// its start (the server no longer held it): Blocks hold only what
	// followed. Render it as incomplete; message.complete clears it.
	StartMissing bool `json:"start_missing,omitempty"`
}

// Block is one content block.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// PartialInput accumulates tool.use_input_delta fragments until
	// tool.use_end replaces them with Input.
	PartialInput string `json:"partial_input,omitempty"`
	ToolUseID    string `json:"tool_use_id,omitempty"`
	Content      string `json:"content,omitempty"`
	IsError      bool   `json:"is_error,omitempty"`
	// An image block's reference (type "image"; Client.Image fetches
	// the bytes), and a tool result's images.
	MediaType string   `json:"media_type,omitempty"`
	SHA256    string   `json:"sha256,omitempty"`
	Size      int64    `json:"size,omitempty"`
	Width     int      `json:"width,omitempty"`
	Height    int      `json:"height,omitempty"`
	Images    []*Block `json:"images,omitempty"`
}

// Usage of a model call.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// ToolCall is a tool call's state.
type ToolCall struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input,omitempty"`
	Status     string          `json:"status"` // pending, awaiting_approval, running, completed, failed, cancelled
	Summary    string          `json:"summary,omitempty"`
	Result     string          `json:"result,omitempty"`
	ErrorClass string          `json:"error_class,omitempty"`
	Error      string          `json:"error,omitempty"`
	// ExitCode is a foreground shell command's exit code: tool.completed's
	// exit_code live, or the stored result's "exit code: N" in a snapshot
	// (whose messages carry no exit_code). Non-zero: the command failed.
	ExitCode *int `json:"exit_code,omitempty"`
}

// Worker is a delegation seen on the stream.
type Worker struct {
	SessionID   string  `json:"session_id"`
	Task        string  `json:"task"`
	Model       string  `json:"model,omitempty"`
	Status      string  `json:"status"` // running, completed, failed
	Summary     string  `json:"summary,omitempty"`
	FailureMode string  `json:"failure_mode,omitempty"`
	CostUSD     float64 `json:"cost_usd"`
}

// Turn is the turn in flight, or the last one.
type Turn struct {
	ID     string `json:"id,omitempty"`
	Status string `json:"status"` // idle, in_flight, completed, failed, cancelled
	Reason string `json:"reason,omitempty"`
}

// NewView returns an empty view.
func NewView(log *slog.Logger) *View {
	if log == nil {
		log = slog.Default()
	}
	return &View{Tools: map[string]*ToolCall{}, Workers: map[string]*Worker{}, Turn: Turn{Status: "idle"},
		index: map[string]*Message{}, log: log}
}

// Reset empties the view (before a fresh snapshot).
func (v *View) Reset() {
	*v = *NewView(v.log)
}

// Clone returns a deep copy.
func (v *View) Clone() *View {
	b, _ := json.Marshal(v)
	c := NewView(v.log)
	_ = json.Unmarshal(b, c)
	for _, m := range c.Messages {
		c.index[m.ID] = m
	}
	return c
}

// ApplySnapshot replaces the view with a snapshot (spec §3.4). A
// snapshot taken while an assistant message streamed holds it with
// status streaming and its content so far (tool inputs so far as
// PartialInput): the deltas that follow continue it.
func (v *View) ApplySnapshot(s *protocol.Snapshot) {
	v.Reset()
	v.Session = s.Session
	var sum struct {
		CostSoFarUSD      float64               `json:"cost_so_far_usd"`
		CurrentTurnID     *string               `json:"current_turn_id"`
		CurrentTurnStatus *string               `json:"current_turn_status"`
		Mode              string                `json:"mode"`
		PendingApprovals  []*PendingApproval    `json:"pending_approvals"`
		QueuedTurns       []protocol.QueuedTurn `json:"queued_turns"`
	}
	_ = json.Unmarshal(s.Session, &sum)
	v.applyBackgroundSnapshot(s.Session)
	v.CostUSD, v.Mode, v.Queued = sum.CostSoFarUSD, sum.Mode, sum.QueuedTurns
	for _, p := range sum.PendingApprovals {
		if p != nil && p.ApprovalID != "" {
			if v.Pending == nil {
				v.Pending = map[string]*PendingApproval{}
			}
			v.Pending[p.ApprovalID] = p
		}
	}
	if sum.CurrentTurnID != nil {
		v.Turn = Turn{ID: *sum.CurrentTurnID, Status: protocol.TurnStatusInFlight}
	}
	for _, raw := range s.Messages {
		if msg := v.decodeMessage(raw); msg != nil {
			v.addMessage(msg)
			v.indexTools(msg.Blocks)
		}
	}
	for _, id := range s.RunningTools {
		if tc := v.Tools[id]; tc != nil && tc.Status == "pending" {
			tc.Status = "running" // started before the seam (tool.called)
		}
	}
	for _, w := range s.Workers {
		if w.SessionID != "" {
			v.Workers[w.SessionID] = &Worker{SessionID: w.SessionID, Task: w.Task, Model: w.Model, Status: w.Status,
				Summary: w.Summary, FailureMode: w.FailureMode, CostUSD: w.CostUSD}
		}
	}
	v.HasOlder = s.HasMoreMessages
	v.LastEventID = s.SnapshotAtEventID
}

// decodeMessage decodes a canonical message of a snapshot or of GET
// /sessions/{id}/messages; nil if it does not decode.
func (v *View) decodeMessage(raw json.RawMessage) *Message {
	var m struct {
		ID        string   `json:"id"`
		Role      string   `json:"role"`
		SessionID string   `json:"session_id"`
		TurnID    string   `json:"turn_id"`
		Model     string   `json:"model"`
		Status    string   `json:"status"`
		Content   []*Block `json:"content"`
		Usage     *Usage   `json:"usage"`
		Missing   bool     `json:"start_missing"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.ID == "" {
		v.log.Debug("message not decoded", "err", err)
		return nil
	}
	return &Message{ID: m.ID, Role: m.Role, SessionID: m.SessionID, TurnID: m.TurnID, Model: m.Model,
		Status: m.Status, Blocks: nonNil(m.Content), Usage: m.Usage, StartMissing: m.Missing}
}

// nonNil replaces the null entries of decoded content with empty blocks,
// keeping the others at their index.
func nonNil(blocks []*Block) []*Block {
	for i, b := range blocks {
		if b == nil {
			blocks[i] = &Block{}
		}
	}
	return blocks
}

// indexTools records the tool calls of stored blocks: a tool_use is a
// call (pending until its tool_result), a tool_result completes (or
// fails) a known call. Calls already tracked are left as they are.
func (v *View) indexTools(blocks []*Block) {
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			if v.Tools[b.ID] == nil {
				v.Tools[b.ID] = &ToolCall{ID: b.ID, Name: b.Name, Input: b.Input, Status: "pending"}
			}
		case "tool_result":
			if tc := v.Tools[b.ToolUseID]; tc != nil && (tc.Status == "pending" || tc.Status == "running") {
				tc.Result = b.Content
				tc.Status = "completed"
				if b.IsError {
					tc.Status, tc.Error = "failed", b.Content
				} else if code, ok := protocol.ShellExitCode(b.Content); ok && tc.Name == "shell" {
					tc.ExitCode = &code
				}
			}
		}
	}
}

// PrependMessages adds a page of older messages (oldest first, as GET
// /sessions/{id}/messages?before= returns them) in front of the view's
// and records whether still older ones exist. Messages the view already
// holds are skipped. It returns how many were added.
func (v *View) PrependMessages(page []json.RawMessage, hasMore bool) int {
	var older []*Message
	for _, raw := range page {
		if msg := v.decodeMessage(raw); msg != nil && v.index[msg.ID] == nil {
			v.index[msg.ID] = msg
			older = append(older, msg)
		}
	}
	v.HasOlder = hasMore
	if len(older) == 0 {
		return 0
	}
	v.Messages = append(older, v.Messages...)
	// A call in the page may have its result in a message already held,
	// so index the whole list in order (tracked calls are left alone).
	for _, m := range v.Messages {
		v.indexTools(m.Blocks)
	}
	return len(older)
}

func (v *View) addMessage(m *Message) {
	if old, ok := v.index[m.ID]; ok {
		*old = *m
		return
	}
	v.index[m.ID] = m
	v.Messages = append(v.Messages, m)
}

// Message returns a message by id.
func (v *View) Message(id string) *Message { return v.index[id] }

// maxBlockIndex bounds the content_block_index of a delta: the view
// grows a message's blocks up to it, and a server's index must not make
// it allocate without bound.
const maxBlockIndex = 4096

// block returns the block at index of message id, growing the list.
func (m *Message) block(i int, typ string) *Block {
	for len(m.Blocks) <= i {
		m.Blocks = append(m.Blocks, &Block{})
	}
	if m.Blocks[i].Type == "" {
		m.Blocks[i].Type = typ
	}
	return m.Blocks[i]
}

// Text concatenates the message's text blocks.
func (m *Message) Text() string {
	s := ""
	for _, b := range m.Blocks {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}
