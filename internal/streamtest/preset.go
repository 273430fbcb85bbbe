package streamtest

import (
	"slices"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// PresetTypes is a filter preset's type set. It panics on an unknown
// preset: that is a mistake in the test.
func PresetTypes(preset string) map[string]bool {
	ts, ok := event.Preset(preset)
	if !ok {
		panic("streamtest: unknown preset " + preset)
	}
	m := map[string]bool{}
	for _, t := range ts {
		m[string(t)] = true
	}
	return m
}

// PresetFilter returns a preset's types as an explicit filter (sorted),
// with or without the worker sessions.
func PresetFilter(preset string) func(workers bool) protocol.Filter {
	var names []string
	for ty := range PresetTypes(preset) {
		names = append(names, ty)
	}
	slices.Sort(names)
	return func(workers bool) protocol.Filter {
		return protocol.Filter{EventTypes: names, IncludeWorkerSessions: workers}
	}
}
