package model

import (
	"context"
	"sort"
	"time"
)

// listTimeout bounds how long Available waits for a provider that lists
// its models (a local server).
const listTimeout = 3 * time.Second

// Available lists the model ids sessions can use, by provider rank: the
// default model of each usable provider that has one, else the models a
// provider that can list them serves (a local OpenAI-compatible server,
// the builtin demo). unavailable holds the known providers that cannot
// be used, with the reason. A provider whose list fails is left out.
func (r *Registry) Available(ctx context.Context) (ids []string, unavailable map[string]string) {
	r.mu.RLock()
	adapters := make(map[string]Adapter, len(r.providers))
	for p, a := range r.providers {
		adapters[p] = a
	}
	unavailable = make(map[string]string, len(r.reasons))
	for p, why := range r.reasons {
		unavailable[p] = why
	}
	r.mu.RUnlock()
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	known := map[string]bool{}
	for _, p := range Providers() {
		known[p.Name] = true
		a, ok := adapters[p.Name]
		if !ok {
			continue
		}
		if p.DefaultModel != "" {
			add(p.DefaultModel)
			continue
		}
		if l, ok := a.(Lister); ok {
			for _, name := range list(ctx, l) {
				add(p.Name + ":" + name)
			}
		}
	}
	var rest []string // registered without a Provider entry (tests)
	for p := range adapters {
		if !known[p] {
			rest = append(rest, p)
		}
	}
	sort.Strings(rest)
	for _, p := range rest {
		if l, ok := adapters[p].(Lister); ok {
			for _, name := range list(ctx, l) {
				add(p + ":" + name)
			}
		}
	}
	return ids, unavailable
}

func list(ctx context.Context, l Lister) []string {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	names, err := l.Models(ctx)
	if err != nil {
		return nil
	}
	return names
}
