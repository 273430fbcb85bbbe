package model

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// A Provider is one kind of model adapter, as it registers itself: the
// provider part of model ids it serves, where its settings come from,
// and how to construct its adapter. Adding a provider is one package
// under internal/model that calls RegisterProvider from an init
// function, and one blank import in the server that links it in.
type Provider struct {
	// Name is the provider part of model ids ("anthropic" in
	// "anthropic:claude-sonnet-4-6") and its key under config.yaml's
	// providers.
	Name string
	// APIKeyEnv and BaseURLEnv name the environment variables that
	// override providers.<name>.api_key and .base_url ("" for none).
	APIKeyEnv, BaseURLEnv string
	// DefaultModel is the model sessions use when no default-model is
	// configured and this provider has an API key ("" for never).
	DefaultModel string
	// Rank orders the providers when the server picks a default model:
	// the lowest rank with a key wins.
	Rank int
	// Always marks a provider that needs no settings (builtin): its
	// adapter is constructed whatever the configuration.
	Always bool
	// New constructs the adapter, or fails with an *Error of class
	// model_unavailable saying what to set.
	New func(ProviderOptions) (Adapter, error)
}

// ProviderSettings are a provider's endpoint and key: config.yaml's
// providers.<name>, overridden by the provider's environment variables.
type ProviderSettings struct {
	APIKey  string `yaml:"api_key"`
	BaseURL string `yaml:"base_url"`
}

// ProviderOptions are what a provider's constructor receives.
type ProviderOptions struct {
	ProviderSettings
	// IdleTimeout fails a call whose stream sends nothing for this long
	// (0: the adapter's default).
	IdleTimeout time.Duration
	// DemoDelay is the pause between the offline demo model's deltas.
	DemoDelay time.Duration
	Logger    *slog.Logger
}

// Lister is implemented by adapters that can list the models their
// endpoint serves (a local OpenAI-compatible server), so that the server
// can default to one of them.
type Lister interface {
	Models(ctx context.Context) ([]string, error)
}

var providers struct {
	mu     sync.RWMutex
	byName map[string]Provider
}

// RegisterProvider makes a provider known. It panics on a provider
// without a name or constructor, or registered twice: both are
// programming errors found at start.
func RegisterProvider(p Provider) {
	if p.Name == "" || strings.ContainsAny(p.Name, ": ") || p.New == nil {
		panic(fmt.Sprintf("model: RegisterProvider: invalid provider %+v", p))
	}
	providers.mu.Lock()
	defer providers.mu.Unlock()
	if providers.byName == nil {
		providers.byName = map[string]Provider{}
	}
	if _, dup := providers.byName[p.Name]; dup {
		panic("model: RegisterProvider: provider " + p.Name + " registered twice")
	}
	providers.byName[p.Name] = p
}

// Providers returns every registered provider, by rank then name.
func Providers() []Provider {
	providers.mu.RLock()
	defer providers.mu.RUnlock()
	out := make([]Provider, 0, len(providers.byName))
	for _, p := range providers.byName {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Provider) int {
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// LookupProvider returns the registered provider of that name.
func LookupProvider(name string) (Provider, bool) {
	providers.mu.RLock()
	defer providers.mu.RUnlock()
	p, ok := providers.byName[name]
	return p, ok
}

// FromEnv returns s with the provider's environment variables, where
// set, overriding it; getenv is os.Getenv outside tests.
func (p Provider) FromEnv(s ProviderSettings, getenv func(string) string) ProviderSettings {
	if p.APIKeyEnv != "" {
		if v := getenv(p.APIKeyEnv); v != "" {
			s.APIKey = v
		}
	}
	if p.BaseURLEnv != "" {
		if v := getenv(p.BaseURLEnv); v != "" {
			s.BaseURL = v
		}
	}
	return s
}
