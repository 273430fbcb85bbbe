package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/model/builtin"

	// The providers register themselves with internal/model; linking
	// them in is all the server does for each.
	_ "github.com/metis-agent/metis/internal/model/anthropic"
	_ "github.com/metis-agent/metis/internal/model/openai"
)

// listTimeout bounds the startup query of a local server's models.
const listTimeout = 3 * time.Second

// registerModels fills the registry from the registered providers: each
// one whose adapter can be constructed with its settings, and for the
// others the reason why not. It returns the default model and a sentence
// for the ready line explaining the choice: the configured one; else
// the default model of the first provider, by rank, that has an API key;
// else the first model a keyless local endpoint lists; else
// builtin:demo.
func registerModels(ctx context.Context, reg *model.Registry, cfg config.Config, log *slog.Logger) (string, string) {
	var local model.Lister
	var localName, localEnv string
	var keyed []model.Provider
	for _, p := range model.Providers() {
		s := cfg.Providers[p.Name]
		a, err := p.New(model.ProviderOptions{ProviderSettings: s, IdleTimeout: cfg.ModelIdleTimeout, DemoDelay: cfg.DemoDelay, Logger: log})
		if err != nil {
			_, why := model.Classify(err)
			reg.Unavailable(p.Name, why)
			continue
		}
		reg.Register(p.Name, a)
		switch l, ok := a.(model.Lister); {
		case s.APIKey != "" && p.DefaultModel != "":
			keyed = append(keyed, p)
		case s.APIKey == "" && s.BaseURL != "" && ok && local == nil:
			local, localName, localEnv = l, p.Name, p.BaseURLEnv
		}
	}
	switch {
	case cfg.DefaultModel != "":
		return cfg.DefaultModel, "configured"
	case len(keyed) > 0:
		return keyed[0].DefaultModel, envOr(keyed[0].APIKeyEnv, "providers."+keyed[0].Name+".api_key") + " is set"
	case local != nil:
		if name, why := localDefault(ctx, local, envOr(localEnv, "a provider's base_url"), log); name != "" {
			return localName + ":" + name, why
		}
		return builtin.ModelID, envOr(localEnv, "a provider's base_url") + " is set but its models could not be listed, so sessions use the offline demo model unless they name one"
	}
	return builtin.ModelID, "no provider key is set, so sessions use the offline demo model"
}

// localDefault picks the default model of a local endpoint: the first
// model it lists. It returns "" (and logs why) when it cannot be asked.
func localDefault(ctx context.Context, l model.Lister, what string, log *slog.Logger) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	names, err := l.Models(ctx)
	if err != nil || len(names) == 0 {
		why := "it lists no model"
		if err != nil {
			_, why = model.Classify(err)
		}
		log.Warn("could not list the models of "+what+"; set default-model to pick one", "err", why)
		return "", ""
	}
	why := what + " serves it"
	if len(names) > 1 {
		why = fmt.Sprintf("the first of the %d models %s serves; set default-model to pick another", len(names), what)
	}
	return names[0], why
}

func envOr(env, otherwise string) string {
	if env != "" {
		return env
	}
	return otherwise
}
