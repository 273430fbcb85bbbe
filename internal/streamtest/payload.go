package streamtest

import (
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

// PayloadOf decodes a received event's payload, failing the test if it
// does not decode.
func PayloadOf[T any](t testing.TB, e *protocol.EventEnvelope) T {
	t.Helper()
	return decodePayload[T](t, e.Type, e.Payload)
}

// EventPayloadOf decodes a recorded or stored event's payload, failing
// the test if it does not decode.
func EventPayloadOf[T any](t testing.TB, e *event.Event) T {
	t.Helper()
	return decodePayload[T](t, string(e.Type), e.Payload)
}

func decodePayload[T any](t testing.TB, typ string, payload []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		t.Fatalf("%s payload %s: %v", typ, payload, err)
	}
	return v
}

// Payload shapes the tests read (spec §5.3).
type (
	// DeltaPayload is text.delta's and thinking.delta's.
	DeltaPayload struct {
		MessageID string  `json:"message_id"`
		Index     int     `json:"content_block_index"`
		Text      string  `json:"text"`
		Signature *string `json:"signature"`
	}
	// ToolInputPayload is tool.use_input_delta's.
	ToolInputPayload struct {
		MessageID   string `json:"message_id"`
		Index       int    `json:"content_block_index"`
		ToolUseID   string `json:"tool_use_id"`
		PartialJSON string `json:"partial_json"`
	}
	// ToolUsePayload is tool.use_start's and tool.use_end's.
	ToolUsePayload struct {
		MessageID  string          `json:"message_id"`
		Index      int             `json:"content_block_index"`
		ToolUseID  string          `json:"tool_use_id"`
		ToolName   string          `json:"tool_name"`
		FinalInput json.RawMessage `json:"final_input"`
	}
	// CompletePayload is message.complete's.
	CompletePayload struct {
		MessageID    string          `json:"message_id"`
		StopReason   string          `json:"stop_reason"`
		FinalContent []message.Block `json:"final_content"`
		Usage        message.Usage   `json:"usage"`
	}
	// LLMPayload is llm.call_started's, llm.call_completed's and
	// llm.call_failed's.
	LLMPayload struct {
		MessageID  string        `json:"message_id"`
		StopReason string        `json:"stop_reason"`
		ErrorClass string        `json:"error_class"`
		Message    string        `json:"message"`
		Usage      message.Usage `json:"usage"`
	}
	// WarningPayload is bus.handler_warning's.
	WarningPayload struct {
		SubscriptionName string `json:"subscription_name"`
		Reason           string `json:"reason"`
		TurnID           string `json:"turn_id"`
	}
)
