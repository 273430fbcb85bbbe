package price

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/message"
)

func TestPriceLookup(t *testing.T) {
	var logs bytes.Buffer
	tb := NewTable(map[string]Price{"openai:gpt-4.1": {Input: 9, Output: 9}}, slog.New(slog.NewTextHandler(&logs, nil)))
	cases := map[string]float64{ // input price per Mtok
		"anthropic:claude-sonnet-4-6":         3,
		"anthropic:claude-opus-4-6":           5,
		"anthropic:claude-opus-4-1":           15,
		"anthropic:claude-haiku-4-5-20251001": 1,
		"openai:gpt-4.1":                      9, // overridden
		"openai:gpt-4.1-mini":                 0.4,
		"openai:gpt-4o":                       2.5,
		"openai:gpt-4o-mini":                  0.15,
		"openai:gpt-5":                        1.25,
		"openai:gpt-5-mini":                   0.25,
		"builtin:demo":                        0,
	}
	for model, in := range cases {
		p, ok := tb.Lookup(model)
		if !ok || p.Input != in {
			t.Errorf("%s: %+v %v, want input %v", model, p, ok, in)
		}
	}
	u := message.Usage{InputTokens: 1_000_000, OutputTokens: 500_000, CacheReadTokens: 1_000_000}
	if c := tb.Cost("anthropic:claude-sonnet-4-6", u); math.Abs(c-(3+7.5+0.3)) > 1e-9 {
		t.Errorf("cost %v", c)
	}
	if c := tb.Cost("mystery:model", u); c != 0 {
		t.Errorf("unknown model cost %v", c)
	}
	tb.Cost("mystery:model", u)
	if n := strings.Count(logs.String(), "mystery:model"); n != 1 {
		t.Errorf("unknown model logged %d times, want once", n)
	}
}
