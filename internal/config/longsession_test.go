package config

import (
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/price"
)

// TestLongSessionDefaults: 25 calls a turn, $5 a turn, $50 a session,
// automatic compaction and prompt caching on, 32 KiB of each AGENTS.md.
func TestLongSessionDefaults(t *testing.T) {
	d := Defaults()
	want := LongSession{MaxCalls: 25, MaxTurnCost: 5, MaxSessionCost: 50, AutoCompact: true, PromptCache: true, MaxInstructionBytes: 32 << 10}
	if d.MaxCalls != want.MaxCalls || d.MaxTurnCost != want.MaxTurnCost || d.MaxSessionCost != want.MaxSessionCost ||
		!d.AutoCompact || !d.PromptCache || d.MaxInstructionBytes != want.MaxInstructionBytes || d.Models != nil {
		t.Fatalf("defaults %+v", d.LongSession)
	}
}

// TestModelsKey: config.yaml's models sets windows and output limits by
// model id or prefix; the other long-session keys read as flags do.
func TestModelsKey(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `models:
  "openai:qwen2.5-coder:7b": {context_window: 32768}
  "anthropic:claude-sonnet-4*": {context_window: 1000000, max_output_tokens: 64000}
auto_compact: false
max-turn-cost: 0.5
system-prompt: "Be terse."
`)
	c, err := Load([]string{"--home", dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Models["openai:qwen2.5-coder:7b"] != (price.Limits{ContextWindow: 32768}) ||
		c.Models["anthropic:claude-sonnet-4*"] != (price.Limits{ContextWindow: 1000000, MaxOutputTokens: 64000}) ||
		c.AutoCompact || c.MaxTurnCost != 0.5 || c.SystemPrompt != "Be terse." {
		t.Fatalf("read %+v", c.LongSession)
	}
}

// TestModelsKeyRefusesNonsense: a key that is no model id, a negative
// window, an unknown field and a cost that is not a number are refused,
// naming the key.
func TestModelsKeyRefusesNonsense(t *testing.T) {
	for text, want := range map[string]string{
		"models:\n  sonnet: {context_window: 1}\n":        "want a model id",
		"models:\n  \"openai:x\": {context_window: -1}\n": "must not be negative",
		"models:\n  \"openai:x\": {context-window: 1}\n":  "context-window",
		"models: 5\n":              "models",
		"max-session-cost: lots\n": "US dollars",
		"max-turn-cost: -1\n":      "non-negative",
		"prompt-cache: maybe\n":    "true or false",
	} {
		dir := t.TempDir()
		writeConfig(t, dir, text)
		if _, err := Load([]string{"--home", dir}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", text, err, want)
		}
	}
}
