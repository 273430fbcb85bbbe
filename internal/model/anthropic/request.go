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
	if req.PromptCache {
		markCacheable(&p)
	}
	return p, nil
}

// markCacheable sets Anthropic's prompt-cache breakpoints (cache_control
// ephemeral) on the request's stable prefix, at most four, in the
// order the API caches: the last tool (the tool definitions), the system
// prompt, the end of the previous call's request (the message before
// the newest assistant message, so that the prefix the previous call
// wrote is read back even when more than 20 blocks were added since),
// and the end of this request (the whole conversation: the next call
// extends it). A breakpoint goes on the last block of a message that can
// carry one (thinking blocks cannot). The marks depend on the request
// alone, so the same conversation always gets the same marks.
func markCacheable(p *sdk.MessageNewParams) {
	if n := len(p.Tools); n > 0 && p.Tools[n-1].OfTool != nil {
		p.Tools[n-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	if n := len(p.System); n > 0 {
		p.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	last := len(p.Messages) - 1
	if last < 0 {
		return
	}
	for j := last; j > 0; j-- {
		if p.Messages[j].Role == sdk.MessageParamRoleAssistant {
			markMessage(&p.Messages[j-1])
			break
		}
	}
	markMessage(&p.Messages[last])
}

// markMessage puts a cache breakpoint on the last block of m that can
// carry one.
func markMessage(m *sdk.MessageParam) {
	for i := len(m.Content) - 1; i >= 0; i-- {
		if cc := m.Content[i].GetCacheControl(); cc != nil {
			*cc = sdk.NewCacheControlEphemeralParam()
			return
		}
	}
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
	many := countImages(ms) > manyImages
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
				results = append(results, toolResult(b, many))
			case message.BlockText:
				if b.Text != "" {
					other = append(other, sdk.NewTextBlock(b.Text))
				}
			case message.BlockImage:
				other = append(other, imageBlock(b, many))
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

// toolResult converts a tool_result block, its images after its text.
// Empty content is left out: the API rejects an empty text block.
func toolResult(b message.Block, many bool) sdk.ContentBlockParamUnion {
	r := &sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID}
	if b.Content != "" {
		r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Content}}}
	}
	for _, im := range b.Images {
		c := imageBlock(im, many)
		if c.OfImage != nil {
			r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfImage: c.OfImage})
		} else {
			r.Content = append(r.Content, sdk.ToolResultBlockParamContentUnion{OfText: c.OfText})
		}
	}
	if b.IsError {
		r.IsError = param.NewOpt(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: r}
}
