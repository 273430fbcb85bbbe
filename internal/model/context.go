package model

import (
	"context"
	"errors"
	"regexp"
	"strconv"

	"github.com/metis-agent/metis/internal/images"
	"github.com/metis-agent/metis/internal/message"
)

// ClassContextOverflow is the error class of a call the provider refused
// because the request does not fit the model's context window (or that
// ran into the window while answering). The agent loop compacts the
// conversation and retries such a call once (docs/context.md).
const ClassContextOverflow = "context_overflow"

// WindowLister is implemented by adapters whose endpoint reports its
// models' context windows (an OpenAI-compatible server listing
// context_length): the server learns them at start, config.yaml's
// models still winning.
type WindowLister interface {
	ContextWindows(ctx context.Context) (map[string]int, error)
}

// TaskSummary is Request.Task for a call that summarises a conversation
// for compaction: no tools are offered, and the answer is the summary.
const TaskSummary = "summary"

// Overflow returns a context_overflow error with message msg. window is
// the window the provider named in its refusal (0 if it named none).
func Overflow(msg string, window int, err error) *Error {
	return &Error{Class: ClassContextOverflow, Message: msg, Window: window, Err: err}
}

// OverflowWindow returns the context window a context_overflow error
// names, and whether err is one.
func OverflowWindow(err error) (window int, ok bool) {
	var me *Error
	if !errors.As(err, &me) || me.Class != ClassContextOverflow {
		return 0, false
	}
	return me.Window, true
}

// windowPatterns find the window in providers' overflow messages:
// Anthropic's "prompt is too long: 208310 tokens > 200000 maximum" and
// "input length and `max_tokens` exceed context limit: 199759 + 8192 >
// 200000", OpenAI's (and vLLM's) "This model's maximum context length
// is 128000 tokens".
var windowPatterns = []*regexp.Regexp{
	regexp.MustCompile(`tokens > (\d+) maximum`),
	regexp.MustCompile(`exceed context limit: \d+ \+ \d+ > (\d+)`),
	regexp.MustCompile(`maximum context length is (\d+) tokens`),
}

// WindowFromMessage returns the context window a provider's overflow
// message names, or 0.
func WindowFromMessage(msg string) int {
	for _, re := range windowPatterns {
		if m := re.FindStringSubmatch(msg); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// Token estimation. Between calls metis estimates a request's size from
// its bytes (docs/context.md): about four bytes a token for English and
// code, plus a few tokens of framing per message and per tool.
const (
	bytesPerToken      = 4
	messageFrameTokens = 4
	toolFrameTokens    = 8
)

// EstimateTokens estimates the input tokens of a request: its system
// prompt, tool definitions and messages.
func EstimateTokens(req Request) int {
	n := len(req.System) / bytesPerToken
	for _, t := range req.Tools {
		n += (len(t.Name)+len(t.Description)+len(t.InputSchema))/bytesPerToken + toolFrameTokens
	}
	for _, m := range req.Messages {
		n += EstimateMessageTokens(m.Content)
	}
	return n + 1
}

// EstimateMessageTokens estimates one message's tokens from its blocks.
// An image counts for what a provider charges for it once scaled
// (images.Tokens, at most about 1,600 tokens), not for its bytes.
func EstimateMessageTokens(blocks []message.Block) int {
	b, img := 0, 0
	for _, x := range blocks {
		b += len(x.Text) + len(x.Thinking) + len(x.Signature) + len(x.Content) + len(x.Input) + len(x.Name) + len(x.ID) + len(x.ToolUseID)
		if x.Compaction != nil {
			b += len(x.Compaction.Summary)
		}
		if x.Type == message.BlockImage {
			img += images.Tokens(x.Width, x.Height)
		}
		for _, im := range x.Images {
			img += images.Tokens(im.Width, im.Height)
		}
	}
	return b/bytesPerToken + img + messageFrameTokens
}

// EstimateTextTokens estimates the tokens of s.
func EstimateTextTokens(s string) int { return len(s) / bytesPerToken }
