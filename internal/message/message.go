// Package message owns the canonical message format (docs/message-format.md):
// messages, their content blocks, status and usage. Model adapters translate
// provider formats to and from it; the store persists it; snapshots and the
// messages endpoint return it.
//
// The names of roles, statuses and block types are wire vocabulary,
// spelled in protocol and aliased here. It imports only protocol and the
// standard library.
package message

import (
	"encoding/json"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// Role of a message's author.
type Role = protocol.Role

// Roles.
const (
	RoleUser      = protocol.RoleUser
	RoleAssistant = protocol.RoleAssistant
	RoleTool      = protocol.RoleTool
)

// Status of a message (spec §6.2.6).
type Status = protocol.MessageStatus

// Statuses.
const (
	StatusComplete  = protocol.StatusComplete
	StatusCancelled = protocol.StatusCancelled
	StatusFailed    = protocol.StatusFailed
)

// Block types.
const (
	BlockText       = protocol.BlockText
	BlockThinking   = protocol.BlockThinking
	BlockToolUse    = protocol.BlockToolUse
	BlockToolResult = protocol.BlockToolResult
	BlockCompaction = protocol.BlockCompaction
	BlockImage      = protocol.BlockImage
)

// Block is one content block. Which fields are set depends on Type; the
// JSON encoding carries exactly the fields of contract §4 for each type.
type Block struct {
	Type string

	Text string // text

	Thinking  string // thinking
	Signature string // thinking; "" encodes as null

	ID    string          // tool_use
	Name  string          // tool_use
	Input json.RawMessage // tool_use: a JSON object
	// PartialInput (tool_use) is the raw input streamed so far, on a
	// block of a streaming message in a snapshot only (Input is then {}
	// until the block ends); encoded as partial_input when not empty.
	PartialInput string

	ToolUseID string // tool_result
	Content   string // tool_result
	IsError   bool   // tool_result
	// Images are a tool result's images (image blocks), omitted from
	// its JSON when there are none.
	Images []Block

	Compaction *Compaction // compaction

	// An image (docs/conversation.md, "Images"): its true media type, its
	// bytes' SHA-256 (its name in the store), size in bytes and pixels.
	MediaType     string
	SHA256        string
	Size          int64
	Width, Height int
	// Data is the image's bytes, in memory only: no JSON encoding of a
	// block carries them (the store keeps them once, by SHA256). The
	// agent loop fills it in before a model call.
	Data []byte
}

// Image returns an image block (without its bytes).
func Image(mediaType, sha string, size int64, width, height int) Block {
	return Block{Type: BlockImage, MediaType: mediaType, SHA256: sha, Size: size, Width: width, Height: height}
}

// imageJSON is an image block's JSON.
type imageJSON struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: BlockText, Text: s} }

// MarshalJSON encodes the block with the fields of its type only.
func (b Block) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case BlockText:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	case BlockThinking:
		var sig *string
		if b.Signature != "" {
			sig = &b.Signature
		}
		return json.Marshal(struct {
			Type      string  `json:"type"`
			Thinking  string  `json:"thinking"`
			Signature *string `json:"signature"`
		}{b.Type, b.Thinking, sig})
	case BlockToolUse:
		in := b.Input
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		return json.Marshal(struct {
			Type         string          `json:"type"`
			ID           string          `json:"id"`
			Name         string          `json:"name"`
			Input        json.RawMessage `json:"input"`
			PartialInput string          `json:"partial_input,omitempty"`
		}{b.Type, b.ID, b.Name, in, b.PartialInput})
	case BlockToolResult:
		return json.Marshal(struct {
			Type      string  `json:"type"`
			ToolUseID string  `json:"tool_use_id"`
			Content   string  `json:"content"`
			IsError   bool    `json:"is_error"`
			Images    []Block `json:"images,omitempty"`
		}{b.Type, b.ToolUseID, b.Content, b.IsError, b.Images})
	case BlockImage:
		return json.Marshal(imageJSON{b.Type, b.MediaType, b.SHA256, b.Size, b.Width, b.Height})
	case BlockCompaction:
		c := Compaction{}
		if b.Compaction != nil {
			c = *b.Compaction
		}
		return json.Marshal(struct {
			Type string `json:"type"`
			Compaction
		}{b.Type, c})
	}
	type plain Block
	p := plain(b)
	p.Data = nil // never on the wire
	return json.Marshal(p)
}

// UnmarshalJSON decodes any block type.
func (b *Block) UnmarshalJSON(data []byte) error {
	var w struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature *string         `json:"signature"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Partial   string          `json:"partial_input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   string          `json:"content"`
		IsError   bool            `json:"is_error"`
		Images    []Block         `json:"images"`
		MediaType string          `json:"media_type"`
		SHA256    string          `json:"sha256"`
		Size      int64           `json:"size"`
		Width     int             `json:"width"`
		Height    int             `json:"height"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*b = Block{Type: w.Type, Text: w.Text, Thinking: w.Thinking, ID: w.ID, Name: w.Name,
		Input: w.Input, PartialInput: w.Partial, ToolUseID: w.ToolUseID, Content: w.Content, IsError: w.IsError, Images: w.Images,
		MediaType: w.MediaType, SHA256: w.SHA256, Size: w.Size, Width: w.Width, Height: w.Height}
	if w.Signature != nil {
		b.Signature = *w.Signature
	}
	if w.Type == BlockCompaction {
		b.Compaction = new(Compaction)
		if err := json.Unmarshal(data, b.Compaction); err != nil {
			return err
		}
		b.Content = ""
	}
	return nil
}

// Compaction is what a compaction block records: the marker in the
// stored conversation where the model's view was compacted
// (docs/message-format.md, "Compaction"). The model's view of a
// conversation is a function of the stored messages and the newest
// compaction block alone, so the next request is reproducible from the
// store.
type Compaction struct {
	// Summary replaces, in the model's view, every message up to and
	// including CompactedThrough ("" for none: nothing is replaced, and
	// Summary is "" too unless an earlier compaction's carries on).
	Summary          string `json:"summary"`
	CompactedThrough string `json:"compacted_through"`
	// StubbedThrough: the tool results of the messages up to and
	// including it are shown to the model as one-line stubs ("" for none).
	StubbedThrough string `json:"stubbed_through"`
	// Trigger is auto, overflow or manual; Method stub, summary or drop.
	Trigger string `json:"trigger"`
	Method  string `json:"method"`
	// TokensBefore and TokensAfter are the model's view before and after,
	// estimated in tokens.
	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
}

// Usage of one model call, or a sum of calls.
type Usage struct {
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CacheReadTokens     int64   `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64   `json:"cache_creation_tokens,omitempty"`
	CostUSD             float64 `json:"cost_usd"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:         u.InputTokens + o.InputTokens,
		OutputTokens:        u.OutputTokens + o.OutputTokens,
		CacheReadTokens:     u.CacheReadTokens + o.CacheReadTokens,
		CacheCreationTokens: u.CacheCreationTokens + o.CacheCreationTokens,
		CostUSD:             u.CostUSD + o.CostUSD,
	}
}

// Message is one canonical message of a session's conversation.
type Message struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	TurnID    string    `json:"turn_id,omitempty"`
	Role      Role      `json:"role"`
	Content   []Block   `json:"content"`
	Status    Status    `json:"status"`
	Model     string    `json:"model,omitempty"`
	Usage     *Usage    `json:"usage,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// StartMissing marks a streaming message of a snapshot whose first
	// streaming events the server no longer held: Content is only what
	// followed them (protocol.FieldStartMissing). Never stored.
	StartMissing bool `json:"start_missing,omitempty"`
}

// Images returns the image blocks of m: its own and those of its tool
// results, in order.
func (m *Message) Images() []Block {
	var out []Block
	for _, b := range m.Content {
		switch b.Type {
		case BlockImage:
			out = append(out, b)
		case BlockToolResult:
			out = append(out, b.Images...)
		}
	}
	return out
}

// PlainText concatenates the text blocks of m.
func (m *Message) PlainText() string {
	var s string
	for _, b := range m.Content {
		if b.Type == BlockText {
			s += b.Text
		}
	}
	return s
}
