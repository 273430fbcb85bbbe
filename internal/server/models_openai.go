package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/model/openai"
)

// listTimeout bounds the startup query of a local server's models.
const listTimeout = 3 * time.Second

// registerOpenAI registers the openai provider. It returns the adapter
// when it points at a server of the user's own (OPENAI_BASE_URL set, no
// key), whose models can then pick the default; nil otherwise.
func registerOpenAI(register func(string, model.Adapter, error), cfg config.Config, log *slog.Logger) *openai.Adapter {
	a, err := openai.New(openai.Options{APIKey: cfg.Providers.OpenAI.APIKey, BaseURL: cfg.Providers.OpenAI.BaseURL,
		IdleTimeout: cfg.ModelIdleTimeout, Logger: log})
	if err != nil {
		register(openai.Provider, nil, err)
		return nil
	}
	register(openai.Provider, a, nil)
	if cfg.Providers.OpenAI.APIKey == "" && cfg.Providers.OpenAI.BaseURL != "" {
		return a
	}
	return nil
}

// localDefault picks the default model of a local OpenAI-compatible
// server: the first model it lists. It returns "" (and logs why) when
// the server cannot be asked.
func localDefault(ctx context.Context, a *openai.Adapter, log *slog.Logger) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	names, err := a.Models(ctx)
	if err != nil {
		_, why := model.Classify(err)
		log.Warn("could not list the models of OPENAI_BASE_URL; set default-model to pick one", "err", why)
		return "", ""
	}
	why := "OPENAI_BASE_URL serves it"
	if len(names) > 1 {
		why = fmt.Sprintf("the first of the %d models OPENAI_BASE_URL serves; set default-model to pick another", len(names))
	}
	return openai.Provider + ":" + names[0], why
}
