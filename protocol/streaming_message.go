package protocol

// The assistant message a snapshot carries while its model call streams
// (docs/protocol.md, "Snapshot"): it is not stored yet, so it is built
// from the session's recent streaming events, and the deltas after the
// snapshot's seam continue it.

// The status of the message in flight.
const (
	// StatusStreaming is the status of an assistant message whose model
	// call was still streaming at the snapshot's seam: its content is
	// what streamed so far. Only a snapshot carries it; a stored message
	// never has it (clients also use it for a message they build from
	// deltas).
	StatusStreaming MessageStatus = "streaming"
)

// Fields of a streaming message in a snapshot, beyond the canonical
// message's. Both are omitted when empty.
const (
	// FieldStartMissing (true) marks a streaming message whose start the
	// server no longer holds (its memory ring let the first events of the
	// call go): content holds only what streamed after them, blocks it
	// knows nothing of are empty text blocks, and the message must be
	// shown as incomplete until message.complete brings the whole.
	FieldStartMissing = "start_missing"
	// FieldPartialInput, on a tool_use block of a streaming message, is
	// the raw input JSON streamed so far (the concatenated
	// tool.use_input_delta fragments; not parseable while incomplete);
	// input stays {} until tool.use_end. Later fragments append to it.
	FieldPartialInput = "partial_input"
)
