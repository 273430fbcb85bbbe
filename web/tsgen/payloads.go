package tsgen

import "github.com/metis-agent/metis/protocol"

// field is one payload field: its json name (with "?" when it may be
// absent) and its TypeScript type.
type field struct{ name, ts string }

// payloadFields declares each event type's payload as
// docs/event-catalog.md documents it. Events are built from maps in the
// core, so there is no Go type to reflect on: Generate fails when a
// catalog type has no entry here, and TestPayloadsCoverRecordedTraces
// fails when a recorded server payload carries a field not declared.
var payloadFields = map[protocol.EventType][]field{
	protocol.EventSessionCreated: {{"workspace_path", "string"}, {"model", "string"}, {"parent_session_id?", "string | null"}},
	protocol.EventTurnStarted:    {{"user_message", "Message"}},
	protocol.EventTurnCompleted: {{"outcome", "'completed' | 'failed'"}, {"stop_reason?", "string"}, {"error_class?", "string"},
		{"usage?", "Usage"}, {"llm_calls?", "number"}, {"duration_ms?", "number"}},
	protocol.EventTurnCancelled: {{"reason", "string"}, {"phase?", "'llm' | 'seam' | 'tools' | 'between_calls' | 'interrupted'"},
		{"partial_message_id?", "string"}, {"cancelled_tool_use_ids?", "string[]"}, {"usage?", "Usage"}, {"duration_ms?", "number"}},
	protocol.EventRouteDecided:          {{"model", "string"}, {"reason", "string"}, {"policy_version", "string"}},
	protocol.EventRoutingPolicyReloaded: {{"policy_version", "string"}, {"path?", "string"}},
	protocol.EventLLMCallStarted: {{"message_id", "string"}, {"model", "string"}, {"call_index", "number"},
		{"request?", "{ messages: number; tools: string[] }"}},
	protocol.EventLLMCallCompleted: {{"message_id", "string"}, {"model", "string"}, {"stop_reason", "string"}, {"usage", "Usage"},
		{"duration_ms?", "number"}},
	protocol.EventLLMCallFailed: {{"message_id", "string"}, {"model", "string"}, {"error_class", "string"}, {"message", "string"},
		{"usage?", "Usage"}, {"duration_ms?", "number"}},
	protocol.EventToolCalled: {{"tool_use_id", "string"}, {"tool_name", "string"}, {"message_id?", "string"}, {"input?", "unknown"}},
	protocol.EventToolCompleted: {{"tool_use_id", "string"}, {"tool_name", "string"}, {"summary", "string"}, {"result", "string"},
		{"truncated?", "boolean"}, {"duration_ms?", "number"}},
	protocol.EventToolFailed: {{"tool_use_id", "string"}, {"tool_name", "string"}, {"error_class", "string"}, {"message", "string"},
		{"started?", "boolean"}, {"duration_ms?", "number"}},
	protocol.EventDelegateStarted: {{"worker_session_id", "string"}, {"task", "string"}, {"model", "string"}, {"depth?", "number"}},
	protocol.EventDelegateCompleted: {{"worker_session_id", "string"}, {"success", "boolean"}, {"summary", "string"},
		{"cost_usd", "number"}},
	protocol.EventDelegateFailed: {{"worker_session_id", "string"},
		{"failure_mode", "'cancelled_by_user' | 'worker_error' | 'timeout' | (string & {})"}, {"message?", "string"},
		{"cost_usd?", "number"}},
	protocol.EventFeedbackSubmitted:         {{"rating", "string"}, {"comment?", "string"}},
	protocol.EventBusHandlerWarning:         {{"subscription_name?", "string"}, {"reason", "string"}},
	protocol.EventBusSubscriberRegistered:   {{"subscription_name", "string"}},
	protocol.EventBusSubscriberUnregistered: {{"subscription_name", "string"}},

	protocol.EventMessageStart:  {{"message_id", "string"}, {"role", "Role"}, {"model", "string"}},
	protocol.EventTextDelta:     {{"message_id", "string"}, {"content_block_index", "number"}, {"text", "string"}},
	protocol.EventThinkingDelta: {{"message_id", "string"}, {"content_block_index", "number"}, {"text", "string"}, {"signature", "string | null"}},
	protocol.EventToolUseStart: {{"message_id", "string"}, {"content_block_index", "number"}, {"tool_use_id", "string"},
		{"tool_name", "string"}},
	protocol.EventToolUseInputDelta: {{"message_id", "string"}, {"content_block_index", "number"}, {"tool_use_id", "string"},
		{"partial_json", "string"}},
	protocol.EventToolUseEnd: {{"message_id", "string"}, {"content_block_index", "number"}, {"tool_use_id", "string"},
		{"final_input", "unknown"}},
	protocol.EventMessageComplete: {{"message_id", "string"}, {"stop_reason", "string"}, {"final_content", "Block[]"}, {"usage?", "Usage"}},
}

// open marks payloads that carry further, type-specific details.
var open = map[protocol.EventType]bool{protocol.EventBusHandlerWarning: true}
