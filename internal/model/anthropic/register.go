package anthropic

import "github.com/metis-agent/metis/internal/model"

// DefaultModel is the model sessions use when ANTHROPIC_API_KEY is set
// and no default-model is configured.
const DefaultModel = Provider + ":claude-sonnet-4-6"

func init() {
	model.RegisterProvider(model.Provider{
		Name:         Provider,
		APIKeyEnv:    "ANTHROPIC_API_KEY",
		BaseURLEnv:   "ANTHROPIC_BASE_URL",
		DefaultModel: DefaultModel,
		Rank:         10,
		New: func(o model.ProviderOptions) (model.Adapter, error) {
			a, err := New(Options{APIKey: o.APIKey, BaseURL: o.BaseURL, IdleTimeout: o.IdleTimeout, Logger: o.Logger})
			if err != nil {
				return nil, err
			}
			return a, nil
		},
	})
}
