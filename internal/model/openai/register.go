package openai

import "github.com/metis-agent/metis/internal/model"

// DefaultModel is the model sessions use when OPENAI_API_KEY is set, no
// other provider ranks before it, and no default-model is configured.
const DefaultModel = Provider + ":gpt-4.1"

func init() {
	model.RegisterProvider(model.Provider{
		Name:         Provider,
		APIKeyEnv:    "OPENAI_API_KEY",
		BaseURLEnv:   "OPENAI_BASE_URL",
		DefaultModel: DefaultModel,
		Rank:         20,
		New: func(o model.ProviderOptions) (model.Adapter, error) {
			a, err := New(Options{APIKey: o.APIKey, BaseURL: o.BaseURL, IdleTimeout: o.IdleTimeout, Logger: o.Logger})
			if err != nil {
				return nil, err
			}
			return a, nil
		},
	})
}
