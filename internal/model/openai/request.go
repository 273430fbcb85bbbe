package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

// params builds the Chat Completions request of a model call:
//
//   - model: req.Model without "openai:";
//   - messages: the system prompt first; user text; assistant text plus
//     tool_calls (arguments are the input JSON as a string; thinking
//     blocks are dropped, as the API has no place for them); each
//     tool_result block becomes its own role "tool" message, its content
//     prefixed with "error: " when is_error;
//   - tools as {type: function, function: {name, description, parameters}};
//   - max_completion_tokens for api.openai.com (its reasoning models
//     refuse max_tokens), max_tokens for any other base URL (Ollama,
//     llama.cpp and older vLLM read only max_tokens);
//   - stream_options: {include_usage: true} (stream: true is set by the
//     SDK's streaming call).
func (a *Adapter) params(req model.Request) (sdk.ChatCompletionNewParams, error) {
	name := strings.TrimPrefix(req.Model, Provider+":")
	if name == "" {
		return sdk.ChatCompletionNewParams{}, &model.Error{Class: model.ClassInvalidRequest,
			Message: fmt.Sprintf("model id %q names no model; want openai:NAME", req.Model)}
	}
	p := sdk.ChatCompletionNewParams{
		Model:         shared.ChatModel(name),
		Messages:      convertMessages(req.System, req.Messages),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if req.MaxTokens > 0 {
		if a.official {
			p.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
		} else {
			p.MaxTokens = sdk.Int(int64(req.MaxTokens))
		}
	}
	for _, t := range req.Tools {
		tool, err := convertTool(t)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, err
		}
		p.Tools = append(p.Tools, tool)
	}
	return p, nil
}

func convertTool(t model.ToolSpec) (sdk.ChatCompletionToolUnionParam, error) {
	params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	if s := bytes.TrimSpace(t.InputSchema); len(s) > 0 && string(s) != "null" {
		params = nil
		if err := json.Unmarshal(s, &params); err != nil || params == nil {
			return sdk.ChatCompletionToolUnionParam{}, &model.Error{Class: model.ClassInvalidRequest,
				Message: fmt.Sprintf("tool %q has an input schema that is not a JSON object", t.Name)}
		}
	}
	def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
	if t.Description != "" {
		def.Description = sdk.String(t.Description)
	}
	return sdk.ChatCompletionFunctionTool(def), nil
}

// convertMessages translates the conversation. Messages left with
// nothing to say (an assistant message of thinking only, say) are
// skipped: the API refuses empty assistant messages.
func convertMessages(system string, ms []message.Message) []sdk.ChatCompletionMessageParamUnion {
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(ms)+1)
	if system != "" {
		out = append(out, sdk.SystemMessage(system))
	}
	for _, m := range ms {
		var text strings.Builder
		var calls []sdk.ChatCompletionMessageToolCallUnionParam
		var results []sdk.ChatCompletionMessageParamUnion
		var imgs []sdk.ChatCompletionContentPartUnionParam // the user's, then the tool results'
		for _, b := range m.Content {
			switch b.Type {
			case message.BlockText:
				text.WriteString(b.Text)
			case message.BlockImage:
				imgs = append(imgs, imagePart(b))
			case message.BlockToolUse:
				args := string(bytes.TrimSpace(b.Input))
				if args == "" {
					args = "{}"
				}
				calls = append(calls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       b.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
					}})
			case message.BlockToolResult:
				content := b.Content
				if b.IsError {
					content = "error: " + content
				}
				results = append(results, sdk.ToolMessage(content, b.ToolUseID))
				if len(b.Images) > 0 {
					imgs = append(imgs, sdk.TextContentPart(fmt.Sprintf("The images of tool call %s:", b.ToolUseID)))
					for _, im := range b.Images {
						imgs = append(imgs, imagePart(im))
					}
				}
			}
		}
		switch m.Role {
		case message.RoleAssistant:
			if text.Len() == 0 && len(calls) == 0 {
				continue
			}
			am := sdk.ChatCompletionAssistantMessageParam{ToolCalls: calls}
			if text.Len() > 0 {
				am.Content.OfString = sdk.String(text.String())
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &am})
		case message.RoleTool:
			// A tool message holds text only: its images follow the
			// round's tool messages in a user message.
			out = append(out, results...)
			if len(imgs) > 0 {
				out = append(out, sdk.UserMessage(imgs))
			}
		default: // user; tool results sent in a user message still go as tool messages
			out = append(out, results...)
			switch {
			case len(imgs) > 0:
				parts := []sdk.ChatCompletionContentPartUnionParam{}
				if text.Len() > 0 {
					parts = append(parts, sdk.TextContentPart(text.String()))
				}
				out = append(out, sdk.UserMessage(append(parts, imgs...)))
			case text.Len() > 0 || len(results) == 0:
				out = append(out, sdk.UserMessage(text.String()))
			}
		}
	}
	return out
}
