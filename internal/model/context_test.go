package model

import (
	"testing"

	"github.com/metis-agent/metis/internal/message"
)

func TestWindowFromMessage(t *testing.T) {
	for msg, want := range map[string]int{
		"prompt is too long: 200251 tokens > 200000 maximum":                                                        200000,
		"input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length":         200000,
		"This model's maximum context length is 128000 tokens. However, your messages resulted in 130417 tokens.":   128000,
		"the request exceeds the available context size, try increasing it":                                         0,
		"prompt is too long: 99999999999999999999999 tokens > 99999999999999999999999999999999999999999999 maximum": 0,
	} {
		if got := WindowFromMessage(msg); got != want {
			t.Errorf("WindowFromMessage(%q) = %d, want %d", msg, got, want)
		}
	}
}

// FuzzWindowFromMessage: a provider's error text never panics the
// reader and never yields a negative window.
func FuzzWindowFromMessage(f *testing.F) {
	f.Add("prompt is too long: 200251 tokens > 200000 maximum")
	f.Add("maximum context length is 4096 tokens")
	f.Add("exceed context limit: 1 + 2 > -3")
	f.Fuzz(func(t *testing.T, s string) {
		if n := WindowFromMessage(s); n < 0 {
			t.Fatalf("window %d from %q", n, s)
		}
	})
}

// TestEstimateTokensCountsEverythingSent: the system prompt, the tools
// and every block's text grow the estimate, at about four bytes a token.
func TestEstimateTokensCountsEverythingSent(t *testing.T) {
	base := EstimateTokens(Request{})
	req := Request{System: string(make([]byte, 400)), Tools: []ToolSpec{{Name: "t", InputSchema: make([]byte, 400)}},
		Messages: []message.Message{{Content: []message.Block{message.Text(string(make([]byte, 400))),
			{Type: message.BlockToolResult, Content: string(make([]byte, 400))}}}}}
	got := EstimateTokens(req) - base
	if got < 400 || got > 440 {
		t.Fatalf("1,600 bytes estimated at %d tokens", got)
	}
}
