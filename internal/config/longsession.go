package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
)

// LongSession holds the settings of long sessions (docs/context.md):
// the models' windows, compaction, prompt caching, the system prompt and
// the budgets.
type LongSession struct {
	// Models is config.yaml's `models`: a model's context window and
	// output limit by id ("provider:model", or a prefix ending in "*"),
	// over the list values and what a local server reports.
	Models map[string]price.Limits
	// MaxCalls bounds the model calls of one turn.
	MaxCalls int
	// MaxTurnCost and MaxSessionCost are the cost limits, in USD, new
	// sessions start with (0: none).
	MaxTurnCost, MaxSessionCost float64
	// AutoCompact compacts a conversation before a call that would pass
	// its window, and after a provider's overflow.
	AutoCompact bool
	// CompactionModel summarises compactions ("": the session's model).
	CompactionModel string
	// PromptCache marks the cacheable prefix of Anthropic requests.
	PromptCache bool
	// SystemPrompt replaces the default system prompt's base;
	// SystemPromptFile does the same from a file (re-read each turn).
	SystemPrompt, SystemPromptFile string
	// MaxInstructionBytes bounds each AGENTS.md (or CLAUDE.md) read into
	// the system prompt.
	MaxInstructionBytes int
}

// Defaults of the long-session settings.
const (
	DefaultMaxCalls            = 25
	DefaultMaxTurnCost         = 5.0
	DefaultMaxSessionCost      = 50.0
	DefaultMaxInstructionBytes = 32 << 10
)

func defaultLongSession() LongSession {
	return LongSession{MaxCalls: DefaultMaxCalls, MaxTurnCost: DefaultMaxTurnCost, MaxSessionCost: DefaultMaxSessionCost,
		AutoCompact: true, PromptCache: true, MaxInstructionBytes: DefaultMaxInstructionBytes}
}

func init() {
	fields = append(fields,
		intField("max-calls", "model calls a turn may make before it ends with max_llm_calls", 1, func(c *Config) *int { return &c.MaxCalls }),
		usdField("max-turn-cost", "USD a turn may spend on model calls before it ends with budget_exceeded; new sessions start with it (0: no limit)", func(c *Config) *float64 { return &c.MaxTurnCost }),
		usdField("max-session-cost", "USD a session may spend (its workers included) before its turns end with budget_exceeded; new sessions start with it, PATCH /sessions/{id} changes it (0: no limit)", func(c *Config) *float64 { return &c.MaxSessionCost }),
		boolField("auto-compact", "compact a conversation before a model call that would pass the model's context window, and after a provider refuses one as too long", func(c *Config) *bool { return &c.AutoCompact }),
		strField("compaction-model", "model that summarises compactions (default: the session's model)", func(c *Config) *string { return &c.CompactionModel }),
		boolField("prompt-cache", "ask Anthropic to cache the prompt prefix (system prompt, tools, conversation)", func(c *Config) *bool { return &c.PromptCache }),
		strField("system-prompt", "text that replaces the default system prompt (the environment and AGENTS.md are still added)", func(c *Config) *string { return &c.SystemPrompt }),
		strField("system-prompt-file", "file read for the system prompt instead of system-prompt (re-read each turn)", func(c *Config) *string { return &c.SystemPromptFile }),
		intField("max-instruction-bytes", "bytes of each AGENTS.md (or CLAUDE.md) included in the system prompt; a longer file is cut", 1, func(c *Config) *int { return &c.MaxInstructionBytes }),
	)
	structured["models"] = func(c *Config, node *yaml.Node) error {
		var m map[string]price.Limits
		if err := decodeStrict(node, &m); err != nil {
			return err
		}
		if err := checkModels(m); err != nil {
			return err
		}
		c.Models = m
		return nil
	}
}

// checkModels refuses a models entry whose key is not a model id (or a
// prefix of one ending in "*") or whose limits are negative.
func checkModels(m map[string]price.Limits) error {
	for id, l := range m {
		if _, _, err := model.SplitID(strings.TrimSuffix(id, "*")); err != nil && !strings.HasSuffix(id, ":*") {
			return fmt.Errorf("%q: want a model id such as anthropic:claude-sonnet-4-6 (or a prefix ending in *)", id)
		}
		if l.ContextWindow < 0 || l.MaxOutputTokens < 0 {
			return fmt.Errorf("%q: context_window and max_output_tokens must not be negative", id)
		}
	}
	return nil
}

func usdField(name, usage string, p func(*Config) *float64) field {
	return field{name, usage,
		func(c *Config) string { return strconv.FormatFloat(*p(c), 'f', -1, 64) },
		func(c *Config, s string) error {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return errors.New("want a number of US dollars")
			}
			if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return errors.New("must be a non-negative number")
			}
			*p(c) = f
			return nil
		}}
}
