package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go"
)

// event is one event of the stream, decoded by the SDK's own types
// inside the SDK's stream reader (ssestream.Stream, which also frames
// the server-sent events, skips pings and turns error events into API
// errors).
//
// A content_block_delta, nearly every event of a long answer, is decoded
// once, into the SDK's ContentBlockDeltaEvent. Every other event is
// decoded into the SDK's full MessageStreamEventUnion, which the
// translator reads through AsAny. The SDK's own Messages.NewStreaming
// decodes each event into that union and AsAny decodes it a second time
// into its variant: for a delta that is 1.7 times the CPU time and
// nearly twice the allocations of the single decode (see
// docs/benchmarks.md).
type event struct {
	isDelta bool
	delta   sdk.ContentBlockDeltaEvent   // when isDelta
	full    *sdk.MessageStreamEventUnion // otherwise
}

// UnmarshalJSON implements json.Unmarshaler. data is one event's JSON,
// already checked to be well-formed by encoding/json.
func (e *event) UnmarshalJSON(data []byte) error {
	if err := e.delta.UnmarshalJSON(data); err != nil {
		return err
	}
	if e.delta.Type == "content_block_delta" {
		e.isDelta = true
		return nil
	}
	e.delta = sdk.ContentBlockDeltaEvent{}
	e.full = &sdk.MessageStreamEventUnion{}
	return e.full.UnmarshalJSON(data)
}
