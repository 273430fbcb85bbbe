package model

import (
	"fmt"
	"sort"
	"sync"
)

// Registry resolves model ids to adapters by provider.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Adapter
	reasons   map[string]string // why a known provider is unavailable
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{providers: map[string]Adapter{}, reasons: map[string]string{}}
}

// Register makes provider available.
func (r *Registry) Register(provider string, a Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.providers[provider] = a
	delete(r.reasons, provider)
}

// Unavailable records that a known provider cannot be used, and why (for
// example a missing API key); resolving it fails with that reason.
func (r *Registry) Unavailable(provider, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.providers, provider)
	r.reasons[provider] = reason
}

// Resolve returns the adapter for a model id, or an *Error of class
// model_unavailable saying why not.
func (r *Registry) Resolve(id string) (Adapter, error) {
	p, _, err := SplitID(id)
	if err != nil {
		return nil, &Error{Class: ClassUnavailable, Message: err.Error()}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if a, ok := r.providers[p]; ok {
		return a, nil
	}
	if why, ok := r.reasons[p]; ok {
		return nil, &Error{Class: ClassUnavailable, Message: fmt.Sprintf("model %s cannot be used: %s", id, why)}
	}
	return nil, &Error{Class: ClassUnavailable, Message: fmt.Sprintf("model %s: unknown provider %q (known: %v)", id, p, r.providerNames())}
}

// Check reports whether id resolves, without returning the adapter.
func (r *Registry) Check(id string) error {
	_, err := r.Resolve(id)
	return err
}

func (r *Registry) providerNames() []string {
	var out []string
	for p := range r.providers {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
