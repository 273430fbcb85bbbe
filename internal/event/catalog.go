package event

import (
	"slices"
	"strings"
)

// Type is an event type, "<domain>.<verb>".
type Type string

// Family tells whether an event type is persisted.
type Family uint8

const (
	// Catalog events are domain events: committed to the trace store
	// before anyone sees them, then dispatched through the bus.
	Catalog Family = iota + 1
	// Streaming events are transient live updates (spec §5): never
	// persisted, delivered straight from the agent loop to clients.
	Streaming
)

func (f Family) String() string {
	switch f {
	case Catalog:
		return "catalog"
	case Streaming:
		return "streaming"
	}
	return "unknown"
}

// Catalog event types.
const (
	SessionCreated Type = "session.created"

	TurnStarted   Type = "turn.started"
	TurnCompleted Type = "turn.completed"
	TurnCancelled Type = "turn.cancelled"

	RouteDecided          Type = "route.decided"
	RoutingPolicyReloaded Type = "routing.policy_reloaded"

	LLMCallStarted   Type = "llm.call_started"
	LLMCallCompleted Type = "llm.call_completed"
	LLMCallFailed    Type = "llm.call_failed"

	ToolCalled    Type = "tool.called"
	ToolCompleted Type = "tool.completed"
	ToolFailed    Type = "tool.failed"

	DelegateStarted   Type = "delegate.started"
	DelegateCompleted Type = "delegate.completed"
	DelegateFailed    Type = "delegate.failed"

	FeedbackSubmitted Type = "feedback.submitted"

	BusHandlerWarning       Type = "bus.handler_warning"
	BusSubscriberRegistered Type = "bus.subscriber_registered"
	BusSubscriberUnregister Type = "bus.subscriber_unregistered"
)

// Streaming-only event types (spec §5.3).
const (
	MessageStart      Type = "message.start"
	TextDelta         Type = "text.delta"
	ThinkingDelta     Type = "thinking.delta"
	ToolUseStart      Type = "tool.use_start"
	ToolUseInputDelta Type = "tool.use_input_delta"
	ToolUseEnd        Type = "tool.use_end"
	MessageComplete   Type = "message.complete"
)

// Info describes one catalog entry.
type Info struct {
	Type    Type
	Family  Family
	Emitter string // the component that emits it, for docs and debugging
	Chat    bool   // included in preset:chat
}

// Domain returns the part before the first dot.
func (t Type) Domain() string {
	d, _, _ := strings.Cut(string(t), ".")
	return d
}

// catalog is the closed list of every event type metis emits. Adding a
// type here is the one step that makes it valid in filters and presets;
// docs/event-catalog.md documents each entry.
var catalog = []Info{
	{SessionCreated, Catalog, "session manager", false},
	{TurnStarted, Catalog, "session manager", true},
	{TurnCompleted, Catalog, "agent loop", true},
	{TurnCancelled, Catalog, "agent loop", true},
	{RouteDecided, Catalog, "router (via agent loop)", true},
	{RoutingPolicyReloaded, Catalog, "routing engine (server)", false},
	{LLMCallStarted, Catalog, "agent loop", true},
	{LLMCallCompleted, Catalog, "agent loop", true},
	{LLMCallFailed, Catalog, "agent loop", true},
	{ToolCalled, Catalog, "tool dispatcher", true},
	{ToolCompleted, Catalog, "tool dispatcher", true},
	{ToolFailed, Catalog, "tool dispatcher", true},
	{DelegateStarted, Catalog, "delegate tool", true},
	{DelegateCompleted, Catalog, "delegate tool", true},
	{DelegateFailed, Catalog, "delegate tool", true},
	{FeedbackSubmitted, Catalog, "HTTP API", true},
	{BusHandlerWarning, Catalog, "bus, streaming server, session manager", false},
	{BusSubscriberRegistered, Catalog, "bus, streaming server", false},
	{BusSubscriberUnregister, Catalog, "bus, streaming server", false},

	{MessageStart, Streaming, "model adapter (via agent loop)", true},
	{TextDelta, Streaming, "model adapter (via agent loop)", true},
	{ThinkingDelta, Streaming, "model adapter (via agent loop)", true},
	{ToolUseStart, Streaming, "model adapter (via agent loop)", true},
	{ToolUseInputDelta, Streaming, "model adapter (via agent loop)", true},
	{ToolUseEnd, Streaming, "model adapter (via agent loop)", true},
	{MessageComplete, Streaming, "model adapter (via agent loop)", true},
}

var byType = func() map[Type]Info {
	m := make(map[Type]Info, len(catalog))
	for _, i := range catalog {
		m[i.Type] = i
	}
	return m
}()

// Lookup returns the catalog entry of t.
func Lookup(t Type) (Info, bool) {
	i, ok := byType[t]
	return i, ok
}

// Known reports whether t is in either family.
func Known(t Type) bool {
	_, ok := byType[t]
	return ok
}

// FamilyOf returns the family of t, or 0 for an unknown type.
func FamilyOf(t Type) Family { return byType[t].Family }

// All returns every known type in catalog order.
func All() []Info { return slices.Clone(catalog) }

// Preset names accepted in place of an explicit filter (spec §3.3).
const (
	PresetChat = "preset:chat"
	PresetFull = "preset:full"
)

// Preset returns the event types a preset stands for, in catalog order,
// and false for an unknown preset name.
func Preset(name string) ([]Type, bool) {
	var out []Type
	switch name {
	case PresetChat:
		for _, i := range catalog {
			if i.Chat {
				out = append(out, i.Type)
			}
		}
	case PresetFull:
		for _, i := range catalog {
			out = append(out, i.Type)
		}
	default:
		return nil, false
	}
	return out, true
}
