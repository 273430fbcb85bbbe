package tsgen

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/metis-agent/metis/protocol"
)

// field is one payload field: its json name (with "?" when it may be
// absent) and its TypeScript type.
type field struct{ name, ts string }

// payloadTS gives the TypeScript type of the payload fields whose Go type
// says less than the wire does: unions of known strings, and the raw
// JSON of canonical messages, blocks and usage. Every other field's type
// is read by reflection from protocol's payload structs.
var payloadTS = map[protocol.EventType]map[string]string{
	protocol.EventTurnStarted:   {"user_message": "Message"},
	protocol.EventTurnCompleted: {"outcome": "'completed' | 'failed'", "usage": "Usage"},
	protocol.EventTurnCancelled: {"phase": "'llm' | 'seam' | 'tools' | 'between_calls' | 'approval' | 'interrupted' | 'compaction' | 'queued'", "usage": "Usage"},
	protocol.EventTurnQueued:    {"user_message": "Message", "source": "QueueSource"},
	protocol.EventTurnSteered:   {"user_message": "Message"},
	protocol.EventLLMCallStarted: {"request": "{ messages: number; tools: string[]; system_sha256?: string; max_tokens?: number; " +
		"context_tokens?: number; context_window?: number }"},
	protocol.EventContextCompacting: {"trigger": openUnion(protocol.CompactAuto, protocol.CompactOverflow, protocol.CompactManual)},
	protocol.EventContextCompacted: {"trigger": openUnion(protocol.CompactAuto, protocol.CompactOverflow, protocol.CompactManual),
		"method": openUnion(protocol.CompactStub, protocol.CompactSummary, protocol.CompactDrop), "message": "Message", "usage": "Usage"},
	protocol.EventContextCompactionFailed: {"trigger": openUnion(protocol.CompactAuto, protocol.CompactOverflow, protocol.CompactManual),
		"usage": "Usage"},
	protocol.EventApprovalRequested:  {"kind": "ToolKind", "mode": "Mode"},
	protocol.EventApprovalResolved:   {"decision": "Decision", "reason": "ApprovalReason", "scope": "'once' | 'session'"},
	protocol.EventSessionModeChanged: {"mode": "Mode", "previous_mode": "Mode"},
	protocol.EventSessionCreated:     {"mode": "Mode"},
	protocol.EventWorkspaceReverted:  {"trigger": "RevertTrigger"},
	protocol.EventWorkspaceChanged:   {"files": "FileChange[]"},
	protocol.EventLLMCallCompleted:   {"usage": "Usage"},
	protocol.EventLLMCallFailed:      {"usage": "Usage"},
	protocol.EventDelegateFailed: {
		"failure_mode": openUnion(protocol.DelegateFailureCancelled, protocol.DelegateFailureWorker,
			protocol.DelegateFailureTimeout, protocol.DelegateFailureInterrupted)},
	protocol.EventToolBackgroundExited: {"reason": openUnion(protocol.BackgroundExited, protocol.BackgroundKilled, protocol.BackgroundTimeout,
		protocol.BackgroundSessionDeleted, protocol.BackgroundServerShutdown, protocol.BackgroundServerLost, protocol.BackgroundSupervisorKilled)},
	protocol.EventMessageStart:    {"role": "Role"},
	protocol.EventMessageComplete: {"final_content": "Block[]", "usage": "Usage"},
	protocol.EventToolOutputDelta: {"stream": openUnion(protocol.OutputStdout, protocol.OutputStderr)},
}

// openUnion is the TypeScript type of a string field with the known
// values given: any other string is accepted too.
func openUnion(known ...string) string {
	var b strings.Builder
	for _, k := range known {
		fmt.Fprintf(&b, "'%s' | ", k)
	}
	return b.String() + "(string & {})"
}

// open marks payloads that carry further, type-specific details.
var open = map[protocol.EventType]bool{protocol.EventBusHandlerWarning: true}

// payloadFields declares each event type's payload, from protocol's
// payload structs (protocol.NewPayload): a field is optional when it is
// omitempty. Generate fails when a catalog type has no payload struct,
// and TestPayloadsCoverRecordedTraces fails when a recorded server
// payload carries a field not declared, or lacks a required one.
var payloadFields = func() map[protocol.EventType][]field {
	out := map[protocol.EventType][]field{}
	for _, i := range protocol.EventCatalog() {
		p := protocol.NewPayload(i.Type)
		if p == nil {
			continue
		}
		t := reflect.TypeOf(p).Elem()
		var fs []field
		for _, f := range jsonFields(t) {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			ts, ok := payloadTS[i.Type][name]
			if !ok {
				ts = tsType(f.Type)
			}
			if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
				name += "?"
			}
			fs = append(fs, field{name, ts})
		}
		out[i.Type] = fs
	}
	return out
}()

// checkPayloadTS fails on an override naming a field no payload has.
func checkPayloadTS() error {
	for t, fs := range payloadTS {
		for name := range fs {
			found := false
			for _, f := range payloadFields[t] {
				found = found || strings.TrimSuffix(f.name, "?") == name
			}
			if !found {
				return fmt.Errorf("tsgen: payloadTS names %s.%s, which protocol's payload struct lacks", t, name)
			}
		}
	}
	return nil
}
