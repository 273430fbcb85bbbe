package price

import "testing"

// TestLimitsLayers: config.yaml's models win over what a provider
// reported, which wins over the list; each field separately; the
// longest prefix among prefixes; unknown models have none.
func TestLimitsLayers(t *testing.T) {
	l := NewLimits(map[string]Limits{
		"anthropic:claude-sonnet-4-6": {ContextWindow: 200000},
		"openai:local-*":              {MaxOutputTokens: 2048},
	})
	l.Learn("openai:local-qwen", Limits{ContextWindow: 32768})
	l.Learn("anthropic:claude-sonnet-4-6", Limits{ContextWindow: 5})
	for id, want := range map[string]Limits{
		"anthropic:claude-sonnet-4-6":          {ContextWindow: 200000, MaxOutputTokens: 128000},
		"anthropic:claude-sonnet-4-5-20250929": {ContextWindow: 200000, MaxOutputTokens: 64000},
		"anthropic:claude-opus-4-5":            {ContextWindow: 200000, MaxOutputTokens: 64000},
		"openai:local-qwen":                    {ContextWindow: 32768, MaxOutputTokens: 2048},
		"openai:gpt-4.1-mini":                  {ContextWindow: 1047576, MaxOutputTokens: 32768},
		"builtin:demo":                         {},
		"nobody:knows":                         {},
	} {
		got := l.Lookup(id)
		got.Vision = nil // TestVisionLayers
		if got != want {
			t.Errorf("%s: %+v, want %+v", id, got, want)
		}
	}
	var none *LimitTable
	if got := none.Lookup("anthropic:claude-sonnet-4-6"); got != (Limits{}) {
		t.Errorf("a nil table knows %+v", got)
	}
}

// TestVisionLayers: whether a model takes images comes from config.yaml
// first (true or false), then the list; a model nothing knows does not
// see (it gets a text in place of each image).
func TestVisionLayers(t *testing.T) {
	no, yes := false, true
	l := NewLimits(map[string]Limits{
		"anthropic:claude-sonnet-4-6": {Vision: &no},
		"openai:local-llava":          {Vision: &yes},
		"openai:gpt-4o-mini":          {ContextWindow: 1000}, // sets no vision: the list's stands
	})
	for id, want := range map[string]bool{
		"anthropic:claude-sonnet-4-6": false,
		"anthropic:claude-opus-4-5":   true,
		"openai:local-llava":          true,
		"openai:local-other":          false,
		"openai:gpt-4o-mini":          true,
		"openai:gpt-3.5-turbo":        false,
		"builtin:demo":                true,
		"nobody:knows":                false,
	} {
		if got := l.Lookup(id).Sees(); got != want {
			t.Errorf("%s sees: %v, want %v", id, got, want)
		}
	}
}
