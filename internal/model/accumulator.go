package model

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/metis-agent/metis/internal/message"
)

// Accumulator rebuilds the canonical content of a message from its
// deltas. The agent loop feeds it every delta it forwards, so the
// content it persists is exactly what clients were streamed.
type Accumulator struct {
	blocks map[int]*accBlock
}

type accBlock struct {
	b     message.Block
	text  strings.Builder // text or thinking so far (b.Text/b.Thinking are filled on read)
	input strings.Builder // raw partial JSON of a tool_use block
	open  bool
	bad   error // the tool input did not parse; Input is then {}
}

// Apply adds one delta. It rejects deltas that contradict the blocks
// seen so far (a text delta into a tool_use block, say).
func (a *Accumulator) Apply(d Delta) error {
	if a.blocks == nil {
		a.blocks = map[int]*accBlock{}
	}
	blk := a.blocks[d.Index]
	want := map[DeltaKind]string{KindText: message.BlockText, KindThinking: message.BlockThinking,
		KindToolInput: message.BlockToolUse}[d.Kind]
	switch d.Kind {
	case KindText, KindThinking:
		if blk == nil {
			blk = &accBlock{b: message.Block{Type: want}, open: true}
			a.blocks[d.Index] = blk
		}
		if blk.b.Type != want {
			return fmt.Errorf("delta for %s into %s block %d", want, blk.b.Type, d.Index)
		}
		blk.text.WriteString(d.Text) // linear in the message, not quadratic
		if d.Kind == KindThinking && d.Signature != "" {
			blk.b.Signature = d.Signature
		}
	case KindToolUseStart:
		if blk != nil {
			return fmt.Errorf("tool_use start for existing block %d", d.Index)
		}
		a.blocks[d.Index] = &accBlock{b: message.Block{Type: message.BlockToolUse, ID: d.ToolUseID, Name: d.ToolName}, open: true}
	case KindToolInput:
		if blk == nil || blk.b.Type != message.BlockToolUse {
			return fmt.Errorf("tool input delta for non-tool block %d", d.Index)
		}
		blk.input.WriteString(d.Text)
	case KindBlockStop:
		if blk == nil {
			return nil // a stop for an empty block carries nothing
		}
		if blk.open && blk.b.Type == message.BlockToolUse {
			blk.closeTool()
		}
		blk.open = false
	default:
		return fmt.Errorf("unknown delta kind %d", d.Kind)
	}
	return nil
}

// Block returns the current state of the block at index.
func (a *Accumulator) Block(index int) (message.Block, bool) {
	blk, ok := a.blocks[index]
	if !ok {
		return message.Block{}, false
	}
	return blk.block(), true
}

// block returns the block with its accumulated text filled in.
func (blk *accBlock) block() message.Block {
	b := blk.b
	switch b.Type {
	case message.BlockText:
		b.Text = blk.text.String()
	case message.BlockThinking:
		b.Thinking = blk.text.String()
	}
	return b
}

// CloseOpen closes every open tool_use block with the best input that
// parses (the whole raw input if it is valid JSON, else {}), for a call
// cut short. It returns the indexes it closed, ascending.
func (a *Accumulator) CloseOpen() []int {
	var closed []int
	for i, blk := range a.blocks {
		if !blk.open {
			continue
		}
		blk.open = false
		if blk.b.Type == message.BlockToolUse {
			blk.closeTool()
			closed = append(closed, i)
		}
	}
	sort.Ints(closed)
	return closed
}

// closeTool parses the accumulated input: valid JSON objects are kept,
// anything else becomes {} and is remembered as the block's input error.
func (blk *accBlock) closeTool() {
	in, err := ParseToolInput(blk.input.String())
	if err != nil {
		in = json.RawMessage("{}")
		blk.bad = err
	}
	blk.b.Input = in
}

// InputError returns why the input of the tool_use block with this id
// did not parse, or nil.
func (a *Accumulator) InputError(toolUseID string) error {
	for _, blk := range a.blocks {
		if blk.b.Type == message.BlockToolUse && blk.b.ID == toolUseID {
			return blk.bad
		}
	}
	return nil
}

// Content returns the blocks in index order.
func (a *Accumulator) Content() []message.Block {
	idx := make([]int, 0, len(a.blocks))
	for i := range a.blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]message.Block, 0, len(idx))
	for _, i := range idx {
		b := a.blocks[i].block()
		if b.Type == message.BlockToolUse && len(b.Input) == 0 {
			b.Input = json.RawMessage("{}")
		}
		out = append(out, b)
	}
	return out
}

// ToolUses returns the tool_use blocks in index order.
func (a *Accumulator) ToolUses() []message.Block {
	var out []message.Block
	for _, b := range a.Content() {
		if b.Type == message.BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// ParseToolInput validates accumulated tool input: empty means {}, and
// anything else must be a JSON object.
func ParseToolInput(raw string) (json.RawMessage, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, fmt.Errorf("not a JSON object: null")
	}
	return json.RawMessage(s), nil
}
