package protocol

import (
	"slices"
	"strings"
)

// EventType is an event type, "<domain>.<verb>" (contract §4).
type EventType string

// Domain returns the part before the first dot.
func (t EventType) Domain() string {
	d, _, _ := strings.Cut(string(t), ".")
	return d
}

// EventFamily tells whether an event type is persisted.
type EventFamily uint8

const (
	// FamilyCatalog events are domain events: committed to the trace
	// store before anyone sees them.
	FamilyCatalog EventFamily = iota + 1
	// FamilyStreaming events are transient live updates (spec §5): never
	// persisted, sent straight from the agent loop to clients.
	FamilyStreaming
)

func (f EventFamily) String() string {
	switch f {
	case FamilyCatalog:
		return "catalog"
	case FamilyStreaming:
		return "streaming"
	}
	return "unknown"
}

// Catalog (persisted) event types.
const (
	EventSessionCreated EventType = "session.created"

	EventTurnStarted   EventType = "turn.started"
	EventTurnCompleted EventType = "turn.completed"
	EventTurnCancelled EventType = "turn.cancelled"

	EventRouteDecided          EventType = "route.decided"
	EventRoutingPolicyReloaded EventType = "routing.policy_reloaded"

	EventLLMCallStarted   EventType = "llm.call_started"
	EventLLMCallCompleted EventType = "llm.call_completed"
	EventLLMCallFailed    EventType = "llm.call_failed"

	EventToolCalled    EventType = "tool.called"
	EventToolCompleted EventType = "tool.completed"
	EventToolFailed    EventType = "tool.failed"

	// Background commands (shell with background: true,
	// docs/tool-dispatcher.md): one started, one ended.
	EventToolBackgroundStarted EventType = "tool.background_started"
	EventToolBackgroundExited  EventType = "tool.background_exited"

	EventDelegateStarted   EventType = "delegate.started"
	EventDelegateCompleted EventType = "delegate.completed"
	EventDelegateFailed    EventType = "delegate.failed"

	EventFeedbackSubmitted EventType = "feedback.submitted"

	// Permissions (contract §7, docs/permissions.md).
	EventApprovalRequested  EventType = "approval.requested"
	EventApprovalResolved   EventType = "approval.resolved"
	EventSessionModeChanged EventType = "session.mode_changed"

	EventBusHandlerWarning         EventType = "bus.handler_warning"
	EventBusSubscriberRegistered   EventType = "bus.subscriber_registered"
	EventBusSubscriberUnregistered EventType = "bus.subscriber_unregistered"
)

// Streaming-only event types (spec §5.3).
const (
	EventMessageStart      EventType = "message.start"
	EventTextDelta         EventType = "text.delta"
	EventThinkingDelta     EventType = "thinking.delta"
	EventToolUseStart      EventType = "tool.use_start"
	EventToolUseInputDelta EventType = "tool.use_input_delta"
	EventToolUseEnd        EventType = "tool.use_end"
	EventMessageComplete   EventType = "message.complete"

	// EventToolOutputDelta is a running shell call's live output
	// (docs/tool-dispatcher.md, "Live output"); the call's tool.completed
	// or tool.failed still carries its result.
	EventToolOutputDelta EventType = "tool.output_delta"
)

// Actors the server emits events as (the envelope's actor). The set is
// open: a client must accept any other string.
const (
	ActorUser    = "user"    // the person, through a client
	ActorAgent   = "agent"   // the agent loop
	ActorModel   = "model"   // a model adapter (streaming events)
	ActorTool    = "tool"    // the tool dispatcher
	ActorRouter  = "router"  // the routing engine
	ActorSession = "session" // the session manager
	ActorBus     = "bus"     // the bus itself (meta-events)
	ActorCost    = "cost"    // the cost accumulator
)

// EventInfo describes one entry of the event catalog.
type EventInfo struct {
	Type    EventType
	Family  EventFamily
	Emitter string // the component that emits it, for docs and debugging
	Chat    bool   // included in preset:chat
}

// catalog is the closed list of every event type the server emits.
// Adding a type here is the one step that makes it valid in filters and
// presets; docs/event-catalog.md documents each entry.
var catalog = []EventInfo{
	{EventSessionCreated, FamilyCatalog, "session manager", false},
	{EventTurnStarted, FamilyCatalog, "session manager", true},
	{EventTurnCompleted, FamilyCatalog, "agent loop", true},
	{EventTurnCancelled, FamilyCatalog, "agent loop", true},
	{EventTurnQueued, FamilyCatalog, "session manager", true},
	{EventTurnSteered, FamilyCatalog, "agent loop", true},
	{EventRouteDecided, FamilyCatalog, "router (via agent loop)", true},
	{EventRoutingPolicyReloaded, FamilyCatalog, "routing engine (server)", false},
	{EventLLMCallStarted, FamilyCatalog, "agent loop", true},
	{EventLLMCallCompleted, FamilyCatalog, "agent loop", true},
	{EventLLMCallFailed, FamilyCatalog, "agent loop", true},
	{EventToolCalled, FamilyCatalog, "tool dispatcher", true},
	{EventToolCompleted, FamilyCatalog, "tool dispatcher", true},
	{EventToolFailed, FamilyCatalog, "tool dispatcher", true},
	{EventToolBackgroundStarted, FamilyCatalog, "shell tool (background commands)", true},
	{EventToolBackgroundExited, FamilyCatalog, "shell tool (background commands; server after a crash)", true},
	{EventDelegateStarted, FamilyCatalog, "delegate tool", true},
	{EventDelegateCompleted, FamilyCatalog, "delegate tool", true},
	{EventDelegateFailed, FamilyCatalog, "delegate tool", true},
	{EventFeedbackSubmitted, FamilyCatalog, "HTTP API", true},
	{EventContextCompacting, FamilyCatalog, "agent loop (session manager for POST /compact)", true},
	{EventContextCompacted, FamilyCatalog, "agent loop (session manager for POST /compact)", true},
	{EventContextCompactionFailed, FamilyCatalog, "agent loop (session manager for POST /compact)", true},
	{EventSessionBudgetChanged, FamilyCatalog, "HTTP API (PATCH /sessions/{id})", false},
	{EventWorkspaceCheckpointed, FamilyCatalog, "agent loop", false},
	{EventWorkspaceCheckpointFailed, FamilyCatalog, "agent loop", true},
	{EventWorkspaceChanged, FamilyCatalog, "agent loop", false},
	{EventWorkspaceReverted, FamilyCatalog, "session manager (revert, undo, fork)", true},
	{EventApprovalRequested, FamilyCatalog, "tool dispatcher", true},
	{EventApprovalResolved, FamilyCatalog, "tool dispatcher (session manager after a crash)", true},
	{EventSessionModeChanged, FamilyCatalog, "session manager", true},
	{EventSessionUpdated, FamilyCatalog, "session manager (PATCH /sessions/{id})", true},
	{EventBusHandlerWarning, FamilyCatalog, "bus, streaming server, session manager", false},
	{EventBusSubscriberRegistered, FamilyCatalog, "bus, streaming server", false},
	{EventBusSubscriberUnregistered, FamilyCatalog, "bus, streaming server", false},

	{EventMessageStart, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventTextDelta, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventThinkingDelta, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventToolUseStart, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventToolUseInputDelta, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventToolUseEnd, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventMessageComplete, FamilyStreaming, "model adapter (via agent loop)", true},
	{EventToolOutputDelta, FamilyStreaming, "shell tool (via agent loop)", true},
}

var byType = func() map[EventType]EventInfo {
	m := make(map[EventType]EventInfo, len(catalog))
	for _, i := range catalog {
		m[i.Type] = i
	}
	return m
}()

// LookupEvent returns the catalog entry of t.
func LookupEvent(t EventType) (EventInfo, bool) {
	i, ok := byType[t]
	return i, ok
}

// KnownEvent reports whether t is in either family.
func KnownEvent(t EventType) bool {
	_, ok := byType[t]
	return ok
}

// FamilyOf returns the family of t, or 0 for an unknown type.
func FamilyOf(t EventType) EventFamily { return byType[t].Family }

// EventCatalog returns every known event type in catalog order.
func EventCatalog() []EventInfo { return slices.Clone(catalog) }

// Preset names accepted in place of an explicit filter (spec §3.3).
const (
	PresetChat = "preset:chat"
	PresetFull = "preset:full"
)

// Preset returns the event types a preset stands for, in catalog order,
// and false for an unknown preset name.
func Preset(name string) ([]EventType, bool) {
	var out []EventType
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
