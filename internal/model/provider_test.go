package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"

	_ "github.com/metis-agent/metis/internal/model/builtin"
)

// TestBuiltinNeedsNoSettings: the offline demo model is constructed
// with nothing configured and answers a prompt.
func TestBuiltinNeedsNoSettings(t *testing.T) {
	p, ok := model.LookupProvider("builtin")
	if !ok || !p.Always {
		t.Fatalf("builtin: %+v, %v", p, ok)
	}
	a, err := p.New(model.ProviderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{Model: "builtin:demo", Messages: []message.Message{{Role: message.RoleUser,
		Content: []message.Block{{Type: message.BlockText, Text: "hello"}}}}}
	n := 0
	if _, err := a.Stream(context.Background(), req, func(model.Delta) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("Stream: %d deltas, %v", n, err)
	}
}

// TestProviderFromEnv: a provider's environment variables override the
// file's settings, each only where set.
func TestProviderFromEnv(t *testing.T) {
	p := model.Provider{Name: "x", APIKeyEnv: "X_KEY", BaseURLEnv: "X_URL"}
	env := map[string]string{"X_URL": "http://env"}
	got := p.FromEnv(model.ProviderSettings{APIKey: "file-key", BaseURL: "http://file"}, func(k string) string { return env[k] })
	if got != (model.ProviderSettings{APIKey: "file-key", BaseURL: "http://env"}) {
		t.Fatalf("FromEnv: %+v", got)
	}
}

// TestRegisterProviderRefusesMistakes: an unnamed provider, one without
// a constructor and a second registration of a name are programming
// errors, refused at once.
func TestRegisterProviderRefusesMistakes(t *testing.T) {
	newFn := func(model.ProviderOptions) (model.Adapter, error) { return nil, errors.New("unused") }
	for name, p := range map[string]model.Provider{
		"no name":        {New: newFn},
		"colon in name":  {Name: "a:b", New: newFn},
		"no constructor": {Name: "test-noctor"},
		"duplicate":      {Name: "builtin", New: newFn},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			model.RegisterProvider(p)
		}()
	}
}
