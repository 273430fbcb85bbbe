package price

import (
	"log/slog"
	"sync"

	"github.com/metis-agent/metis/internal/message"
)

// Price is a model's price in US dollars per million tokens.
type Price struct {
	Input      float64 `yaml:"input" json:"input"`
	Output     float64 `yaml:"output" json:"output"`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read"`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write"`
}

// DefaultPrices are list prices per million tokens, keyed by model id or
// by an id prefix ending in "*". They are defaults: config.yaml's
// `prices` overrides or extends them.
func DefaultPrices() map[string]Price {
	return map[string]Price{
		"builtin:*": {},

		"anthropic:claude-opus-4*":   {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
		"anthropic:claude-opus-4-5*": {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
		"anthropic:claude-opus-4-6*": {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
		"anthropic:claude-sonnet-4*": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
		"anthropic:claude-haiku-4*":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},

		"openai:gpt-4.1":       {Input: 2, Output: 8, CacheRead: 0.5},
		"openai:gpt-4.1-mini*": {Input: 0.4, Output: 1.6, CacheRead: 0.1},
		"openai:gpt-4.1-nano*": {Input: 0.1, Output: 0.4, CacheRead: 0.025},
		"openai:gpt-4o":        {Input: 2.5, Output: 10, CacheRead: 1.25},
		"openai:gpt-4o-2*":     {Input: 2.5, Output: 10, CacheRead: 1.25},
		"openai:gpt-4o-mini*":  {Input: 0.15, Output: 0.6, CacheRead: 0.075},
		"openai:gpt-5":         {Input: 1.25, Output: 10, CacheRead: 0.125},
		"openai:gpt-5-2*":      {Input: 1.25, Output: 10, CacheRead: 0.125},
		"openai:gpt-5-mini*":   {Input: 0.25, Output: 2, CacheRead: 0.025},
		"openai:gpt-5-nano*":   {Input: 0.05, Output: 0.4, CacheRead: 0.005},
	}
}

// Table prices usage. Exact ids win over prefixes; the longest prefix
// wins among prefixes. An unknown model costs 0 and is logged once.
type Table struct {
	byID keyed[Price]
	log  *slog.Logger

	mu     sync.Mutex
	warned map[string]bool
}

// NewTable builds a table from DefaultPrices overlaid with overrides.
func NewTable(overrides map[string]Price, log *slog.Logger) *Table {
	if log == nil {
		log = slog.Default()
	}
	return &Table{byID: newKeyed(DefaultPrices(), overrides), log: log, warned: map[string]bool{}}
}

// Lookup returns the price of a model id.
func (t *Table) Lookup(model string) (Price, bool) { return t.byID.lookup(model) }

// Cost returns u priced for model, in US dollars.
func (t *Table) Cost(model string, u message.Usage) float64 {
	p, ok := t.Lookup(model)
	if !ok {
		t.mu.Lock()
		if !t.warned[model] {
			t.warned[model] = true
			t.log.Warn("no price for model; its calls are counted as free", "model", model)
		}
		t.mu.Unlock()
		return 0
	}
	const m = 1e6
	return float64(u.InputTokens)*p.Input/m + float64(u.OutputTokens)*p.Output/m +
		float64(u.CacheReadTokens)*p.CacheRead/m + float64(u.CacheCreationTokens)*p.CacheWrite/m
}
