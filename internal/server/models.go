package server

import (
	"context"
	"log/slog"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/model/anthropic"
	"github.com/metis-agent/metis/internal/model/builtin"
)

// Default models when a provider's key is set and no default-model is
// configured.
const (
	defaultAnthropicModel = "anthropic:claude-sonnet-4-6"
	defaultOpenAIModel    = "openai:gpt-4.1"
)

// registerModels fills the registry: builtin:demo always, each provider
// when it can be used, and the reason when it cannot. It returns the
// default model and a sentence for the ready line explaining the choice.
func registerModels(ctx context.Context, reg *model.Registry, cfg config.Config, log *slog.Logger) (string, string) {
	reg.Register(builtin.Provider, builtin.Demo{Delay: cfg.DemoDelay})
	available := map[string]bool{}
	register := func(provider string, a model.Adapter, err error) {
		if err != nil {
			_, why := model.Classify(err)
			reg.Unavailable(provider, why)
			return
		}
		reg.Register(provider, a)
		available[provider] = true
	}
	a, err := anthropic.New(anthropic.Options{APIKey: cfg.Providers.Anthropic.APIKey, BaseURL: cfg.Providers.Anthropic.BaseURL,
		IdleTimeout: cfg.ModelIdleTimeout, Logger: log})
	register(anthropic.Provider, a, err)
	local := registerOpenAI(register, cfg, log)

	switch {
	case cfg.DefaultModel != "":
		return cfg.DefaultModel, "configured"
	case available[anthropic.Provider]:
		return defaultAnthropicModel, "ANTHROPIC_API_KEY is set"
	case available["openai"] && cfg.Providers.OpenAI.APIKey != "":
		return defaultOpenAIModel, "OPENAI_API_KEY is set"
	case local != nil:
		if id, why := localDefault(ctx, local, log); id != "" {
			return id, why
		}
		return builtin.ModelID, "OPENAI_BASE_URL is set but its models could not be listed, so sessions use the offline demo model unless they name one"
	}
	return builtin.ModelID, "no provider key is set, so sessions use the offline demo model"
}
