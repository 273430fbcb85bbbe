// Package openai is the adapter for `openai:*` models (contract §2): it
// speaks the OpenAI Chat Completions API with stream: true at
// $OPENAI_BASE_URL (default https://api.openai.com/v1), which also serves
// local OpenAI-compatible servers such as Ollama, vLLM and llama.cpp.
//
// It owns:
//   - the request translation: canonical messages, system prompt and tool
//     specs to a Chat Completions request (thinking blocks are dropped,
//     tool_result blocks become one role "tool" message each);
//   - the stream translation: chat.completion.chunk events to canonical
//     model.Delta values (text, thinking from the reasoning fields some
//     compatible servers send, tool_use start / input / block stop), the
//     stop reason and the usage, tracked by hand rather than with the
//     SDK's accumulator, which drops chunks whose id differs from the
//     first one (several compatible servers vary it); each chunk is
//     decoded by the SDK's stream reader into its choices and usage only,
//     in the SDK's own types (chunk.go), not into the whole
//     ChatCompletionChunk;
//   - the HTTP layer around the SDK: its retries are off and
//     model.RetryPolicy retries only before the first delta; a middleware
//     enforces the idle timeout (model.IdleReader) and turns error
//     responses into classified *model.Error values with messages a
//     person can act on.
//
// Settings come only from Options (the config package reads the
// environment); the SDK's own OPENAI_* environment lookups are not used.
//
// openai imports model, message and the official SDK
// (github.com/openai/openai-go/v3) only; never the bus, the store or a
// transport of metis.
package openai
