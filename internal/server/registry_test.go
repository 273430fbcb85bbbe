package server_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/model"
)

// TestEveryProviderIsConstructible: each provider the server links in
// (so each one the binary has), given an
// API key and a base URL, constructs an adapter that the model registry
// resolves for its model ids; a provider that needs settings, given
// none, fails with a model_unavailable error saying what to set.
func TestEveryProviderIsConstructible(t *testing.T) {
	ps := model.Providers()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	for _, want := range []string{"anthropic", "builtin", "openai"} {
		if !slices.Contains(names, want) {
			t.Errorf("provider %s is not registered (registered: %v)", want, names)
		}
	}
	for _, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			a, err := p.New(model.ProviderOptions{
				ProviderSettings: model.ProviderSettings{APIKey: "test-key", BaseURL: "http://127.0.0.1:1/v1"},
				IdleTimeout:      time.Second,
			})
			if err != nil || a == nil {
				t.Fatalf("New: %v, %v", a, err)
			}
			reg := model.NewRegistry()
			reg.Register(p.Name, a)
			if got, err := reg.Resolve(p.Name + ":some-model"); err != nil || got != a {
				t.Fatalf("Resolve: %v, %v", got, err)
			}
			if p.DefaultModel != "" && !strings.HasPrefix(p.DefaultModel, p.Name+":") {
				t.Errorf("default model %q is not one of the provider's", p.DefaultModel)
			}
			if got, ok := model.LookupProvider(p.Name); !ok || got.Name != p.Name {
				t.Errorf("LookupProvider(%q) = %v, %v", p.Name, got.Name, ok)
			}
			if p.Always {
				return
			}
			a, err = p.New(model.ProviderOptions{})
			var me *model.Error
			if err == nil || a != nil || !errors.As(err, &me) || me.Class != model.ClassUnavailable {
				t.Fatalf("New without settings: %v, %v", a, err)
			}
			if p.APIKeyEnv != "" && !strings.Contains(me.Message, p.APIKeyEnv) {
				t.Errorf("the refusal %q does not say to set %s", me.Message, p.APIKeyEnv)
			}
		})
	}
}
