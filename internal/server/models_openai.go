package server

import (
	"log/slog"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/model/openai"
)

func registerOpenAI(register func(string, model.Adapter, error), cfg config.Config, log *slog.Logger) {
	a, err := openai.New(openai.Options{APIKey: cfg.Providers.OpenAI.APIKey, BaseURL: cfg.Providers.OpenAI.BaseURL,
		IdleTimeout: cfg.ModelIdleTimeout, Logger: log})
	register(openai.Provider, a, err)
}
