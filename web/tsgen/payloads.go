package tsgen

import "github.com/metis-agent/metis/internal/event"

// field is one payload field: its json name (with "?" when it may be
// absent) and its TypeScript type.
type field struct{ name, ts string }

// payloadFields declares each event type's payload as
// docs/event-catalog.md documents it. Events are built from maps in the
// core, so there is no Go type to reflect on: Generate fails when a
// catalog type has no entry here, and TestPayloadsCoverRecordedTraces
// fails when a recorded server payload carries a field not declared.
var payloadFields = map[event.Type][]field{
	event.SessionCreated: {{"workspace_path", "string"}, {"model", "string"}, {"parent_session_id?", "string | null"}},
	event.TurnStarted:    {{"user_message", "Message"}},
	event.TurnCompleted: {{"outcome", "'completed' | 'failed'"}, {"stop_reason?", "string"}, {"error_class?", "string"},
		{"usage?", "Usage"}, {"llm_calls?", "number"}, {"duration_ms?", "number"}},
	event.TurnCancelled: {{"reason", "string"}, {"phase?", "'llm' | 'seam' | 'tools' | 'between_calls' | 'interrupted'"},
		{"partial_message_id?", "string"}, {"cancelled_tool_use_ids?", "string[]"}, {"usage?", "Usage"}, {"duration_ms?", "number"}},
	event.RouteDecided:          {{"model", "string"}, {"reason", "string"}, {"policy_version", "string"}},
	event.RoutingPolicyReloaded: {{"policy_version", "string"}, {"path?", "string"}},
	event.LLMCallStarted: {{"message_id", "string"}, {"model", "string"}, {"call_index", "number"},
		{"request?", "{ messages: number; tools: string[] }"}},
	event.LLMCallCompleted: {{"message_id", "string"}, {"model", "string"}, {"stop_reason", "string"}, {"usage", "Usage"},
		{"duration_ms?", "number"}},
	event.LLMCallFailed: {{"message_id", "string"}, {"model", "string"}, {"error_class", "string"}, {"message", "string"},
		{"usage?", "Usage"}, {"duration_ms?", "number"}},
	event.ToolCalled: {{"tool_use_id", "string"}, {"tool_name", "string"}, {"message_id?", "string"}, {"input?", "unknown"}},
	event.ToolCompleted: {{"tool_use_id", "string"}, {"tool_name", "string"}, {"summary", "string"}, {"result", "string"},
		{"truncated?", "boolean"}, {"duration_ms?", "number"}},
	event.ToolFailed: {{"tool_use_id", "string"}, {"tool_name", "string"}, {"error_class", "string"}, {"message", "string"},
		{"started?", "boolean"}, {"duration_ms?", "number"}},
	event.DelegateStarted: {{"worker_session_id", "string"}, {"task", "string"}, {"model", "string"}, {"depth?", "number"}},
	event.DelegateCompleted: {{"worker_session_id", "string"}, {"success", "boolean"}, {"summary", "string"},
		{"cost_usd", "number"}},
	event.DelegateFailed: {{"worker_session_id", "string"},
		{"failure_mode", "'cancelled_by_user' | 'worker_error' | 'timeout' | (string & {})"}, {"message?", "string"},
		{"cost_usd?", "number"}},
	event.FeedbackSubmitted:       {{"rating", "string"}, {"comment?", "string"}},
	event.BusHandlerWarning:       {{"subscription_name?", "string"}, {"reason", "string"}},
	event.BusSubscriberRegistered: {{"subscription_name", "string"}},
	event.BusSubscriberUnregister: {{"subscription_name", "string"}},

	event.MessageStart:  {{"message_id", "string"}, {"role", "Role"}, {"model", "string"}},
	event.TextDelta:     {{"message_id", "string"}, {"content_block_index", "number"}, {"text", "string"}},
	event.ThinkingDelta: {{"message_id", "string"}, {"content_block_index", "number"}, {"text", "string"}, {"signature", "string | null"}},
	event.ToolUseStart: {{"message_id", "string"}, {"content_block_index", "number"}, {"tool_use_id", "string"},
		{"tool_name", "string"}},
	event.ToolUseInputDelta: {{"message_id", "string"}, {"content_block_index", "number"}, {"tool_use_id", "string"},
		{"partial_json", "string"}},
	event.ToolUseEnd: {{"message_id", "string"}, {"content_block_index", "number"}, {"tool_use_id", "string"},
		{"final_input", "unknown"}},
	event.MessageComplete: {{"message_id", "string"}, {"stop_reason", "string"}, {"final_content", "Block[]"}, {"usage?", "Usage"}},
}

// open marks payloads that carry further, type-specific details.
var open = map[event.Type]bool{event.BusHandlerWarning: true}
