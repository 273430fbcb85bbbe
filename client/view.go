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
	Session     json.RawMessage      `json:"session,omitempty"` // the snapshot's session summary
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
	index       map[string]*Message  // by message id
	log         *slog.Logger
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
	Status     string          `json:"status"` // pending, running, completed, failed, cancelled
	Summary    string          `json:"summary,omitempty"`
	Result     string          `json:"result,omitempty"`
	ErrorClass string          `json:"error_class,omitempty"`
	Error      string          `json:"error,omitempty"`
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

// ApplySnapshot replaces the view with a snapshot (spec §3.4).
func (v *View) ApplySnapshot(s *protocol.Snapshot) {
	v.Reset()
	v.Session = s.Session
	var sum struct {
		CostSoFarUSD      float64 `json:"cost_so_far_usd"`
		CurrentTurnID     *string `json:"current_turn_id"`
		CurrentTurnStatus *string `json:"current_turn_status"`
	}
	_ = json.Unmarshal(s.Session, &sum)
	v.CostUSD = sum.CostSoFarUSD
	if sum.CurrentTurnID != nil {
		v.Turn = Turn{ID: *sum.CurrentTurnID, Status: "in_flight"}
	}
	for _, raw := range s.Messages {
		var m struct {
			ID        string   `json:"id"`
			Role      string   `json:"role"`
			SessionID string   `json:"session_id"`
			TurnID    string   `json:"turn_id"`
			Model     string   `json:"model"`
			Status    string   `json:"status"`
			Content   []*Block `json:"content"`
			Usage     *Usage   `json:"usage"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			v.log.Debug("snapshot message not decoded", "err", err)
			continue
		}
		msg := &Message{ID: m.ID, Role: m.Role, SessionID: m.SessionID, TurnID: m.TurnID, Model: m.Model,
			Status: m.Status, Blocks: m.Content, Usage: m.Usage}
		v.addMessage(msg)
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				v.Tools[b.ID] = &ToolCall{ID: b.ID, Name: b.Name, Input: b.Input, Status: "pending"}
			case "tool_result":
				if tc := v.Tools[b.ToolUseID]; tc != nil {
					tc.Result = b.Content
					tc.Status = "completed"
					if b.IsError {
						tc.Status, tc.Error = "failed", b.Content
					}
				}
			}
		}
	}
	v.LastEventID = s.SnapshotAtEventID
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
