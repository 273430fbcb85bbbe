package builtin

import "github.com/metis-agent/metis/internal/model"

func init() {
	model.RegisterProvider(model.Provider{
		Name:   Provider,
		Always: true,
		Rank:   1000, // never picked by key: it is the fallback
		New: func(o model.ProviderOptions) (model.Adapter, error) {
			return Demo{Delay: o.DemoDelay}, nil
		},
	})
}
