// Package anthropic provides the anthropic:* model adapter: it speaks the
// Anthropic Messages API with stream: true (contract §2) through the
// official SDK, and translates the provider's server-sent events into the
// canonical deltas of package model (spec §5.2, §5.3).
//
// It owns the conversion of canonical messages into Anthropic request
// parameters, the event-to-delta translation, the classification of
// Anthropic failures into model error classes, the idle-stream timeout
// (applied to the response body, below the SDK's event parser, because
// that parser drops ping events) and cancellation of the HTTP stream.
// Retries are model.RetryPolicy's, and only before the first delta; the
// SDK's own retries are disabled.
//
// The request goes through the SDK's client and its events through the
// SDK's stream reader, but a content_block_delta is decoded once, into
// the SDK's ContentBlockDeltaEvent, instead of into the full event union
// and then again into its variant (event.go): the deltas of a long
// answer are nearly all of its events.
//
// Mapping choices worth knowing:
//
//   - stop_reason end_turn, max_tokens, stop_sequence and tool_use pass
//     through; pause_turn (a server-tool turn paused by the provider, which
//     metis never asks for) and refusal (the model declined; its text, if
//     any, is the answer) become end_turn; model_context_window_exceeded
//     becomes max_tokens (the output was cut short). Unknown or missing
//     stop reasons become end_turn and are logged.
//   - redacted_thinking blocks and server tool blocks have no canonical
//     form: they produce no deltas (their index is skipped).
//   - Thinking blocks are sent back to the provider only when they carry a
//     signature; tool_result blocks go back as a user message, ahead of any
//     text of that message.
//   - An idle stream (nothing, pings included, for IdleTimeout) fails with
//     class timeout and is not retried: the person already waited that
//     long, and a retry could double it.
//   - message_stop stops the blocks the stream left open; a delta after
//     its block's stop, or a negative block index, fails the call as an
//     inconsistent stream (provider_error).
//   - A tool input that is not a JSON object at block stop is logged and
//     passed on unchanged; model.Accumulator records the error and the
//     agent fails that tool with invalid_input, so the model can retry.
//
// anthropic imports model, message and the Anthropic SDK only.
package anthropic
