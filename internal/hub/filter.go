package hub

import (
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// filter is a resolved protocol.Filter compiled for matching.
type filter struct {
	types   map[event.Type]bool
	actors  map[string]bool // nil: every actor
	workers bool
}

func compile(f protocol.Filter) filter {
	c := filter{types: make(map[event.Type]bool, len(f.EventTypes)), workers: f.IncludeWorkerSessions}
	for _, t := range f.EventTypes {
		c.types[event.Type(t)] = true
	}
	if f.Actors != nil {
		c.actors = make(map[string]bool, len(f.Actors))
		for _, a := range f.Actors {
			c.actors[a] = true
		}
	}
	return c
}

func (f *filter) match(it *Item) bool {
	return f.types[it.Type] && (f.actors == nil || f.actors[it.Actor])
}

func (f *filter) matchEvent(ev *event.Event) bool {
	return f.types[ev.Type] && (f.actors == nil || f.actors[ev.Actor])
}

// wantsStreaming reports whether the filter asks for any streaming
// type: only then can a replay miss something the client wanted.
func (f *filter) wantsStreaming() bool {
	for t := range f.types {
		if event.FamilyOf(t) == event.Streaming {
			return true
		}
	}
	return false
}

// catalogTypes returns the filter's catalog-family types, for store
// queries.
func (f *filter) catalogTypes() []event.Type {
	var out []event.Type
	for t := range f.types {
		if event.FamilyOf(t) == event.Catalog {
			out = append(out, t)
		}
	}
	return out
}

// actorList returns the actors filter as a list, nil for every actor.
func (f *filter) actorList() []string {
	if f.actors == nil {
		return nil
	}
	out := make([]string, 0, len(f.actors))
	for a := range f.actors {
		out = append(out, a)
	}
	return out
}
