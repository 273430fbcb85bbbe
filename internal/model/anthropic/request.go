package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// modelName returns the Anthropic model name of a model id: the part after
// "anthropic:", or a bare name as is.
func modelName(id string) (string, error) {
	name := id
	if p, n, err := model.SplitID(id); err == nil {
		if p != Provider {
			return "", &model.Error{Class: model.ClassInvalidRequest,
				Message: fmt.Sprintf("model %s is not an %s model", id, Provider)}
		}
		name = n
	}
	name = strings.TrimSpace(name)
	if name == "" || strings.HasSuffix(name, ":") {
		return "", &model.Error{Class: model.ClassInvalidRequest,
			Message: fmt.Sprintf("model id %q names no Anthropic model (want anthropic:MODEL)", id)}
	}
	return name, nil
}

// buildParams turns a canonical request into Anthropic request parameters.
func buildParams(req model.Request) (sdk.MessageNewParams, error) {
	name, err := modelName(req.Model)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	msgs := convertMessages(req.Messages)
	if len(msgs) == 0 {
		return sdk.MessageNewParams{}, &model.Error{Class: model.ClassInvalidRequest,
			Message: "nothing to send to Anthropic: the conversation has no non-empty message"}
	}
	p := sdk.MessageNewParams{
		Model:     sdk.Model(name),
		MaxTokens: int64(maxTokens),
		Messages:  msgs,
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	if b := req.ThinkingBudget; b > 0 {
		// The API wants at least 1024 and less than max_tokens.
		b = max(b, 1024)
		if int64(b) >= p.MaxTokens {
			p.MaxTokens = int64(b) + 1024
		}
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(b))
	}
	for _, t := range req.Tools {
		tp := &sdk.ToolParam{Name: t.Name, InputSchema: inputSchema(t.InputSchema)}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	return p, nil
}

// inputSchema passes a tool's JSON schema through unchanged; a missing or
// malformed one becomes the empty object schema.
func inputSchema(raw json.RawMessage) sdk.ToolInputSchemaParam {
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		// Not the zero value: that would be left out, and the API requires
		// input_schema.
		raw = json.RawMessage(`{"type":"object"}`)
	}
	return param.Override[sdk.ToolInputSchemaParam](json.RawMessage(raw))
}

// convertMessages turns the canonical conversation into Anthropic
// messages: tool messages become user messages of tool_result blocks,
// blocks the provider cannot take back are dropped, empty messages are
// dropped, and consecutive messages of the same role are merged (with a
// user message's tool_result blocks ahead of its other blocks, as the API
// requires).
func convertMessages(ms []message.Message) []sdk.MessageParam {
	type pending struct {
		role    sdk.MessageParamRole
		results []sdk.ContentBlockParamUnion // tool_result blocks (user only)
		other   []sdk.ContentBlockParamUnion
	}
	var out []pending
	for _, m := range ms {
		role := sdk.MessageParamRoleUser
		if m.Role == message.RoleAssistant {
			role = sdk.MessageParamRoleAssistant
		}
		var results, other []sdk.ContentBlockParamUnion
		for _, b := range m.Content {
			if role == sdk.MessageParamRoleAssistant {
				if c, ok := assistantBlock(b); ok {
					other = append(other, c)
				}
				continue
			}
			switch b.Type {
			case message.BlockToolResult:
				results = append(results, toolResult(b))
			case message.BlockText:
				if b.Text != "" {
					other = append(other, sdk.NewTextBlock(b.Text))
				}
			}
		}
		if len(results)+len(other) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].results = append(out[n-1].results, results...)
			out[n-1].other = append(out[n-1].other, other...)
			continue
		}
		out = append(out, pending{role: role, results: results, other: other})
	}
	params := make([]sdk.MessageParam, 0, len(out))
	for _, p := range out {
		params = append(params, sdk.MessageParam{Role: p.role, Content: append(p.results, p.other...)})
	}
	return params
}

// assistantBlock converts one block of an assistant message.
func assistantBlock(b message.Block) (sdk.ContentBlockParamUnion, bool) {
	switch b.Type {
	case message.BlockText:
		if b.Text != "" {
			return sdk.NewTextBlock(b.Text), true
		}
	case message.BlockThinking:
		// The API verifies thinking it is given back by its signature; a
		// thinking block without one (cut short) cannot be sent.
		if b.Signature != "" {
			return sdk.NewThinkingBlock(b.Signature, b.Thinking), true
		}
	case message.BlockToolUse:
		in, err := model.ParseToolInput(string(b.Input))
		if err != nil {
			in = json.RawMessage("{}")
		}
		return sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{ID: b.ID, Name: b.Name, Input: in}}, true
	}
	return sdk.ContentBlockParamUnion{}, false
}

// toolResult converts a tool_result block. Empty content is left out: the
// API rejects an empty text block.
func toolResult(b message.Block) sdk.ContentBlockParamUnion {
	r := &sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID}
	if b.Content != "" {
		r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Content}}}
	}
	if b.IsError {
		r.IsError = param.NewOpt(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: r}
}
