package event

import "github.com/metis-agent/metis/protocol"

// The event catalog (type names, families, presets, actors) is part of
// the wire vocabulary and lives in package protocol. The names below are
// aliases, so that the core can keep writing event.TextDelta; each wire
// name is spelled once, in protocol.

// Type is an event type, "<domain>.<verb>".
type Type = protocol.EventType

// Family tells whether an event type is persisted.
type Family = protocol.EventFamily

// Families.
const (
	Catalog   = protocol.FamilyCatalog
	Streaming = protocol.FamilyStreaming
)

// Catalog event types.
const (
	SessionCreated = protocol.EventSessionCreated

	TurnStarted   = protocol.EventTurnStarted
	TurnCompleted = protocol.EventTurnCompleted
	TurnCancelled = protocol.EventTurnCancelled
	TurnQueued    = protocol.EventTurnQueued
	TurnSteered   = protocol.EventTurnSteered

	RouteDecided          = protocol.EventRouteDecided
	RoutingPolicyReloaded = protocol.EventRoutingPolicyReloaded

	LLMCallStarted   = protocol.EventLLMCallStarted
	LLMCallCompleted = protocol.EventLLMCallCompleted
	LLMCallFailed    = protocol.EventLLMCallFailed

	ToolCalled    = protocol.EventToolCalled
	ToolCompleted = protocol.EventToolCompleted
	ToolFailed    = protocol.EventToolFailed

	ToolBackgroundStarted = protocol.EventToolBackgroundStarted
	ToolBackgroundExited  = protocol.EventToolBackgroundExited

	DelegateStarted   = protocol.EventDelegateStarted
	DelegateCompleted = protocol.EventDelegateCompleted
	DelegateFailed    = protocol.EventDelegateFailed

	FeedbackSubmitted = protocol.EventFeedbackSubmitted

	ContextCompacting       = protocol.EventContextCompacting
	ContextCompacted        = protocol.EventContextCompacted
	ContextCompactionFailed = protocol.EventContextCompactionFailed
	SessionBudgetChanged    = protocol.EventSessionBudgetChanged
	ApprovalRequested       = protocol.EventApprovalRequested
	ApprovalResolved        = protocol.EventApprovalResolved
	SessionModeChanged      = protocol.EventSessionModeChanged
	SessionUpdated          = protocol.EventSessionUpdated

	WorkspaceCheckpointed     = protocol.EventWorkspaceCheckpointed
	WorkspaceCheckpointFailed = protocol.EventWorkspaceCheckpointFailed
	WorkspaceChanged          = protocol.EventWorkspaceChanged
	WorkspaceReverted         = protocol.EventWorkspaceReverted

	BusHandlerWarning       = protocol.EventBusHandlerWarning
	BusSubscriberRegistered = protocol.EventBusSubscriberRegistered
	BusSubscriberUnregister = protocol.EventBusSubscriberUnregistered
)

// Streaming-only event types (spec §5.3).
const (
	MessageStart      = protocol.EventMessageStart
	TextDelta         = protocol.EventTextDelta
	ThinkingDelta     = protocol.EventThinkingDelta
	ToolUseStart      = protocol.EventToolUseStart
	ToolUseInputDelta = protocol.EventToolUseInputDelta
	ToolUseEnd        = protocol.EventToolUseEnd
	MessageComplete   = protocol.EventMessageComplete
	ToolOutputDelta   = protocol.EventToolOutputDelta
)

// Actors the core emits events as.
const (
	ActorUser    = protocol.ActorUser
	ActorAgent   = protocol.ActorAgent
	ActorModel   = protocol.ActorModel
	ActorTool    = protocol.ActorTool
	ActorRouter  = protocol.ActorRouter
	ActorSession = protocol.ActorSession
	ActorBus     = protocol.ActorBus
	ActorCost    = protocol.ActorCost
)

// Info describes one catalog entry.
type Info = protocol.EventInfo

// Lookup returns the catalog entry of t.
func Lookup(t Type) (Info, bool) { return protocol.LookupEvent(t) }

// Known reports whether t is in either family.
func Known(t Type) bool { return protocol.KnownEvent(t) }

// FamilyOf returns the family of t, or 0 for an unknown type.
func FamilyOf(t Type) Family { return protocol.FamilyOf(t) }

// All returns every known type in catalog order.
func All() []Info { return protocol.EventCatalog() }

// Preset names accepted in place of an explicit filter (spec §3.3).
const (
	PresetChat = protocol.PresetChat
	PresetFull = protocol.PresetFull
)

// Preset returns the event types a preset stands for, in catalog order,
// and false for an unknown preset name.
func Preset(name string) ([]Type, bool) { return protocol.Preset(name) }
