package price

import (
	"strings"
	"sync"
)

// Limits are a model's context window and output limit, in tokens (0:
// unknown). They sit beside the prices: list values for the models metis
// knows, overlaid with config.yaml's `models` and with what an
// OpenAI-compatible server reports of its models.
type Limits struct {
	// ContextWindow is what one request (input and output together) may
	// hold.
	ContextWindow int `yaml:"context_window" json:"context_window"`
	// MaxOutputTokens is the most a model call may ask for (max_tokens);
	// calls ask for less when it is smaller than max-output-tokens.
	MaxOutputTokens int `yaml:"max_output_tokens" json:"max_output_tokens"`
	// Vision says whether the model takes images (nil: unknown, taken as
	// no: such a model reads a one-line text in place of each image).
	Vision *bool `yaml:"vision,omitempty" json:"vision,omitempty"`
}

// Sees reports whether the model takes images.
func (l Limits) Sees() bool { return l.Vision != nil && *l.Vision }

// DefaultLimits are the published windows and output limits, keyed like
// DefaultPrices (a model id, or a prefix ending in "*"). builtin:demo has
// none: it has no window, and a session on it never compacts unless
// config.yaml gives it one.
//
// Vision is the published capability: every Claude model listed and
// the GPT-4.1, GPT-4o, GPT-5, o3 and o4-mini families take images;
// gpt-3.5-turbo and claude-3-5-haiku do not. builtin:demo takes them
// (it describes what it received).
func DefaultLimits() map[string]Limits {
	const k = 1000
	yes, no := ptr(true), ptr(false)
	return map[string]Limits{
		"anthropic:claude-opus-4*":     {ContextWindow: 200 * k, MaxOutputTokens: 32 * k, Vision: yes},
		"anthropic:claude-opus-4-5*":   {ContextWindow: 200 * k, MaxOutputTokens: 64 * k, Vision: yes},
		"anthropic:claude-opus-4-6*":   {ContextWindow: 1000 * k, MaxOutputTokens: 128 * k, Vision: yes},
		"anthropic:claude-sonnet-4*":   {ContextWindow: 200 * k, MaxOutputTokens: 64 * k, Vision: yes},
		"anthropic:claude-sonnet-4-6*": {ContextWindow: 1000 * k, MaxOutputTokens: 128 * k, Vision: yes},
		"anthropic:claude-haiku-4*":    {ContextWindow: 200 * k, MaxOutputTokens: 64 * k, Vision: yes},
		"anthropic:claude-3-7-sonnet*": {ContextWindow: 200 * k, MaxOutputTokens: 64 * k, Vision: yes},
		"anthropic:claude-3-5-haiku*":  {ContextWindow: 200 * k, MaxOutputTokens: 8192, Vision: no},

		"openai:gpt-4.1*":      {ContextWindow: 1_047_576, MaxOutputTokens: 32_768, Vision: yes},
		"openai:gpt-4o*":       {ContextWindow: 128 * k, MaxOutputTokens: 16_384, Vision: yes},
		"openai:gpt-5*":        {ContextWindow: 400 * k, MaxOutputTokens: 128 * k, Vision: yes},
		"openai:o3*":           {ContextWindow: 200 * k, MaxOutputTokens: 100 * k, Vision: yes},
		"openai:o4-mini*":      {ContextWindow: 200 * k, MaxOutputTokens: 100 * k, Vision: yes},
		"openai:gpt-3.5-turbo": {ContextWindow: 16_385, MaxOutputTokens: 4096, Vision: no},

		"builtin:demo": {Vision: yes},
	}
}

func ptr[T any](v T) *T { return &v }

// LimitTable answers a model's limits: config.yaml's `models` first,
// then what a provider reported (Learn), then DefaultLimits. Exact ids
// win over prefixes, the longest prefix among prefixes, and each field
// separately: a config entry setting only context_window keeps the list
// output limit. It is safe for concurrent use.
type LimitTable struct {
	configured, list keyed[Limits]

	mu      sync.RWMutex
	learned map[string]Limits // exact ids
}

// NewLimits builds a table from DefaultLimits and config.yaml's models.
func NewLimits(configured map[string]Limits) *LimitTable {
	return &LimitTable{configured: newKeyed(configured), list: newKeyed(DefaultLimits()), learned: map[string]Limits{}}
}

// Learn records what a provider reported of a model (an OpenAI-compatible
// server's context_length); config.yaml still wins.
func (t *LimitTable) Learn(model string, l Limits) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.learned[model] = l
}

// Lookup returns a model's limits; a field is 0 where nothing knows it.
func (t *LimitTable) Lookup(model string) Limits {
	if t == nil {
		return Limits{}
	}
	c, _ := t.configured.lookup(model)
	t.mu.RLock()
	l := t.learned[model]
	t.mu.RUnlock()
	d, _ := t.list.lookup(model)
	out := Limits{
		ContextWindow:   firstPositive(c.ContextWindow, l.ContextWindow, d.ContextWindow),
		MaxOutputTokens: firstPositive(c.MaxOutputTokens, l.MaxOutputTokens, d.MaxOutputTokens),
	}
	for _, v := range []*bool{c.Vision, l.Vision, d.Vision} {
		if v != nil {
			out.Vision = ptr(*v)
			break
		}
	}
	return out
}

func firstPositive(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// keyed holds values by model id ("provider:model") and by id prefix
// (a key ending in "*"): exact ids win over prefixes, the longest
// prefix among prefixes. Later maps override earlier ones.
type keyed[T any] struct {
	exact, prefixes map[string]T
}

func newKeyed[T any](maps ...map[string]T) keyed[T] {
	k := keyed[T]{exact: map[string]T{}, prefixes: map[string]T{}}
	for _, m := range maps {
		for key, v := range m {
			if pre, ok := strings.CutSuffix(key, "*"); ok {
				k.prefixes[pre] = v
			} else {
				k.exact[key] = v
			}
		}
	}
	return k
}

func (k keyed[T]) lookup(model string) (T, bool) {
	if v, ok := k.exact[model]; ok {
		return v, true
	}
	best, found := "", false
	var bv T
	for pre, v := range k.prefixes {
		if strings.HasPrefix(model, pre) && (!found || len(pre) > len(best)) {
			best, bv, found = pre, v, true
		}
	}
	return bv, found
}
