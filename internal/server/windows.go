package server

import (
	"context"
	"log/slog"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/price"
)

// longSessionConfig is the agent loop's configuration of long sessions
// (docs/context.md): the limit table, compaction, caching, the system
// prompt and max-calls.
func longSessionConfig(cfg config.Config, limits *price.LimitTable) agent.Config {
	return agent.Config{Limits: limits, AutoCompactOff: !cfg.AutoCompact, CompactionModel: cfg.CompactionModel,
		PromptCacheOff: !cfg.PromptCache, System: cfg.SystemPrompt, SystemFile: cfg.SystemPromptFile, Home: cfg.Home,
		MaxInstructionBytes: cfg.MaxInstructionBytes, MaxCalls: cfg.MaxCalls}
}

// learnWindows asks each provider whose endpoint was configured (a local
// OpenAI-compatible server) for its models' context windows, and
// records those it reports (config.yaml's models still win). It is
// bounded by listTimeout per provider and runs in the background: a
// slow server delays nothing.
func learnWindows(ctx context.Context, reg *model.Registry, cfg config.Config, limits *price.LimitTable, log *slog.Logger) {
	for _, p := range model.Providers() {
		if cfg.Providers[p.Name].BaseURL == "" {
			continue
		}
		a, err := reg.Resolve(p.Name + ":any")
		if err != nil {
			continue
		}
		wl, ok := a.(model.WindowLister)
		if !ok {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		windows, err := wl.ContextWindows(lctx)
		cancel()
		if err != nil {
			_, why := model.Classify(err)
			log.Debug("could not read the models' context windows", "provider", p.Name, "err", why)
			continue
		}
		for name, w := range windows {
			limits.Learn(p.Name+":"+name, price.Limits{ContextWindow: w})
		}
		if len(windows) > 0 {
			log.Info("context windows read from the provider", "provider", p.Name, "models", len(windows))
		}
	}
}
